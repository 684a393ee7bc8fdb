package exec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// HTTPDriverName is the JobSpec.Driver value of the HTTP driver.
const HTTPDriverName = "http"

// HTTPBodyMax is how much of a response body an HTTP job keeps in its
// stdout log; the rest is not read (the connection is closed), so an
// endless body costs neither memory nor time.
const HTTPBodyMax = 64 << 10

// Headers every HTTP job's request carries (spec headers of these names are
// replaced, like FOREMAN_* variables of a process job).
const (
	HeaderFencingToken = "X-Foreman-Fencing-Token"
	HeaderJobID        = "X-Foreman-Job-ID"
	HeaderAttempt      = "X-Foreman-Attempt"
	HeaderNode         = "X-Foreman-Node"
)

// ErrNoRequest means a job for the HTTP driver has no http request.
var ErrNoRequest = errors.New("http job has no request (spec.http)")

// HTTPDriver makes the job's request from inside the attempt's supervisor,
// so the lease fences it like any job (invariant 2): when the lease
// expires, or on timeout or cancel, the supervisor signals the handle and
// the request is aborted. The response's status line and the first
// HTTPBodyMax bytes of its body go to stdout. The attempt succeeds when the
// status is expected (spec.http.expect_status, default any 2xx) and fails
// otherwise, with the status as its reason, so retries and backoff apply.
type HTTPDriver struct{}

// NewHTTPDriver returns the HTTP driver.
func NewHTTPDriver() *HTTPDriver { return &HTTPDriver{} }

// Name implements Driver.
func (*HTTPDriver) Name() string { return HTTPDriverName }

// Available implements Driver: plain Go, every host has it.
func (*HTTPDriver) Available() error { return nil }

// Start implements Driver. It returns once the request is under way.
func (*HTTPDriver) Start(ctx context.Context, t *Task) (Handle, error) {
	spec := t.Spec.HTTP
	if spec == nil {
		return nil, ErrNoRequest
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The supervisor closes t.Stdout/t.Stderr when Start returns; the
	// request outlives Start, so it writes to its own copies.
	stdout, err := dupFile(t.Stdout)
	if err != nil {
		return nil, err
	}
	stderr, err := dupFile(t.Stderr)
	if err != nil {
		stdout.Close()
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	var body io.Reader
	if spec.Body != "" {
		body = strings.NewReader(spec.Body)
	}
	req, err := http.NewRequestWithContext(rctx, spec.Method, spec.URL, body)
	if err != nil {
		cancel()
		stdout.Close()
		stderr.Close()
		return nil, fmt.Errorf("http request: %w", err)
	}
	for k, v := range spec.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set(HeaderFencingToken, envValue(t.Env, "FOREMAN_FENCING_TOKEN", ""))
	req.Header.Set(HeaderJobID, envValue(t.Env, "FOREMAN_JOB_ID", ""))
	req.Header.Set(HeaderAttempt, envValue(t.Env, "FOREMAN_ATTEMPT", ""))
	req.Header.Set(HeaderNode, envValue(t.Env, "FOREMAN_NODE", ""))
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "foreman-http-job")
	}
	// A transport per attempt and no keep-alive: nothing of the attempt
	// (connections, their goroutines) outlives it in a recycled supervisor.
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 30 * time.Second,
		DisableKeepAlives:   true,
		DisableCompression:  true,
	}
	h := &httpHandle{cancel: cancel, tr: tr, done: make(chan struct{}), startedAt: time.Now()}
	go h.run(req, spec.ExpectStatus, stdout, stderr)
	return h, nil
}

// dupFile returns a close-on-exec copy of f.
func dupFile(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dup %s: %w", f.Name(), err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

type httpHandle struct {
	cancel    context.CancelFunc
	tr        *http.Transport
	done      chan struct{}
	startedAt time.Time
	status    ExitStatus // set before done is closed
	once      sync.Once
}

func (h *httpHandle) run(req *http.Request, expect []int, stdout, stderr *os.File) {
	st := ExitStatus{StartedAt: h.startedAt, ExitCode: -1}
	defer func() {
		stdout.Close()
		stderr.Close()
		st.FinishedAt = time.Now()
		h.status = st
		close(h.done)
	}()
	client := &http.Client{Transport: h.tr}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", req.Method, req.URL.Redacted(), err)
		st.Err = fmt.Errorf("%s %s: %w", req.Method, req.URL.Redacted(), unwrapURLError(err))
		return
	}
	defer resp.Body.Close()
	fmt.Fprintf(stdout, "%s %s\n", resp.Proto, resp.Status)
	n, err := io.Copy(stdout, io.LimitReader(resp.Body, HTTPBodyMax))
	if err == nil && n == HTTPBodyMax {
		if m, _ := resp.Body.Read(make([]byte, 1)); m > 0 {
			fmt.Fprintf(stderr, "response body cut off after %d bytes\n", HTTPBodyMax)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "reading the response body: %v\n", err)
	}
	if !statusExpected(resp.StatusCode, expect) {
		st.Err = fmt.Errorf("HTTP %s (expected %s)", resp.Status, describeExpect(expect))
		return
	}
	st.ExitCode = 0
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// statusExpected: expect lists the good codes; empty means any 2xx.
func statusExpected(code int, expect []int) bool {
	if len(expect) == 0 {
		return code >= 200 && code < 300
	}
	return slices.Contains(expect, code)
}

func describeExpect(expect []int) string {
	if len(expect) == 0 {
		return "2xx"
	}
	s := make([]string, len(expect))
	for i, c := range expect {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// Wait implements Handle.
func (h *httpHandle) Wait() ExitStatus {
	<-h.done
	return h.status
}

// Signal implements Handle: any signal aborts the request (an HTTP request
// has no graceful stop).
func (h *httpHandle) Signal(syscall.Signal) error {
	h.cancel()
	return nil
}

// Destroy implements Handle.
func (h *httpHandle) Destroy() error {
	h.once.Do(func() {
		h.cancel()
		<-h.done
		h.tr.CloseIdleConnections()
	})
	return nil
}
