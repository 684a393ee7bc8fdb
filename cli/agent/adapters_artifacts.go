package agent

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/foreman-sched/foreman/exec"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// workerArtifacts serves this node's artifacts to the API, mapping exec's
// "not here" onto fs.ErrNotExist (404).
type workerArtifacts struct{ w *exec.Worker }

func (a workerArtifacts) OpenArtifact(jobID string, attempt int, path string) (*os.File, error) {
	f, err := a.w.OpenArtifact(jobID, attempt, path)
	if errors.Is(err, exec.ErrNoSuchArtifact) && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	return f, err
}

// artifactFetcher fetches a parent's artifact for a child's inputs from
// the node that holds it, through that node's internal artifact endpoint
// (httpapi.InternalArtifactsPath): node to node like the other
// /v1/internal/ calls, with the cluster-internal secret (ACL) and this
// agent's certificate (mutual TLS); no user's token is involved.
type artifactFetcher struct {
	f      *fsm.FSM
	acl    *httpapi.ACL
	scheme string
	hc     *http.Client
}

// newArtifactFetcher dials other agents with peerTLS (nil: plain HTTP).
func newArtifactFetcher(f *fsm.FSM, acl *httpapi.ACL, peerTLS *tls.Config) artifactFetcher {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     peerTLS,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	}
	a := artifactFetcher{f: f, acl: acl, scheme: "http", hc: &http.Client{Transport: tr}}
	if peerTLS != nil {
		a.scheme = "https"
	}
	return a
}

func (a artifactFetcher) FetchArtifact(ctx context.Context, node, jobID string, attempt int, path string, out io.Writer) error {
	addr, client, err := peerAddr(a.f, node, "the only copy is")
	if err != nil {
		return err
	}
	// The holder answers once it has applied what this node knows: the
	// parent's finish, which lists the artifact.
	return fetchArtifact(ctx, a.hc, a.scheme+"://"+addr, peerAuth(a.acl, node, client), "node "+node,
		jobID, attempt, path, a.f.AppliedIndex(), out)
}

// fetchArtifact copies one artifact from the agent at base through its
// internal artifact endpoint, which serves it from disk or proxies to the
// node holding it; the agent answers once it has applied minIndex. from
// names the source in errors.
func fetchArtifact(ctx context.Context, hc *http.Client, base string, auth func(http.Header), from string,
	jobID string, attempt int, path string, minIndex uint64, out io.Writer) error {
	els := strings.Split(path, "/")
	for i, e := range els {
		els[i] = url.PathEscape(e)
	}
	u := base + httpapi.InternalArtifactsPath + url.PathEscape(jobID) + "/" + strings.Join(els, "/") +
		"?attempt=" + strconv.Itoa(attempt) + "&min_index=" + strconv.FormatUint(minIndex, 10)
	resp, err := peerGet(ctx, hc, u, auth)
	if err != nil {
		return fmt.Errorf("artifact %s of %s from %s: %w", path, jobID, from, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e httpapi.ErrorBody
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(b))
		}
		return &fetchStatusError{fmt.Errorf("artifact %s of %s from %s: %s: %s", path, jobID, from, resp.Status, e.Error)}
	}
	n, err := io.Copy(out, resp.Body)
	if err != nil {
		return fmt.Errorf("reading artifact %s of %s from %s: %w", path, jobID, from, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return fmt.Errorf("artifact %s of %s from %s: got %d of %d bytes", path, jobID, from, n, resp.ContentLength)
	}
	return nil
}

// fetchStatusError is an answer other than 200: the agent was reached
// and said no, so asking another server would not help.
type fetchStatusError struct{ error }

func (e *fetchStatusError) Unwrap() error { return e.error }

// nodeUsage reads this node's jobs cgroup for GET /v1/nodes/{name}/usage.
type nodeUsage struct{}

func (nodeUsage) NodeUsage(node string) (cpuSeconds, memBytes float64, cpuOK, memOK bool) {
	return exec.NodeUsage(node)
}

// peerAddr is node's API address for a node-to-node fetch, or an error
// saying that what (e.g. "the only copy is") is on a node that cannot answer.
func peerAddr(f *fsm.FSM, node, what string) (addr string, client bool, err error) {
	var state fsm.GossipState
	err = f.View(func(tx *fsm.Tx) error {
		n, err := tx.Node(node)
		if err != nil {
			return err
		}
		addr, state, client = n.HTTPAddr, n.Gossip, n.Role == fsm.RoleClient
		return nil
	})
	if err != nil {
		return "", false, fmt.Errorf("node %s: %w", node, err)
	}
	if addr == "" || state == fsm.NodeDead || state == fsm.NodeLeft {
		return "", false, fmt.Errorf("%s on node %s, which is %s", what, node, state)
	}
	return addr, client, nil
}

// peerAuth is how this server authenticates to node: the cluster-internal
// secret to a server, to a client agent only the client's own key (a
// client is trusted less and never sees the secret).
func peerAuth(acl *httpapi.ACL, node string, client bool) func(http.Header) {
	if !client {
		return acl.SetInternalAuth
	}
	return func(h http.Header) { acl.SetClientKey(h, node) }
}

// peerGet GETs u from another agent, authenticated by auth (peerAuth;
// nil: not at all).
func peerGet(ctx context.Context, hc *http.Client, u string, auth func(http.Header)) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if auth != nil {
		auth(req.Header)
	}
	return hc.Do(req)
}

// gpuUsage measures this node's jobs on their GPUs (httpapi.GPUUsage) from
// the worker's nvidia-smi sample.
type gpuUsage struct{ node string }

func (g gpuUsage) JobGPUUsage(job string, uuids []string) ([]httpapi.GPUDeviceUse, time.Time, string, error) {
	devs, at, note, err := exec.JobGPUUsage(g.node, job, uuids)
	out := make([]httpapi.GPUDeviceUse, len(devs))
	for i, d := range devs {
		out[i] = httpapi.GPUDeviceUse{UUID: d.UUID, MemoryBytes: d.MemoryBytes, SMRatio: d.SMRatio}
	}
	return out, at, note, err
}
