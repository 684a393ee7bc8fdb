package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/foreman-sched/foreman/exec"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// CheckpointsPath is the node-to-node route that serves one checkpoint
// directory of this node as a tar stream (exec.Worker.WriteCheckpoint): a
// task's next attempt on another node fetches it from here
// (checkpointFetcher). Guarded like every /v1/internal/ route: the
// cluster-internal secret under ACL, an agent certificate under TLS.
const CheckpointsPath = "GET /v1/internal/checkpoints/{name}"

// checkpointHandler serves CheckpointsPath from w.
func checkpointHandler(w *exec.Worker) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if !exec.ValidCheckpointName(name) {
			http.Error(rw, fmt.Sprintf("name %q: not a checkpoint directory name", name), http.StatusBadRequest)
			return
		}
		// Errors before the first byte are a status; after it, the tar
		// stream is cut short and the reader fails on it.
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(w.WriteCheckpoint(name, pw)) }()
		defer pr.Close()
		buf := make([]byte, 32<<10)
		n, err := io.ReadFull(pr, buf)
		if errors.Is(err, exec.ErrNoCheckpoint) {
			http.Error(rw, err.Error(), http.StatusNotFound)
			return
		}
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		rw.Header().Set("Content-Type", "application/x-tar")
		rw.Write(buf[:n])
		if err == nil {
			io.Copy(rw, pr)
		}
	})
}

// checkpointFetcher fetches a checkpoint directory from the node that
// holds it (exec.CheckpointFetcher), with the cluster-internal secret and
// the agent's client certificate.
type checkpointFetcher struct {
	f      *fsm.FSM
	acl    *httpapi.ACL
	client *http.Client
	scheme string
}

func newCheckpointFetcher(f *fsm.FSM, acl *httpapi.ACL, peerTLS *tls.Config) checkpointFetcher {
	// A partitioned holder must not hold the attempt's start for long:
	// connect and first byte are bounded apart from the transfer.
	tr := &http.Transport{DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		TLSHandshakeTimeout: 5 * time.Second, ResponseHeaderTimeout: 10 * time.Second, TLSClientConfig: peerTLS}
	scheme := "http"
	if peerTLS != nil {
		scheme = "https"
	}
	return checkpointFetcher{f: f, acl: acl, client: &http.Client{Transport: tr}, scheme: scheme}
}

func (c checkpointFetcher) FetchCheckpoint(ctx context.Context, node, name string, out io.Writer) error {
	addr, err := peerAddr(c.f, node, "the checkpoint is")
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.scheme+"://"+addr+"/v1/internal/checkpoints/"+url.PathEscape(name), nil)
	if err != nil {
		return err
	}
	c.acl.SetInternalAuth(req.Header)
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		_, err = io.Copy(out, resp.Body)
		return err
	case http.StatusNotFound:
		return fmt.Errorf("%w on node %s", exec.ErrNoCheckpoint, node)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return fmt.Errorf("node %s: HTTP %d: %s", node, resp.StatusCode, b)
}
