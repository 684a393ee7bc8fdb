package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

// TestSecretEnv: secret_env values reach the stored spec (and so the job's
// environment) but never a reply — job status, listings, schedules — and
// bad secret_env fields are a 400 naming the field, without the value.
func TestSecretEnv(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("n1", "", 4000, 8192)
	id := a.submit(`{"command":"true","env":{"PLAIN":"visible"},"secret_env":{"DB_PASSWORD":"hunter2-s3cret"}}`)
	if got := a.job(id).Spec.SecretEnv["DB_PASSWORD"]; got != "hunter2-s3cret" {
		t.Fatalf("stored secret_env = %q", got)
	}
	for _, path := range []string{"/v1/jobs/" + id, "/v1/jobs", "/v1/jobs/" + id + "/events"} {
		code, body := a.do("GET", path, "")
		if code != http.StatusOK || strings.Contains(body, "hunter2") {
			t.Errorf("GET %s: %d, secret in reply: %v", path, code, strings.Contains(body, "hunter2"))
		}
		if path == "/v1/jobs/"+id && !strings.Contains(strings.ReplaceAll(body, " ", ""), `"DB_PASSWORD":"`+RedactedValue+`"`) {
			t.Errorf("GET %s: the secret's name is not listed as redacted: %s", path, body)
		}
	}
	if a.job(id).Spec.SecretEnv["DB_PASSWORD"] != "hunter2-s3cret" {
		t.Error("redacting a reply changed the stored value")
	}

	code, body := a.do("POST", "/v1/schedules", `{"name":"nightly","cron":"0 3 * * *","job":{"command":"true","secret_env":{"TOKEN":"tok-s3cret"}}}`)
	if code/100 != 2 {
		t.Fatalf("put schedule: %d %s", code, body)
	}
	for _, path := range []string{"/v1/schedules/nightly", "/v1/schedules"} {
		code, body := a.do("GET", path, "")
		if code != http.StatusOK || strings.Contains(body, "tok-s3cret") {
			t.Errorf("GET %s: %d, secret in reply: %v", path, code, strings.Contains(body, "tok-s3cret"))
		}
	}

	for _, tc := range []struct{ name, body, want string }{
		{"bad name", `{"command":"true","secret_env":{"1X":"v-s3cret"}}`, "secret_env.1X: variable names"},
		{"reserved", `{"command":"true","secret_env":{"FOREMAN_JOB_ID":"v-s3cret"}}`, "secret_env.FOREMAN_JOB_ID: names starting with"},
		{"in both", `{"command":"true","env":{"A":"1"},"secret_env":{"A":"v-s3cret"}}`, "secret_env.A: is also in env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := a.do("POST", "/v1/jobs", tc.body)
			if code != http.StatusBadRequest || !strings.Contains(body, tc.want) || strings.Contains(body, "s3cret") {
				t.Fatalf("got %d %s; want 400 with %q and no value", code, body, tc.want)
			}
		})
	}
}
