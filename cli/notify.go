package cli

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// HTTP jobs and webhooks on the command line (submit and run).

// httpJobFlags are the flags of an HTTP job's request and of webhooks.
func httpJobFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "url", Usage: "make the job an HTTP request to this URL (driver http) instead of a command"},
		&ucli.StringFlag{Name: "method", Usage: "HTTP job: request method (default GET)"},
		&ucli.GenericFlag{Name: "header", Value: &multi{}, Usage: "HTTP job: 'Name: value' request header (repeatable)"},
		&ucli.StringFlag{Name: "body", Usage: "HTTP job: request body; @FILE reads it from a file (- for stdin)"},
		&ucli.StringFlag{Name: "expect", Usage: "HTTP job: status codes that mean success, e.g. 200,201 (default any 2xx)"},
		&ucli.GenericFlag{Name: "notify", Value: &multi{}, Usage: "webhook URL to POST the job's events to (repeatable)"},
		&ucli.StringFlag{Name: "notify-on", Usage: "events for --notify: finished, succeeded, failed, cancelled, skipped, retrying, running (default finished)"},
		&ucli.StringFlag{Name: "notify-secret", EnvVars: []string{"FOREMAN_NOTIFY_SECRET"}, Usage: "key that signs --notify deliveries (X-Foreman-Signature)"},
	}
}

// applyHTTPFlags sets the http and notify fields from the flags given,
// over what a spec file set.
func applyHTTPFlags(c *ucli.Context, spec *httpapi.JobSpecInput) error {
	req := func() *httpapi.HTTPRequestInput {
		if spec.HTTP == nil {
			spec.HTTP = &httpapi.HTTPRequestInput{}
		}
		return spec.HTTP
	}
	if c.IsSet("url") {
		req().URL = c.String("url")
	}
	if c.IsSet("method") {
		req().Method = c.String("method")
	}
	for _, h := range multiValues(c, "header") {
		k, v, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("--header %q: want 'Name: value'", h)
		}
		r := req()
		if r.Headers == nil {
			r.Headers = map[string]string{}
		}
		r.Headers[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if c.IsSet("body") {
		b, err := flagBody(c.String("body"))
		if err != nil {
			return fmt.Errorf("--body: %w", err)
		}
		req().Body = b
	}
	if c.IsSet("expect") {
		codes, err := statusList(c.String("expect"))
		if err != nil {
			return fmt.Errorf("--expect: %w", err)
		}
		req().ExpectStatus = codes
	}
	if spec.HTTP != nil && len(c.Args().Slice()) > 0 {
		return fmt.Errorf("an HTTP job (--url) takes no command after --")
	}
	urls := multiValues(c, "notify")
	if len(urls) == 0 && (c.IsSet("notify-on") || c.IsSet("notify-secret") && os.Getenv("FOREMAN_NOTIFY_SECRET") == "") {
		return fmt.Errorf("--notify-on and --notify-secret go with --notify URL")
	}
	events := []string{fsm.EventFinished}
	if c.IsSet("notify-on") {
		events = splitList(c.String("notify-on"))
	}
	for _, u := range urls {
		spec.Notify = append(spec.Notify, httpapi.WebhookInput{URL: u, Events: events, Secret: c.String("notify-secret")})
	}
	return nil
}

// flagBody reads "@FILE" (or "@-", stdin) or returns s itself.
func flagBody(s string) (string, error) {
	path, ok := strings.CutPrefix(s, "@")
	if !ok {
		return s, nil
	}
	b, err := readFileOrStdin(path)
	return string(b), err
}

// statusList parses "200,201" (spaces allowed); the API checks the range.
func statusList(s string) ([]int, error) {
	var out []int
	for _, p := range splitList(s) {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("%q is not a status code (want e.g. 200,201)", p)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no status codes in %q", s)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// requestLine describes an HTTP job's request for `job status`.
func requestLine(r *fsm.HTTPRequest) string {
	s := r.Method + " " + r.URL
	if len(r.ExpectStatus) > 0 {
		codes := make([]string, len(r.ExpectStatus))
		for i, c := range r.ExpectStatus {
			codes[i] = strconv.Itoa(c)
		}
		s += " (expect " + strings.Join(codes, ",") + ")"
	}
	return s
}

// printDeliveries writes the WEBHOOKS section of `job status`.
func printDeliveries(w io.Writer, ds []fsm.Delivery, now time.Time) error {
	if len(ds) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nWebhooks:")
	t := NewTable(w, "EVENT", "URL", "STATE", "TRIES", "LAST", "NEXT")
	for _, d := range ds {
		last := "-"
		switch {
		case d.LastError != "":
			last = d.LastError
		case d.LastStatus != 0:
			last = strconv.Itoa(d.LastStatus)
		}
		next := "-"
		if d.State == fsm.DeliveryPending {
			next = ago(d.NextAt, now)
		}
		t.Row(d.Event.Type, d.URL, d.State, fmt.Sprintf("%d/%d", d.Attempts, d.MaxAttempts), last, next)
	}
	return t.Flush()
}
