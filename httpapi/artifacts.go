package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Artifacts (issue 15): the list lives in the attempt record (raft), the
// bytes on the node that ran the attempt. Any node lists them; a download
// is served by the holding node, proxied like logs (logs.go).

// ArtifactList is GET /v1/jobs/{id}/artifacts.
type ArtifactList struct {
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	// Node holds the bytes; NodeStatus is its gossip state as this node
	// sees it (a dead node's artifacts cannot be downloaded).
	Node       string         `json:"node"`
	NodeStatus string         `json:"node_status,omitempty"`
	Artifacts  []fsm.Artifact `json:"artifacts"`
	TotalBytes int64          `json:"total_bytes"`
	Warning    string         `json:"warning,omitempty"`
	// Store and Stored say where else the bytes are: the object store's
	// location and the outputs' state there (pending, stored, partial).
	Store     string   `json:"store,omitempty"`
	Stored    string   `json:"stored,omitempty"`
	NotStored []string `json:"not_stored,omitempty"`
}

// artifactAttempt finds the attempt whose artifacts a request names:
// ?attempt=N, else the job's last finished attempt; and its node.
func (s *server) artifactAttempt(r *http.Request) (*fsm.Attempt, *fsm.Node, error) {
	id := r.PathValue("id")
	num, err := attemptParam(r)
	if err != nil {
		return nil, nil, err
	}
	if m := r.URL.Query().Get("min_index"); m != "" {
		idx, err := strconv.ParseUint(m, 10, 64)
		if err != nil {
			return nil, nil, invalid("min_index", "must be a raft index (got %q)", m)
		}
		if err := s.waitApplied(r.Context(), idx); err != nil {
			return nil, nil, err
		}
	}
	var at *fsm.Attempt
	var node *fsm.Node
	err = s.state.View(func(tx *fsm.Tx) error {
		var err error
		if num > 0 {
			at, err = tx.Attempt(id, num)
		} else {
			at, err = tx.LastFinishedAttempt(id)
		}
		if err != nil {
			return err
		}
		node, err = tx.Node(at.Node)
		if errors.Is(err, fsm.ErrNotFound) {
			err = nil // garbage-collected: the artifacts are gone with it
		}
		return err
	})
	return at, node, err
}

// minIndexWait bounds how long a read with min_index waits for this node
// to apply that index.
const minIndexWait = 5 * time.Second

// waitApplied waits until this node has applied index idx. A node that
// learnt of an artifact (a parent's finish) asks the node holding it with
// its own applied index: the holder, a follower, may not have applied the
// finish yet, and would answer "no such artifact" for a file it has.
func (s *server) waitApplied(ctx context.Context, idx uint64) error {
	if s.state.AppliedIndex() >= idx {
		return nil
	}
	ch, stop := s.state.Watch()
	defer stop()
	waitingForIndex()
	timeout := time.NewTimer(minIndexWait)
	defer timeout.Stop()
	for s.state.AppliedIndex() < idx {
		select {
		case <-ch:
		case <-timeout.C:
			return fmt.Errorf("%w: this node has applied index %d, not yet %d (min_index)", ErrUnavailable, s.state.AppliedIndex(), idx)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// waitingForIndex lets tests see a read wait for its min_index.
var waitingForIndex = func() {}

// InternalArtifactsPath is the node-to-node artifact download: GET
// InternalArtifactsPath+"{job}/{path...}?attempt=N&min_index=I", what a node fetching a
// parent's artifact for a child's inputs asks the node that holds it. Under
// /v1/internal/ it needs the cluster-internal secret (ACL) and an agent
// certificate (TLS) instead of a user's token: no user is behind the fetch.
// The agent routes it to the API like ForwardedSubmitsPath.
const InternalArtifactsPath = "/v1/internal/artifacts/"

// listArtifacts handles GET /v1/jobs/{id}/artifacts[?attempt=N].
func (s *server) listArtifacts(w http.ResponseWriter, r *http.Request) {
	at, node, err := s.artifactAttempt(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := ArtifactList{JobID: at.JobID, Attempt: at.Num, Node: at.Node, Artifacts: at.Artifacts, Warning: at.Warning}
	if out.Artifacts == nil {
		out.Artifacts = []fsm.Artifact{}
	}
	if node != nil {
		out.NodeStatus = string(node.Gossip)
	}
	for _, a := range at.Artifacts {
		out.TotalBytes += a.Size
	}
	if o := at.Outputs; o != nil {
		out.Store, out.Stored, out.NotStored = o.Store, o.State, o.NotStored
	}
	writeJSON(w, http.StatusOK, out)
}

// getArtifact handles GET /v1/jobs/{id}/artifacts/{path...}[?attempt=N]:
// the file's bytes, from this node or proxied from the one that holds it.
// Only listed paths are served, and the holding node resolves them inside
// the attempt's artifacts directory (no "..", no symlinks out).
func (s *server) getArtifact(w http.ResponseWriter, r *http.Request) {
	path := r.PathValue("path")
	if err := fsm.ValidArtifactPath(path); err != nil {
		s.writeError(w, r, invalid("path", "%v", err))
		return
	}
	at, node, err := s.artifactAttempt(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var listed *fsm.Artifact
	for i := range at.Artifacts {
		if at.Artifacts[i].Path == path {
			listed = &at.Artifacts[i]
			break
		}
	}
	if listed == nil {
		s.writeError(w, r, fmt.Errorf("%w: job %s attempt %d has no artifact %q", fsm.ErrNotFound, at.JobID, at.Num, path))
		return
	}
	stored := storedObject(at, fsm.OutputArtifact(path))
	if at.Node != s.cluster.NodeName() {
		if node == nil || node.HTTPAddr == "" || node.Gossip == fsm.NodeDead || node.Gossip == fsm.NodeLeft {
			if stored != nil {
				s.serveObject(w, r, at, stored, HeaderArtifactSource, "application/octet-stream")
				return
			}
			state := "gone from the cluster"
			if node != nil {
				state = string(node.Gossip)
			}
			s.writeError(w, r, fmt.Errorf("%w: artifact %q of job %s attempt %d is kept only on node %s, which is %s", ErrUnreachable, path, at.JobID, at.Num, at.Node, state))
			return
		}
		// The holder must have applied what this node knows (the listing).
		q := r.URL.Query()
		q.Set("min_index", strconv.FormatUint(s.state.AppliedIndex(), 10))
		q.Set("attempt", strconv.Itoa(at.Num)) // a client agent (no state) serves only that
		r.URL.RawQuery = q.Encode()
		s.proxyOutput(w, r, at, node.HTTPAddr, stored, HeaderArtifactSource, "application/octet-stream")
		return
	}
	if s.artifacts == nil {
		s.writeError(w, r, fmt.Errorf("%w: this node has no executor to read artifacts from", ErrUnavailable))
		return
	}
	f, err := s.artifacts.OpenArtifact(at.JobID, at.Num, path)
	if err != nil && stored != nil {
		s.serveObject(w, r, at, stored, HeaderArtifactSource, "application/octet-stream")
		return
	}
	if err != nil {
		s.writeError(w, r, fmt.Errorf("artifact %q of job %s attempt %d on node %s (evicted or expired?): %w", path, at.JobID, at.Num, at.Node, err))
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set(HeaderAttempt, strconv.Itoa(at.Num))
	w.Header().Set(HeaderArtifactNode, at.Node)
	w.Header().Set(HeaderArtifactSource, SourceNode)
	// ServeContent: Content-Length, Range and If-Modified-Since.
	http.ServeContent(w, r, "", st.ModTime(), f)
}

// HeaderArtifactNode names the node that served an artifact's bytes.
const HeaderArtifactNode = "X-Foreman-Artifact-Node"
