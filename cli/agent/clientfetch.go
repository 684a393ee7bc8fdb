package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
)

// serverArtifacts is a client's exec.ArtifactFetcher. A client knows no
// other node's address (it holds no state), so it asks a server (its
// stream's first, then the others) for a parent's artifact; the server
// serves it from its disk or proxies to the node that holds it, another
// client included. The server waits until it has applied the index the
// client's work came at, which lists the artifact.
type serverArtifacts struct {
	wc *workClient
	hc *http.Client
}

func (s serverArtifacts) FetchArtifact(ctx context.Context, node, jobID string, attempt int, path string, out io.Writer) error {
	return s.wc.fromServers(ctx, out, func(base string, w io.Writer) error {
		return fetchArtifact(ctx, s.hc, base, s.wc.auth, fmt.Sprintf("node %s via server %s", node, base),
			jobID, attempt, path, s.wc.Index(), w)
	})
}

// serverCheckpoints is a client's exec.CheckpointFetcher: it asks a
// server (its stream's first) for another node's checkpoint directory,
// which the server fetches from that node (checkpointHandler's relay).
type serverCheckpoints struct {
	wc *workClient
	hc *http.Client
}

func (s serverCheckpoints) FetchCheckpoint(ctx context.Context, node, name string, out io.Writer) error {
	return s.wc.fromServers(ctx, out, func(base string, w io.Writer) error {
		return fetchCheckpoint(ctx, s.hc, base+"/v1/internal/checkpoints/"+url.PathEscape(name)+"?node="+url.QueryEscape(node),
			s.wc.auth, node, w)
	})
}

// fromServers runs fetch against the client's servers, its stream's first,
// until one is reached. Another server is asked only when this one was
// not: one that answered no would answer the same, and a cut transfer has
// already written part of out.
func (c *workClient) fromServers(ctx context.Context, out io.Writer, fetch func(base string, w io.Writer) error) error {
	cw := &countingWriter{w: out}
	var errs []error
	for _, base := range c.serversCurrentFirst() {
		err := fetch(base, cw)
		var status *fetchStatusError
		if err == nil || errors.As(err, &status) || ctx.Err() != nil || cw.n > 0 {
			return err
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// serversCurrentFirst is the client's servers, the one of its open
// stream first.
func (c *workClient) serversCurrentFirst() []string {
	servers := slices.Clone(c.servers)
	if cur := c.Server(); cur != "" {
		servers = append([]string{cur}, slices.DeleteFunc(servers, func(u string) bool { return u == cur })...)
	}
	return servers
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
