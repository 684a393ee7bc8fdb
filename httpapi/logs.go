package httpapi

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// HeaderLogSource says where log bytes came from: "node" (the executing
// node's log file) or "stderr_tail" (the tail kept in the state machine,
// served when the node cannot be reached).
const HeaderLogSource = "X-Foreman-Log-Source"

// attemptParam is ?attempt=N, or 0 when absent (the caller's default).
func attemptParam(r *http.Request) (int, error) {
	a := r.URL.Query().Get("attempt")
	if a == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(a)
	if err != nil || n < 1 {
		return 0, invalid("attempt", "must be an attempt number, 1 or more (got %q)", a)
	}
	return n, nil
}

// attemptAndNode reads the attempt of job id that r's ?attempt=N names
// (default: the latest) and the node it was placed on; with goneOK a node
// no longer in the state is nil rather than an error.
func (s *server) attemptAndNode(r *http.Request, id string, goneOK bool) (at *fsm.Attempt, node *fsm.Node, err error) {
	num, err := attemptParam(r)
	if err != nil {
		return nil, nil, err
	}
	err = s.state.View(func(tx *fsm.Tx) error {
		j, err := tx.Job(id)
		if err != nil {
			return err
		}
		if num == 0 {
			num = j.Attempts
		}
		if num == 0 {
			return fmt.Errorf("%w: job %s has not been placed on a node yet", ErrNoAttempt, id)
		}
		if at, err = tx.Attempt(id, num); err != nil {
			return err
		}
		node, err = tx.Node(at.Node)
		if goneOK && errors.Is(err, fsm.ErrNotFound) {
			err = nil
		}
		return err
	})
	return at, node, err
}

// jobLogs handles GET /v1/jobs/{id}/logs?stream=stdout|stderr&follow=true&attempt=N.
// Logs live on the node that ran the attempt: this node streams its own,
// and proxies the request to the attempt's node otherwise.
func (s *server) jobLogs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	v := r.URL.Query()
	stream := v.Get("stream")
	switch stream {
	case "":
		stream = "stdout"
	case "stdout", "stderr":
	default:
		s.writeError(w, r, invalid("stream", "must be stdout or stderr (got %q)", stream))
		return
	}
	follow, err := parseBool(v.Get("follow"))
	if err != nil {
		s.writeError(w, r, invalid("follow", "%v", err))
		return
	}
	// A node that was garbage-collected (nil): serve the tail.
	at, node, err := s.attemptAndNode(r, id, true)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	num := at.Num

	if at.Node != s.cluster.NodeName() {
		if node == nil || node.HTTPAddr == "" || node.Gossip == fsm.NodeDead || node.Gossip == fsm.NodeLeft || r.Header.Get(HeaderForwarded) != "" {
			s.serveStoredLog(w, r, at, stream)
			return
		}
		// Name the attempt: a client agent (no state) serves only that.
		q := r.URL.Query()
		q.Set("attempt", strconv.Itoa(num))
		r.URL.RawQuery = q.Encode()
		var stored *fsm.StoredObject // no fallback to a store this agent cannot read
		if s.objects != nil {
			stored = storedObject(at, logObject(stream))
		}
		s.proxyOutput(w, r, at, node.HTTPAddr, stored, HeaderLogSource, "text/plain; charset=utf-8")
		return
	}
	if s.logs == nil {
		s.writeError(w, r, fmt.Errorf("%w: this node has no executor to read logs from", ErrUnavailable))
		return
	}
	if follow {
		// Follow can outlive http.Server.WriteTimeout; only the client ends it.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	}
	fw := &flushWriter{w: w, rc: http.NewResponseController(w)}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set(HeaderLogSource, "node")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	err = s.logs.StreamLog(r.Context(), id, num, stream, follow, fw)
	if err != nil && !fw.wrote {
		if at.State == fsm.AttemptAssigned {
			// The node has not created the attempt's files yet.
			err = fmt.Errorf("%w: attempt %d is assigned to %s but has not started: %v", ErrNoAttempt, num, at.Node, err)
		} else if errors.Is(err, fs.ErrNotExist) && (at.StderrTail != "" || storedObject(at, logObject(stream)) != nil) {
			s.serveStoredLog(w, r, at, stream)
			return
		}
		s.writeError(w, r, err)
		return
	}
	if err != nil && r.Context().Err() == nil {
		s.log.WarnContext(r.Context(), "log stream ended early", "job", id, "attempt", num, "err", err)
	}
	if !fw.wrote {
		w.WriteHeader(http.StatusOK)
	}
}

// logObject is the outputs name of a log stream.
func logObject(stream string) string {
	if stream == "stderr" {
		return fsm.OutputStderr
	}
	return fsm.OutputStdout
}

// serveStoredLog answers for an attempt whose node cannot serve its logs:
// from the object store when they were stored there, else the stderr tail.
func (s *server) serveStoredLog(w http.ResponseWriter, r *http.Request, at *fsm.Attempt, stream string) {
	if obj := storedObject(at, logObject(stream)); obj != nil && s.objects != nil {
		s.serveObject(w, r, at, obj, HeaderLogSource, "text/plain; charset=utf-8")
		return
	}
	s.serveTail(w, r, at, stream)
}

// serveTail answers with the stderr tail kept in the attempt record, for an
// attempt whose node is gone. stdout has nothing to offer then.
func (s *server) serveTail(w http.ResponseWriter, r *http.Request, at *fsm.Attempt, stream string) {
	if stream != "stderr" {
		s.writeError(w, r, fmt.Errorf("%w: node %s of attempt %d is unreachable; only the stderr tail is kept (use stream=stderr)", ErrUnreachable, at.Node, at.Num))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set(HeaderLogSource, "stderr_tail")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, at.StderrTail)
}

// flushWriter flushes after every write, so followers see bytes as the
// executor produces them.
type flushWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	wrote bool
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.wrote = true
	n, err := f.w.Write(p)
	if err == nil {
		_ = f.rc.Flush()
	}
	return n, err
}

func parseBool(s string) (bool, error) {
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("must be true or false (got %q)", s)
	}
	return b, nil
}
