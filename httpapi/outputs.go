package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/foreman-sched/foreman/fsm"
)

// Outputs in the object store (issue 25). An attempt's artifacts and logs
// are read from its node while the node can serve them, and from the
// cluster's object store after (the node is dead, left, gone, or removed
// them). The bytes go through this API rather than as presigned URLs: the
// API's tokens and namespaces decide who reads what (a key is never taken
// from the request, only from the attempt record of a job the caller may
// read), the store's credentials stay on the agents, and clients need no
// route to the store. The cost is that the bytes pass through one agent.

// Sources of served bytes (HeaderArtifactSource, HeaderLogSource).
const (
	SourceNode  = "node"
	SourceStore = "store"
)

// HeaderArtifactSource says where an artifact's bytes came from: "node"
// or "store".
const HeaderArtifactSource = "X-Foreman-Artifact-Source"

// storedObject is the record of the output name of at in the store, or nil.
func storedObject(at *fsm.Attempt, name string) *fsm.StoredObject {
	if at.Outputs == nil || at.Outputs.State == fsm.OutputsPending {
		return nil
	}
	return at.Outputs.Object(name)
}

// proxyOutput proxies a read of an output of at to at's node (at addr);
// when that node cannot be reached at all, stored (nil: none) answers
// from the object store instead (serveObject's header and contentType).
func (s *server) proxyOutput(w http.ResponseWriter, r *http.Request, at *fsm.Attempt, addr string, stored *fsm.StoredObject, header, contentType string) {
	var fallback http.HandlerFunc
	if stored != nil {
		fallback = func(w http.ResponseWriter, r *http.Request) {
			s.serveObject(w, r, at, stored, header, contentType)
		}
	}
	s.proxyOr(w, r, at.Node, addr, fallback)
}

// serveObject answers with obj's bytes from the object store. header is
// the source header to set (HeaderArtifactSource or HeaderLogSource);
// contentType the response's type.
func (s *server) serveObject(w http.ResponseWriter, r *http.Request, at *fsm.Attempt, obj *fsm.StoredObject, header, contentType string) {
	switch {
	case s.objects == nil:
		s.writeError(w, r, fmt.Errorf("%w: %s of job %s attempt %d is in %s, but this agent has no --object-store to read it from", ErrUnavailable, obj.Name, at.JobID, at.Num, at.Outputs.Store))
		return
	case s.objects.Location() != at.Outputs.Store:
		s.writeError(w, r, fmt.Errorf("%w: %s of job %s attempt %d is in %s, not in this agent's store %s", ErrUnavailable, obj.Name, at.JobID, at.Num, at.Outputs.Store, s.objects.Location()))
		return
	}
	rc, size, err := s.objects.Open(r.Context(), obj.Key)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("%w: %s of job %s attempt %d from the object store: %v", ErrUnreachable, obj.Name, at.JobID, at.Num, err))
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.Header().Set(HeaderAttempt, strconv.Itoa(at.Num))
	w.Header().Set(header, SourceStore)
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, rc); err != nil && r.Context().Err() == nil {
		s.log.WarnContext(r.Context(), "object download ended early", "key", obj.Key, "err", err)
	}
}
