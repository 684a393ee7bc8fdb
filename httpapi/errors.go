package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"

	"github.com/foreman-sched/foreman/fsm"
)

// Sentinel errors. Handlers wrap these (or fsm's sentinels) with %w and
// statusFor turns them into a status code and a stable "code" string.
var (
	// ErrInvalid means the request is malformed or a field fails validation.
	ErrInvalid = errors.New("invalid request")
	// ErrTooLarge means the request body is over Config.MaxBodyBytes.
	ErrTooLarge = errors.New("request body too large")
	// ErrNoLeader means no leader is known, so a write (or a consistent
	// read) cannot be served. Cluster implementations return an error
	// wrapping it when they have no leader.
	ErrNoLeader = errors.New("no leader")
	// ErrNotReady means this node has not caught up with the cluster yet.
	ErrNotReady = errors.New("not ready")
	// ErrUnreachable means another node (leader or log holder) could not be
	// reached through the proxy.
	ErrUnreachable = errors.New("node unreachable")
	// ErrLoop means a forwarded request reached a node that would forward
	// it again; leadership is changing and the client should retry.
	ErrLoop = errors.New("forwarding loop")
	// ErrNoAttempt means a job has no attempt yet, so it has no logs.
	ErrNoAttempt = errors.New("no attempt yet")
	// ErrBatchTooLarge means a batch holds more than Config.MaxBatchJobs jobs.
	ErrBatchTooLarge = errors.New("batch too large")
	// ErrUnavailable means a dependency was not wired in (for example no
	// log streamer on this node).
	ErrUnavailable = errors.New("unavailable")
)

// fieldError names the field that failed validation and why.
type fieldError struct {
	Field  string
	Reason string
}

func (e *fieldError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

func (e *fieldError) Unwrap() error { return ErrInvalid }

// invalid builds a validation error for field.
func invalid(field, format string, args ...any) error {
	return &fieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// prefixField puts prefix (e.g. "jobs[3]") in front of a field error's
// field, so batch errors say which job failed.
func prefixField(prefix string, err error) error {
	var fe *fieldError
	if errors.As(err, &fe) {
		f := prefix
		if fe.Field != "" {
			f = prefix + "." + fe.Field
		}
		return &fieldError{Field: f, Reason: fe.Reason}
	}
	return fmt.Errorf("%s: %w", prefix, err)
}

// renameField gives a field error found under one field (a shared check's
// name for it) the field the client wrote: depends_on[2] → after[2].
func renameField(err error, from, to string) error {
	var fe *fieldError
	if errors.As(err, &fe) && strings.HasPrefix(fe.Field, from) {
		return &fieldError{Field: to + strings.TrimPrefix(fe.Field, from), Reason: fe.Reason}
	}
	return err
}

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// Error codes carried in ErrorBody.Code.
const (
	CodeInvalid       = "invalid"
	CodeNotFound      = "not_found"
	CodeConflict      = "conflict"
	CodeStaleToken    = "stale_token"
	CodeTooLarge      = "body_too_large"
	CodeBatchTooLarge = "batch_too_large"
	CodeOverloaded    = "overloaded"
	CodeNoLeader      = "no_leader"
	CodeNotReady      = "not_ready"
	CodeUnreachable   = "node_unreachable"
	CodeNoAttempt     = "no_attempt"
	CodeTimeout       = "timeout"
	CodeUnavailable   = "unavailable"
	CodeMethod        = "method_not_allowed"
	CodeInternal      = "internal"
	CodeUnsupportedV  = "unsupported_version"
	CodeBadSnapshot   = "bad_snapshot"
	CodeNewerSnapshot = "unsupported_snapshot"
	CodeRefused       = "refused"
	CodeFeatureHeld   = "feature_held"
	CodeUnauthorized  = "unauthorized"
	CodeForbidden     = "forbidden"
	CodeACLDisabled   = "acl_disabled"
	codeClientClosed  = "client_closed"
	statusClientClose = 499 // nginx's convention; only ever logged
)

// statusFor is the one place that maps an error to an HTTP status and code.
func statusFor(err error) (int, string) {
	var mbe *http.MaxBytesError
	var re *remoteError
	switch {
	case errors.As(err, &re) && re.status != 0:
		return re.status, re.code // the leader's answer to a forwarded submit
	case errors.As(err, &mbe), errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge, CodeTooLarge
	case errors.Is(err, ErrBatchTooLarge):
		return http.StatusRequestEntityTooLarge, CodeBatchTooLarge
	case errors.Is(err, ErrUnauthenticated):
		return http.StatusUnauthorized, CodeUnauthorized
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden, CodeForbidden
	case errors.Is(err, ErrACLDisabled):
		return http.StatusBadRequest, CodeACLDisabled
	case errors.Is(err, ErrOverloaded):
		return http.StatusTooManyRequests, CodeOverloaded
	case errors.Is(err, ErrInvalid), errors.Is(err, fsm.ErrBadCommand):
		// ErrBadCommand: Apply refused the input (a parent that does not
		// exist, a cycle); the message names the field.
		return http.StatusBadRequest, CodeInvalid
	case errors.Is(err, fsm.ErrBadBackup):
		return http.StatusBadRequest, CodeBadSnapshot
	case errors.Is(err, fsm.ErrBackupVersion):
		return http.StatusBadRequest, CodeNewerSnapshot
	case errors.Is(err, ErrRefused):
		return http.StatusConflict, CodeRefused
	case errors.Is(err, fsm.ErrFeatureHeld):
		return http.StatusConflict, CodeFeatureHeld
	case errors.Is(err, ErrNotLive):
		return http.StatusConflict, CodeConflict
	case errors.Is(err, ErrExecCommand):
		return http.StatusBadRequest, CodeInvalid
	case errors.Is(err, ErrNoAttempt):
		return http.StatusNotFound, CodeNoAttempt
	case errors.Is(err, fsm.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound, CodeNotFound
	case errors.Is(err, fsm.ErrStaleToken):
		return http.StatusConflict, CodeStaleToken
	case errors.Is(err, fsm.ErrConflict):
		return http.StatusConflict, CodeConflict
	case errors.Is(err, ErrNoLeader), errors.Is(err, ErrLoop):
		return http.StatusServiceUnavailable, CodeNoLeader
	case errors.Is(err, ErrNotReady):
		return http.StatusServiceUnavailable, CodeNotReady
	case errors.Is(err, ErrUnreachable):
		return http.StatusBadGateway, CodeUnreachable
	case errors.Is(err, ErrUnavailable):
		return http.StatusServiceUnavailable, CodeUnavailable
	case errors.Is(err, fsm.ErrUnsupportedVersion):
		return http.StatusServiceUnavailable, CodeUnsupportedV
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, CodeTimeout
	case errors.Is(err, context.Canceled):
		return statusClientClose, codeClientClosed
	}
	return http.StatusInternalServerError, CodeInternal
}

// writeError sends err as the JSON error body with its mapped status.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := statusFor(err)
	msg := err.Error()
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		msg = fmt.Sprintf("request body is larger than the limit of %d bytes", mbe.Limit)
	}
	if status == http.StatusTooManyRequests {
		s.setRetryAfter(w)
	}
	if status >= 500 {
		s.log.WarnContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	writeJSON(w, status, ErrorBody{Error: msg, Code: code})
}

// reply sends v as JSON with 200 OK, or err (when not nil) as the error
// response.
func (s *server) reply(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// writeJSON sends v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client went away; nothing useful to do
}
