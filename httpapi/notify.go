package httpapi

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// HTTP jobs and webhooks (issue 12): their spec fields, validation, and
// the redaction of webhook secrets from every reply.

// HTTPDriver is the driver of HTTP jobs (exec.HTTPDriverName).
const HTTPDriver = "http"

// Bounds and defaults of the http and notify fields; docs/api.md lists them.
const (
	DefaultHTTPTimeout = time.Minute // an HTTP job's timeout when it gives none
	MaxHTTPHeaders     = 64
	MaxHTTPBody        = 64 << 10
	MaxURLLen          = 2048
	MaxExpectStatus    = 32
	MaxWebhooks        = 8
	MaxWebhookSecret   = 256
)

// HTTPRequestInput is an HTTP job's request as a client writes it.
type HTTPRequestInput struct {
	Method       string            `json:"method,omitempty"` // default GET
	URL          string            `json:"url"`
	Headers      map[string]string `json:"headers,omitempty"`
	Body         string            `json:"body,omitempty"`
	ExpectStatus []int             `json:"expect_status,omitempty"` // default: any 2xx
}

// WebhookInput is one notify entry as a client writes it.
type WebhookInput struct {
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Secret      string   `json:"secret,omitempty"`
	MaxAttempts int      `json:"max_attempts,omitempty"`
}

var (
	httpMethods  = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
	headerNameRe = lazyRegexp("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
)

// reservedHeaderPrefix: foreman sets these on an HTTP job's request.
const reservedHeaderPrefix = "X-Foreman-"

func (in *JobSpecInput) normalizeHTTP() (*fsm.HTTPRequest, error) {
	if in.HTTP == nil {
		return nil, invalid("http", "is required for driver \"http\" (the request to make)")
	}
	if in.Driver != "" && in.Driver != HTTPDriver {
		return nil, invalid("http", "is for driver \"http\" only (driver is %q)", in.Driver)
	}
	if !isNull(in.Command) {
		return nil, invalid("command", "an HTTP job has no command; its request is in http")
	}
	h := in.HTTP
	out := &fsm.HTTPRequest{Method: strings.ToUpper(h.Method), Body: h.Body}
	if out.Method == "" {
		out.Method = "GET"
	}
	if !slices.Contains(httpMethods, out.Method) {
		return nil, invalid("http.method", "must be one of %s (got %q)", strings.Join(httpMethods, ", "), h.Method)
	}
	var err error
	if out.URL, err = checkURL("http.url", h.URL); err != nil {
		return nil, err
	}
	if len(h.Headers) > MaxHTTPHeaders {
		return nil, invalid("http.headers", "at most %d headers (got %d)", MaxHTTPHeaders, len(h.Headers))
	}
	for _, k := range slices.Sorted(maps.Keys(h.Headers)) { // the first error in a stable order
		v := h.Headers[k]
		f := "http.headers." + k
		if !headerNameRe().MatchString(k) {
			return nil, invalid(f, "is not a valid header name")
		}
		if strings.HasPrefix(strings.ToLower(k), strings.ToLower(reservedHeaderPrefix)) {
			return nil, invalid(f, "headers starting with %s are set by foreman", reservedHeaderPrefix)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, invalid(f, "must not contain CR, LF or NUL")
		}
	}
	if len(h.Headers) > 0 {
		out.Headers = h.Headers
	}
	if len(h.Body) > MaxHTTPBody {
		return nil, invalid("http.body", "at most %d bytes (got %d)", MaxHTTPBody, len(h.Body))
	}
	if len(h.ExpectStatus) > MaxExpectStatus {
		return nil, invalid("http.expect_status", "at most %d codes (got %d)", MaxExpectStatus, len(h.ExpectStatus))
	}
	for i, c := range h.ExpectStatus {
		if c < 100 || c > 599 {
			return nil, invalid(fmt.Sprintf("http.expect_status[%d]", i), "must be an HTTP status between 100 and 599 (got %d)", c)
		}
	}
	out.ExpectStatus = h.ExpectStatus
	return out, nil
}

// checkURL accepts an absolute http(s) URL with a host.
func checkURL(field, raw string) (string, error) {
	if raw == "" {
		return "", invalid(field, "must not be empty")
	}
	if len(raw) > MaxURLLen || hasControl(raw) {
		return "", invalid(field, "must be a URL of at most %d printable characters", MaxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", invalid(field, "is not a URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", invalid(field, "must be an http or https URL (got scheme %q)", u.Scheme)
	}
	if u.Host == "" || u.Hostname() == "" {
		return "", invalid(field, "must name a host")
	}
	return raw, nil
}

func normalizeNotify(in []WebhookInput) ([]fsm.Webhook, error) {
	if len(in) == 0 {
		return nil, nil
	}
	if len(in) > MaxWebhooks {
		return nil, invalid("notify", "at most %d webhooks (got %d)", MaxWebhooks, len(in))
	}
	out := make([]fsm.Webhook, len(in))
	for i, w := range in {
		f := func(s string) string { return fmt.Sprintf("notify[%d].%s", i, s) }
		u, err := checkURL(f("url"), w.URL)
		if err != nil {
			return nil, err
		}
		if len(w.Events) == 0 {
			return nil, invalid(f("events"), "must name at least one of %s", strings.Join(fsm.WebhookEvents, ", "))
		}
		for j, e := range w.Events {
			if !fsm.ValidWebhookEvent(e) {
				return nil, invalid(fmt.Sprintf("notify[%d].events[%d]", i, j), "unknown event %q (want one of %s)", e, strings.Join(fsm.WebhookEvents, ", "))
			}
			if slices.Contains(w.Events[:j], e) {
				return nil, invalid(fmt.Sprintf("notify[%d].events[%d]", i, j), "%q is listed twice", e)
			}
		}
		if len(w.Secret) > MaxWebhookSecret || hasControl(w.Secret) {
			return nil, invalid(f("secret"), "must be at most %d printable characters", MaxWebhookSecret)
		}
		if w.MaxAttempts < 0 || w.MaxAttempts > fsm.MaxDeliveryAttempts {
			return nil, invalid(f("max_attempts"), "must be between 1 and %d (got %d; 0 = %d)", fsm.MaxDeliveryAttempts, w.MaxAttempts, fsm.DefaultDeliveryAttempts)
		}
		out[i] = fsm.Webhook{URL: u, Events: w.Events, Secret: w.Secret, MaxAttempts: w.MaxAttempts}
	}
	return out, nil
}

// agentAddrs are the nodes' API addresses, which a webhook must not call:
// the deliverer would be POSTing into foreman's own API.
type agentAddrs map[string]bool

func newAgentAddrs(nodes []fsm.Node) agentAddrs {
	a := agentAddrs{}
	for _, n := range nodes {
		if host, port, err := net.SplitHostPort(n.HTTPAddr); err == nil {
			a[addrKey(host, port)] = true
		}
	}
	return a
}

// addrKey spells an address one way: "localhost" and the unspecified
// address (which connect to the local host) as 127.0.0.1, IPs canonical,
// so http://localhost:7070 matches an agent advertising 127.0.0.1:7070.
// Other loopback addresses stay distinct (tests run agents on 127.x.y.z).
func addrKey(host, port string) string {
	h := strings.ToLower(strings.Trim(host, "[]"))
	if ip := net.ParseIP(h); ip != nil {
		h = ip.String()
		if ip.IsUnspecified() {
			h = "127.0.0.1"
		}
	}
	if h == "localhost" {
		h = "127.0.0.1"
	}
	return net.JoinHostPort(h, port)
}

// check refuses webhook URLs that point at an agent. field names the job
// ("" for a single job, "jobs[i]" in a batch).
func (a agentAddrs) check(jobs []fsm.NewJob, batch bool) error {
	for i, j := range jobs {
		for k, w := range j.Spec.Notify {
			u, err := url.Parse(w.URL)
			if err != nil {
				continue // Normalize refused it already
			}
			port := u.Port()
			if port == "" {
				port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
			}
			if a[addrKey(u.Hostname(), port)] {
				f := fmt.Sprintf("notify[%d].url", k)
				if batch {
					f = fmt.Sprintf("jobs[%d].%s", i, f)
				}
				return invalid(f, "points at a foreman agent (%s); a webhook must call another service", u.Host)
			}
		}
	}
	return nil
}

// redactJob drops webhook secrets and secret_env values from a job about
// to be sent to a client (they are write-only). It copies what it changes,
// never editing state.
func redactJob(j *fsm.Job) {
	redactSpec(&j.Spec)
}

// RedactedValue replaces each secret_env value in API replies.
const RedactedValue = "(redacted)"

// redactSpec is redactJob for a bare spec (a schedule's job template).
func redactSpec(sp *fsm.JobSpec) {
	if len(sp.SecretEnv) > 0 {
		m := make(map[string]string, len(sp.SecretEnv))
		for k := range sp.SecretEnv {
			m[k] = RedactedValue
		}
		sp.SecretEnv = m
	}
	if len(sp.Notify) == 0 {
		return
	}
	hooks := slices.Clone(sp.Notify)
	for i := range hooks {
		hooks[i].Secret = ""
	}
	sp.Notify = hooks
}
