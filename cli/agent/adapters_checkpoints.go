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

// checkpointHandler serves CheckpointsPath from w. On a server, relay
// (non-nil) serves ?node=OTHER by fetching from that node: a client knows
// no other node's address, so it asks a server (serverCheckpoints).
func checkpointHandler(w *exec.Worker, relay exec.CheckpointFetcher, self string) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if !exec.ValidCheckpointName(name) {
			http.Error(rw, fmt.Sprintf("name %q: not a checkpoint directory name", name), http.StatusBadRequest)
			return
		}
		if node := r.URL.Query().Get("node"); node != "" && node != self {
			if relay == nil {
				http.Error(rw, fmt.Sprintf("node %q: this agent serves only its own checkpoints", node), http.StatusBadRequest)
				return
			}
			relayCheckpoint(rw, r, relay, node, name)
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

// relayCheckpoint streams node's checkpoint name to rw: errors before the
// first byte are a status (404 for none), after it the stream is cut.
func relayCheckpoint(rw http.ResponseWriter, r *http.Request, relay exec.CheckpointFetcher, node, name string) {
	fw := &firstByteWriter{rw: rw}
	err := relay.FetchCheckpoint(r.Context(), node, name, fw)
	switch {
	case err == nil && !fw.wrote:
		rw.Header().Set("Content-Type", "application/x-tar")
		rw.WriteHeader(http.StatusOK)
	case err != nil && !fw.wrote && errors.Is(err, exec.ErrNoCheckpoint):
		http.Error(rw, err.Error(), http.StatusNotFound)
	case err != nil && !fw.wrote:
		http.Error(rw, err.Error(), http.StatusBadGateway)
	case err != nil:
		panic(http.ErrAbortHandler) // cut the tar short: the reader fails on it
	}
}

// firstByteWriter sets the tar content type before its first write.
type firstByteWriter struct {
	rw    http.ResponseWriter
	wrote bool
}

func (f *firstByteWriter) Write(p []byte) (int, error) {
	if !f.wrote {
		f.rw.Header().Set("Content-Type", "application/x-tar")
		f.wrote = true
	}
	return f.rw.Write(p)
}

func (c checkpointFetcher) FetchCheckpoint(ctx context.Context, node, name string, out io.Writer) error {
	addr, client, err := peerAddr(c.f, node, "the checkpoint is")
	if err != nil {
		return err
	}
	return fetchCheckpoint(ctx, c.client, c.scheme+"://"+addr+"/v1/internal/checkpoints/"+url.PathEscape(name), peerAuth(c.acl, node, client), node, out)
}

// fetchCheckpoint copies the tar stream at u (a CheckpointsPath URL) to
// out; node names the holder in errors.
func fetchCheckpoint(ctx context.Context, hc *http.Client, u string, auth func(http.Header), node string, out io.Writer) error {
	resp, err := peerGet(ctx, hc, u, auth)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		_, err = io.Copy(out, resp.Body)
		return err
	case http.StatusNotFound:
		return &fetchStatusError{fmt.Errorf("%w on node %s", exec.ErrNoCheckpoint, node)}
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return &fetchStatusError{fmt.Errorf("node %s: HTTP %d: %s", node, resp.StatusCode, b)}
}
