package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// TestHTTPJobAndNotifyValidation: bad http and notify fields are a 400
// naming the field, and nothing reaches the state machine.
func TestHTTPJobAndNotifyValidation(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("n1", "10.0.0.1:7070", 4000, 8192)
	hook := func(fields string) string { return `{"command":"true","notify":[{` + fields + `}]}` }
	tests := []struct{ name, body, want string }{
		{"http without request", `{"driver":"http"}`, "http: is required for driver \"http\""},
		{"http with command", `{"command":"true","http":{"url":"http://x/"}}`, "command: an HTTP job has no command"},
		{"http with other driver", `{"driver":"process","http":{"url":"http://x/"}}`, `http: is for driver "http" only`},
		{"http bad scheme", `{"http":{"url":"ftp://x/"}}`, `http.url: must be an http or https URL (got scheme "ftp")`},
		{"http no host", `{"http":{"url":"http:///path"}}`, "http.url: must name a host"},
		{"http relative", `{"http":{"url":"/path"}}`, `http.url: must be an http or https URL`},
		{"http empty url", `{"http":{"method":"GET"}}`, "http.url: must not be empty"},
		{"http bad method", `{"http":{"url":"http://x/","method":"FETCH"}}`, `http.method: must be one of GET, HEAD, POST`},
		{"http bad status", `{"http":{"url":"http://x/","expect_status":[200,99]}}`, "http.expect_status[1]: must be an HTTP status between 100 and 599"},
		{"http status string", `{"http":{"url":"http://x/","expect_status":"2xx"}}`, "http.expect_status"},
		{"http reserved header", `{"http":{"url":"http://x/","headers":{"X-Foreman-Fencing-Token":"1"}}}`, "http.headers.X-Foreman-Fencing-Token: headers starting with X-Foreman-"},
		{"http bad header", `{"http":{"url":"http://x/","headers":{"a b":"1"}}}`, "http.headers.a b: is not a valid header name"},
		{"http header newline", `{"http":{"url":"http://x/","headers":{"A":"1\r\nB: 2"}}}`, "http.headers.A: must not contain CR"},
		{"http image", `{"http":{"url":"http://x/"},"image":"alpine"}`, "image: the http driver cannot run an image"},
		{"notify bad scheme", hook(`"url":"file:///etc/passwd","events":["finished"]`), `notify[0].url: must be an http or https URL`},
		{"notify no events", hook(`"url":"http://x/"`), "notify[0].events: must name at least one of"},
		{"notify bad event", hook(`"url":"http://x/","events":["finished","exploded"]`), `notify[0].events[1]: unknown event "exploded"`},
		{"notify twice", hook(`"url":"http://x/","events":["failed","failed"]`), `notify[0].events[1]: "failed" is listed twice`},
		{"notify attempts", hook(`"url":"http://x/","events":["failed"],"max_attempts":1000`), "notify[0].max_attempts: must be between 1 and 100"},
		{"notify at agent", hook(`"url":"http://10.0.0.1:7070/v1/jobs","events":["failed"]`), "notify[0].url: points at a foreman agent"},
		{"notify at agent batch", `{"jobs":[{"command":"true"},{"command":"true","notify":[{"url":"http://x/","events":["failed"]},{"url":"http://10.0.0.1:7070/","events":["failed"]}]}]}`,
			"jobs[1].notify[1].url: points at a foreman agent"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := a.f.AppliedIndex()
			code, body := a.do("POST", "/v1/jobs", tc.body)
			if code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400; body %s", code, body)
			}
			if e := errorOf(t, body); !strings.Contains(e.Error, tc.want) || e.Code != CodeInvalid {
				t.Fatalf("error %+v, want %q", e, tc.want)
			}
			if got := a.f.AppliedIndex(); got != before {
				t.Fatalf("a refused submit changed state (index %d → %d)", before, got)
			}
		})
	}
}

func TestAgentAddrsLoopback(t *testing.T) {
	a := newAgentAddrs([]fsm.Node{{HTTPAddr: "127.0.0.1:7070"}, {HTTPAddr: "[::1]:8080"}, {HTTPAddr: "example.org:80"}})
	for url, bad := range map[string]bool{
		"http://localhost:7070/x": true, "http://127.0.0.1:7070": true, "http://0.0.0.0:7070": true, "http://[::1]:8080/": true,
		"http://[0:0::1]:8080/": true, "http://EXAMPLE.org/": true, "https://example.org/": false, "http://127.0.0.1:7071/": false,
		"http://127.0.0.2:7070/": false, "http://other:7070/": false,
	} {
		err := a.check([]fsm.NewJob{{Spec: fsm.JobSpec{Notify: []fsm.Webhook{{URL: url}}}}}, false)
		if (err != nil) != bad {
			t.Errorf("%s: err %v, want refused=%v", url, err, bad)
		}
	}
}

// TestHTTPJobSpecAndSecrets: an HTTP job's spec is normalised (driver,
// method, timeout default); webhook secrets are never in a reply; the
// job's deliveries are shown with it.
func TestHTTPJobSpecAndSecrets(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("n1", "", 4000, 8192)
	id := a.submit(`{"http":{"url":"https://example.org/hook","method":"post","body":"{}","expect_status":[200,201]},
		"notify":[{"url":"http://receiver.example/h","events":["finished"],"secret":"s3cr3t-value"}]}`)
	j := a.job(id)
	if j.Spec.Driver != HTTPDriver || j.Spec.HTTP == nil || j.Spec.HTTP.Method != "POST" || j.Spec.Timeout.D() != DefaultHTTPTimeout ||
		len(j.Spec.Command) != 0 || j.Spec.Notify[0].Secret != "s3cr3t-value" {
		t.Fatalf("stored spec %+v (http %+v)", j.Spec, j.Spec.HTTP)
	}
	tok := a.place(id, "n1")
	a.cluster.must(fsm.CmdReport, fsm.ReportAttempt{JobID: id, Attempt: 1, FencingToken: tok, Node: "n1", State: fsm.AttemptSucceeded, ExitCode: new(int)})
	for _, path := range []string{"/v1/jobs/" + id, "/v1/jobs", "/v1/jobs?state=succeeded"} {
		code, body := a.do("GET", path, "")
		if code != http.StatusOK || strings.Contains(body, "s3cr3t") {
			t.Errorf("GET %s: %d, secret in reply: %v", path, code, strings.Contains(body, "s3cr3t"))
		}
	}
	var d JobDetail
	_, body := a.do("GET", "/v1/jobs/"+id, "")
	mustJSON(t, body, &d)
	if len(d.Deliveries) != 1 || d.Deliveries[0].State != fsm.DeliveryPending || d.Deliveries[0].Event.State != fsm.JobSucceeded ||
		d.Deliveries[0].URL != "http://receiver.example/h" {
		t.Errorf("deliveries %+v", d.Deliveries)
	}
	if a.job(id).Spec.Notify[0].Secret != "s3cr3t-value" {
		t.Error("redacting a reply changed the stored secret")
	}
}
