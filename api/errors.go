package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Error codes the server sends in an error body's "code" (docs/api.md,
// "Errors"). Not every code is listed; compare Error.Code with the
// string for the others.
const (
	CodeInvalid         = "invalid"          // 400: a field is wrong; Field names it
	CodeUnauthorized    = "unauthorized"     // 401: no or unknown token
	CodeForbidden       = "forbidden"        // 403: the token may not do this
	CodeNotFound        = "not_found"        // 404
	CodeConflict        = "conflict"         // 409: e.g. cancel of a finished job
	CodeRefused         = "refused"          // 409: an operator request that would lose quorum, or replace jobs without force
	CodeFeatureHeld     = "feature_held"     // 409: needs a feature a server of an older build lacks; finish the upgrade
	CodeOverloaded      = "overloaded"       // 429: nothing was taken; retried after Retry-After
	CodeNodeUnreachable = "node_unreachable" // 502: a proxied write's outcome is unknown
	CodeNoLeader        = "no_leader"        // 503
	CodeUnavailable     = "unavailable"      // 503
	CodeTimeout         = "timeout"          // 504
)

// Sentinel errors, one per common failure: errors.Is(err, api.ErrNotFound)
// holds for every *Error with that code.
var (
	ErrInvalid      = &Error{Code: CodeInvalid}
	ErrUnauthorized = &Error{Code: CodeUnauthorized}
	ErrForbidden    = &Error{Code: CodeForbidden}
	ErrNotFound     = &Error{Code: CodeNotFound}
	ErrConflict     = &Error{Code: CodeConflict}
	ErrOverloaded   = &Error{Code: CodeOverloaded}
	ErrNoLeader     = &Error{Code: CodeNoLeader}
)

// Error is a non-2xx answer of the server, decoded from its error body
// ({"error": "...", "code": "..."}).
type Error struct {
	Status  int    // the HTTP status
	Code    string // the server's code, e.g. CodeNotFound; "" when the body was not an error body
	Message string // the server's one line, "field: reason" for CodeInvalid
	// Field is the field an invalid request got wrong ("priority",
	// "jobs[3].resources.cpu"); "" for other codes.
	Field string
	// RetryAfter is the server's Retry-After (429, and some 503s).
	RetryAfter time.Duration
	// RequestID is the X-Request-ID of the request, for the agent's logs.
	RequestID string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("HTTP %d %s", e.Status, http.StatusText(e.Status))
	}
	return e.Message
}

// Is matches the sentinels: a target *Error with only a Code (and
// optionally a Status) matches every error with that code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok || t.Code == "" {
		return false
	}
	return t.Code == e.Code && (t.Status == 0 || t.Status == e.Status)
}

// decodeError reads a non-2xx response's body into an *Error.
func decodeError(resp *http.Response) *Error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &Error{Status: resp.StatusCode, RequestID: resp.Header.Get(headerRequestID)}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
		e.RetryAfter = time.Duration(secs) * time.Second
	}
	var body struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	if json.Unmarshal(b, &body) == nil && body.Error != "" {
		e.Code, e.Message = body.Code, body.Error
		if e.Code == CodeInvalid {
			if f, _, ok := strings.Cut(e.Message, ": "); ok && !strings.Contains(f, " ") {
				e.Field = f
			}
		}
		return e
	}
	e.Message = strings.TrimSpace(string(b))
	if e.Message == "" {
		e.Message = fmt.Sprintf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	return e
}
