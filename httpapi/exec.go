package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// foreman exec (issue 36): POST /v1/jobs/{id}/exec runs a command inside
// the job's live attempt. Any node answers: it checks the token (the exec
// permission, which no other role implies), the job (running, an attempt
// that started), then serves the exec itself when the attempt is its own
// or proxies the upgrade to the attempt's node, which runs the command
// (Exec) and streams it over the upgraded connection (api.ExecUpgrade,
// frames in api/exec.go).

// ExecRequest is the body of POST /v1/jobs/{id}/exec.
type ExecRequest = api.ExecRequest

// Exec runs commands inside this node's live attempts.
type Exec interface {
	// StartExec starts req.Command inside attempt of job jobID, which
	// runs on this node. Called from a request's goroutine; errors wrap
	// ErrNotLive (the attempt is not here or has ended), ErrExecCommand
	// (the command cannot start there) or ErrUnavailable.
	StartExec(jobID string, attempt int, req ExecRequest) (ExecSession, error)
}

// ExecSession is a started exec command.
type ExecSession interface {
	Stdin() io.WriteCloser // nil: the command has no stdin
	Stdout() io.Reader     // ends at most a drain period after Wait returned
	Stderr() io.Reader     // nil with a terminal
	Resize(width, height uint16) error
	Wait() int // the exit code, 128+N for signal N
	Kill()     // ends the command, never the attempt
}

var (
	// ErrNotLive means there is nothing to exec into: the job or attempt
	// is not running (finished, waiting, or not started yet). 409.
	ErrNotLive = errors.New("nothing to exec into")
	// ErrExecCommand means the command cannot start in the attempt (not
	// found there). 400; the message starts with the field, "command".
	ErrExecCommand = errors.New("command")
)

// NotLive is err as an ErrNotLive whose message is err's alone.
func NotLive(err error) error { return &notLive{err} }

type notLive struct{ err error }

func (e *notLive) Error() string   { return e.err.Error() }
func (e *notLive) Unwrap() []error { return []error{ErrNotLive, e.err} }

// maxExecArgs bounds the command line of an exec.
const maxExecArgs = 4096

// checkExecRequest validates an exec body.
func checkExecRequest(req *ExecRequest) error {
	switch {
	case len(req.Command) == 0 || req.Command[0] == "":
		return invalid("command", "required: the command to run in the attempt, e.g. [\"sh\"]")
	case len(req.Command) > maxExecArgs:
		return invalid("command", "%d arguments: at most %d", len(req.Command), maxExecArgs)
	case req.Width < 0 || req.Width > 65535:
		return invalid("width", "must be 0-65535 columns (got %d)", req.Width)
	case req.Height < 0 || req.Height > 65535:
		return invalid("height", "must be 0-65535 rows (got %d)", req.Height)
	case !req.TTY && (req.Width != 0 || req.Height != 0):
		return invalid("width", "a terminal size needs tty: true")
	}
	for i, a := range req.Command {
		if strings.IndexByte(a, 0) >= 0 {
			return invalid(fmt.Sprintf("command[%d]", i), "contains a NUL byte")
		}
	}
	return nil
}

// isExecUpgrade reports whether r asks to switch to the exec stream.
func isExecUpgrade(r *http.Request) bool {
	if !strings.EqualFold(r.Header.Get("Upgrade"), api.ExecUpgrade) {
		return false
	}
	for _, v := range r.Header.Values("Connection") {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "upgrade") {
				return true
			}
		}
	}
	return false
}

// liveAttempt is attempt num (0: the latest) of job id if it is running,
// with its node (nil when gone from the state).
func (s *server) liveAttempt(id string, num int) (at *fsm.Attempt, node *fsm.Node, err error) {
	err = s.state.View(func(tx *fsm.Tx) error {
		j, err := tx.Job(id)
		if err != nil {
			return err
		}
		if j.Array != nil {
			return invalid("id", "job %s is an array: exec runs in one of its tasks (foreman job ls --array %s; the task ID is %s)", id, id, fsm.TaskID(id, 0))
		}
		if num == 0 {
			if j.State != fsm.JobRunning {
				return NotLive(fmt.Errorf("job %s is %s: nothing to exec into (exec runs a command in a running attempt)", id, j.State))
			}
			num = j.Attempts
		}
		if num > j.Attempts {
			return fmt.Errorf("%w: job %s has %d attempt(s), not %d", fsm.ErrNotFound, id, j.Attempts, num)
		}
		if at, err = tx.Attempt(id, num); err != nil {
			return err
		}
		switch at.State {
		case fsm.AttemptRunning:
		case fsm.AttemptAssigned:
			return NotLive(fmt.Errorf("attempt %d of job %s is assigned to %s but has not started yet: nothing to exec into; retry in a moment", num, id, at.Node))
		default:
			return NotLive(fmt.Errorf("attempt %d of job %s is %s: nothing to exec into", num, id, at.State))
		}
		node, err = tx.Node(at.Node)
		if errors.Is(err, fsm.ErrNotFound) {
			err = nil
		}
		return err
	})
	return at, node, err
}

// execJob handles POST /v1/jobs/{id}/exec?attempt=N.
func (s *server) execJob(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	num, err := attemptParam(r)
	var body []byte
	if err == nil {
		body, err = s.readBody(w, r)
	}
	var req ExecRequest
	if err == nil {
		err = decodeStrict(body, &req)
	}
	if err == nil {
		err = checkExecRequest(&req)
	}
	if err == nil && !isExecUpgrade(r) {
		err = invalid("Upgrade", "exec streams over an HTTP/1.1 upgrade: send \"Connection: Upgrade\" and \"Upgrade: %s\" (foreman exec and the api package do)", api.ExecUpgrade)
	}
	var at *fsm.Attempt
	var node *fsm.Node
	if err == nil {
		at, node, err = s.liveAttempt(id, num)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Every exec is an event naming who ran what (fsm/exec_audit.go),
	// committed before the command starts: the node the client asked
	// records it, not the attempt's node the request is proxied to (that
	// hop is marked forwarded and carries the internal secret). No record,
	// no exec.
	if !s.acl.fromNode(r) {
		who := "anonymous"
		if idn := identityOf(r); idn != nil && idn.token != nil {
			who = cmp.Or(idn.token.Name, idn.token.AccessorID)
		}
		audit := fsm.ExecAudit{JobID: id, Attempt: at.Num, By: who, Command: req.Command[0], Args: len(req.Command) - 1, TTY: req.TTY}
		if _, err := s.apply(r.Context(), fsm.CmdExecAudit, audit); err != nil {
			s.writeError(w, r, err)
			return
		}
		s.log.InfoContext(r.Context(), "exec", "job", id, "attempt", at.Num, "node", at.Node, "command", req.Command[0], "args", len(req.Command)-1, "tty", req.TTY, "by", who)
	}

	if at.Node != s.cluster.NodeName() {
		if node == nil || node.HTTPAddr == "" || node.Gossip == fsm.NodeDead || node.Gossip == fsm.NodeLeft {
			s.writeError(w, r, fmt.Errorf("%w: node %s of attempt %d of job %s cannot be reached", ErrUnreachable, at.Node, at.Num, id))
			return
		}
		q := r.URL.Query()
		q.Set("attempt", strconv.Itoa(at.Num))
		r.URL.RawQuery = q.Encode()
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		s.acl.SetInternalAuth(r.Header) // it was recorded here (dropped again for a client agent)
		// The stream lasts as long as the command: no deadline.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Time{})
		s.proxy(w, r, at.Node, node.HTTPAddr)
		return
	}
	if s.exec == nil {
		s.writeError(w, r, fmt.Errorf("%w: this node has no executor to exec in", ErrUnavailable))
		return
	}
	ServeExec(w, r, s.exec, id, at.Num, req, s.log)
}

// ServeExec starts req in attempt of job id on this node and, once it
// runs, switches the connection to the exec stream and relays it until
// the command ends; the agent of a client node serves the requests its
// servers proxy to it with it too. A refusal before the switch is a JSON
// error.
func ServeExec(w http.ResponseWriter, r *http.Request, e Exec, id string, attempt int, req ExecRequest, log *slog.Logger) {
	sess, err := e.StartExec(id, attempt, req)
	if err != nil {
		status, code := statusFor(err)
		writeJSON(w, status, ErrorBody{Error: err.Error(), Code: code})
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		sess.Kill()
		sess.Wait()
		status, code := statusFor(fmt.Errorf("%w: cannot switch this connection to the exec stream: %v", ErrUnavailable, err))
		writeJSON(w, status, ErrorBody{Error: err.Error(), Code: code})
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Time{})
	node := w.Header().Get(HeaderNode)
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n%s: %s\r\n\r\n", api.ExecUpgrade, HeaderNode, node)
	if err := brw.Flush(); err != nil {
		sess.Kill()
		sess.Wait()
		return
	}
	var mu sync.Mutex
	// The client's frames: stdin, its end, resizes. A read error is the
	// client gone: the command is killed (never the job).
	go func() {
		buf := make([]byte, api.MaxExecFrame)
		stdin := sess.Stdin()
		for {
			kind, p, err := api.ReadExecFrame(brw.Reader, buf)
			if err != nil {
				sess.Kill()
				return
			}
			switch kind {
			case api.ExecStdin:
				if stdin != nil {
					_, _ = stdin.Write(p)
				}
			case api.ExecCloseStdin:
				if stdin != nil {
					_ = stdin.Close()
				}
			case api.ExecResize:
				if len(p) == 4 {
					_ = sess.Resize(binary.BigEndian.Uint16(p[:2]), binary.BigEndian.Uint16(p[2:]))
				}
			}
		}
	}()
	var wg sync.WaitGroup
	relay := func(src io.Reader, kind byte) {
		defer wg.Done()
		if _, err := io.Copy(api.ExecWriter{W: conn, Kind: kind, Mu: &mu}, src); err != nil && !isClosedPipe(err) {
			sess.Kill() // the client cannot take output any more
		}
	}
	for _, out := range []struct {
		r    io.Reader
		kind byte
	}{{sess.Stdout(), api.ExecStdout}, {sess.Stderr(), api.ExecStderr}} {
		if out.r != nil {
			wg.Add(1)
			go relay(out.r, out.kind)
		}
	}
	code := sess.Wait()
	wg.Wait()
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], uint32(int32(code)))
	mu.Lock()
	_ = api.WriteExecFrame(conn, api.ExecExit, p[:])
	mu.Unlock()
	log.InfoContext(context.WithoutCancel(r.Context()), "exec ended", "job", id, "attempt", attempt, "exit_code", code)
}

// isClosedPipe: the output ended because its reader was closed after the
// command exited (or a terminal's last writer went away).
func isClosedPipe(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "file already closed") || strings.Contains(msg, "input/output error")
}
