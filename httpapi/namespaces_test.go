package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

func TestNamespaceRecordAPI(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("n1", "127.0.0.1:1", 4000, 8192)
	code, body := a.do("PUT", "/v1/namespaces/team-a", `{"max_running":3,"max_cpu":"1.5","max_memory":"2GiB","drivers":["process"]}`)
	if code != http.StatusOK {
		t.Fatalf("put: %d %s", code, body)
	}
	var st NamespaceStatus
	mustJSON(t, body, &st)
	if !st.Configured || st.MaxRunning != 3 || st.MaxCPU != 1500 || st.MaxMemory != 2048 || len(st.Drivers) != 1 || st.AllowRoot {
		t.Fatalf("put reply: %+v", st)
	}
	id := a.submit(`{"command":"true","namespace":"team-a","driver":"process","resources":{"cpu":"500m","memory":256}}`)
	a.place(id, "n1")
	a.submit(`{"command":"true","namespace":"team-a","driver":"process"}`)
	code, body = a.do("GET", "/v1/namespaces/team-a", "")
	if code != http.StatusOK {
		t.Fatalf("get: %d %s", code, body)
	}
	mustJSON(t, body, &st)
	if st.Usage.Running != 1 || st.Usage.CPU != 500 || st.Usage.Memory != 256 || st.Usage.Jobs["queued"] != 1 || st.Usage.Jobs["running"] != 1 {
		t.Fatalf("usage: %+v", st.Usage)
	}
	// A namespace with jobs but no record is listed too; one with neither answers GET.
	a.submit(`{"command":"true","allow_unplaceable":true}`)
	code, body = a.do("GET", "/v1/namespaces", "")
	var list NamespaceList
	mustJSON(t, body, &list)
	if code != http.StatusOK || len(list.Namespaces) != 2 || list.Namespaces[0].Name != "default" || list.Namespaces[0].Configured || list.Namespaces[1].Name != "team-a" {
		t.Fatalf("list: %d %s", code, body)
	}
	if code, body := a.do("GET", "/v1/namespaces/empty", ""); code != http.StatusOK || !strings.Contains(body, `"configured": false`) {
		t.Fatalf("get empty: %d %s", code, body)
	}
	if code, body := a.do("DELETE", "/v1/namespaces/team-a", ""); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, body)
	}
	if code, body := a.do("DELETE", "/v1/namespaces/team-a", ""); code != http.StatusNotFound {
		t.Fatalf("delete again: %d %s, want 404", code, body)
	}
}

func TestNamespaceRecordBadInput(t *testing.T) {
	a := newTestAPI(t)
	for _, tc := range []struct{ path, body, field string }{
		{"/v1/namespaces/team-a", `{"max_running":-1}`, "max_running"},
		{"/v1/namespaces/team-a", `{"max_cpu":"lots"}`, "max_cpu"},
		{"/v1/namespaces/team-a", `{"max_memory":-5}`, "max_memory"},
		{"/v1/namespaces/team-a", `{"drivers":["process","docker"]}`, "drivers[1]"},
		{"/v1/namespaces/team-a", `{"max_runing":1}`, "max_runing"},
		{"/v1/namespaces/-bad", `{}`, "name"},
		{"/v1/namespaces/team-a", `{"share":0}`, "share"},
		{"/v1/namespaces/team-a", `{"share":-2}`, "share"},
		{"/v1/namespaces/team-a", `{"share":1000001}`, "share"},
	} {
		code, body := a.do("PUT", tc.path, tc.body)
		if code != http.StatusBadRequest || !strings.Contains(errorOf(t, body).Error, tc.field) {
			t.Errorf("PUT %s %s: %d %s, want 400 naming %s", tc.path, tc.body, code, body, tc.field)
		}
	}
	if code, body := a.do("GET", "/v1/namespaces", ""); code != http.StatusOK || strings.Contains(body, "team-a") {
		t.Fatalf("a refused PUT left a record: %d %s", code, body)
	}
}

// A namespace's policy is checked at submit, for jobs, workflows and
// schedule templates: a 400 naming the field.
func TestNamespacePolicyOnSubmit(t *testing.T) {
	a := newTestAPI(t)
	a.addNode("n1", "127.0.0.1:1", 4000, 8192)
	if code, body := a.do("PUT", "/v1/namespaces/locked", `{"drivers":["container"]}`); code != http.StatusOK {
		t.Fatalf("put: %d %s", code, body)
	}
	if code, body := a.do("PUT", "/v1/namespaces/admin", `{"allow_root":true}`); code != http.StatusOK {
		t.Fatalf("put: %d %s", code, body)
	}
	for _, tc := range []struct {
		path, body, field string
		ok                bool
	}{
		{"/v1/jobs?namespace=locked", `{"command":"true","driver":"process"}`, "driver", false},
		{"/v1/jobs?namespace=locked", `{"command":"true"}`, "driver", false},
		{"/v1/jobs?namespace=locked", `{"command":"true","driver":"container"}`, "", true},
		{"/v1/jobs?namespace=locked", `{"jobs":[{"command":"true","driver":"container"},{"command":"true","driver":"process"}]}`, "jobs[1].driver", false},
		{"/v1/jobs", `{"command":"true","user":"root"}`, "user", false},
		{"/v1/jobs", `{"command":"true","user":"0:0"}`, "user", false},
		{"/v1/jobs", `{"command":"true","user":"nobody"}`, "", true},
		{"/v1/jobs?namespace=admin", `{"command":"true","user":"root"}`, "", true},
		{"/v1/workflows?namespace=locked", `{"name":"w","jobs":[{"name":"a","command":"true","driver":"process"}]}`, "jobs[0].driver", false},
		{"/v1/schedules?namespace=locked", `{"name":"s","cron":"* * * * *","job":{"command":"true","driver":"process"}}`, "job.driver", false},
		{"/v1/schedules", `{"name":"s","cron":"* * * * *","job":{"command":"true","user":"root"}}`, "job.user", false},
	} {
		code, body := a.do("POST", tc.path, tc.body)
		if tc.ok {
			if code != http.StatusCreated {
				t.Errorf("POST %s %s: %d %s, want 201", tc.path, tc.body, code, body)
			}
			continue
		}
		if code != http.StatusBadRequest || !strings.HasPrefix(errorOf(t, body).Error, tc.field+": ") {
			t.Errorf("POST %s %s: %d %s, want 400 naming %s", tc.path, tc.body, code, body, tc.field)
		}
	}
}

// Setting a namespace's quota and policy needs management; reading it
// needs read on that namespace.
func TestNamespaceRecordACL(t *testing.T) {
	a, _ := newACLAPI(t)
	put := func(secret string) int {
		code, _ := a.do("PUT", "/v1/namespaces/a", `{"allow_root":true}`, "Authorization", "Bearer "+secretFor(secret))
		return code
	}
	for _, role := range []string{"write", "operator", "submit-a"} {
		if code := put(role); code != http.StatusForbidden {
			t.Errorf("%s sets a namespace: %d, want 403", role, code)
		}
	}
	if code := put("management"); code != http.StatusOK {
		t.Fatalf("management sets a namespace: %d", code)
	}
	if code, body := a.send("GET", "/v1/namespaces/a", secretFor("read-a")); code != http.StatusOK || !strings.Contains(body, `"allow_root": true`) {
		t.Errorf("read-a GET a: %d %s", code, body)
	}
	if code, _ := a.send("GET", "/v1/namespaces/b", secretFor("read-a")); code != http.StatusForbidden {
		t.Errorf("read-a GET b: %d, want 403", code)
	}
	code, body := a.send("GET", "/v1/namespaces", secretFor("read-a"))
	if code != http.StatusOK || !strings.Contains(body, `"name": "a"`) || strings.Contains(body, `"name": "default"`) {
		t.Errorf("read-a lists: %d %s, want a only", code, body)
	}
}

// A share is stored and shown; a bad one is refused with the record
// unchanged.
func TestNamespaceShare(t *testing.T) {
	a := newTestAPI(t)
	if code, body := a.do("PUT", "/v1/namespaces/team-a", `{"share":3,"max_running":2}`); code != http.StatusOK || !strings.Contains(body, `"share": 3`) {
		t.Fatalf("put: %d %s", code, body)
	}
	code, body := a.do("PUT", "/v1/namespaces/team-a", `{"share":0}`)
	if code != http.StatusBadRequest || !strings.Contains(errorOf(t, body).Error, "share") {
		t.Fatalf("share 0: %d %s, want 400 naming share", code, body)
	}
	var st NamespaceStatus
	code, body = a.do("GET", "/v1/namespaces/team-a", "")
	mustJSON(t, body, &st)
	if code != http.StatusOK || st.Share != 3 || st.MaxRunning != 2 {
		t.Fatalf("after a refused put: %d %+v, want share 3 and max_running 2", code, st)
	}
	// Without the planner's view wired in, the shares route says so.
	if code, body := a.do("GET", "/v1/namespaces/shares", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("shares without a view: %d %s, want 503", code, body)
	}
}
