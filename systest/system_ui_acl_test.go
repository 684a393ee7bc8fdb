package systest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestSystemUIACL: with --acl, the UI asks the agent who its token is and
// disables what the token may not do, with a tooltip naming the role
// needed: a read-only token sees cancel, retry, drain, eligibility and the
// submit button disabled (and the raft-only parts say they need operator);
// a management token, in the same tab after a new token, gets them back.
func TestSystemUIACL(t *testing.T) {
	b := newBrowser(t)
	bin := foremanBin(t)
	root, err := os.MkdirTemp("", "foreman-systest-uiacl-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killStrays(root); _ = os.RemoveAll(root) })
	ip := subnet() + ".1"
	a := startAgentAt(t, bin, "uiacl1", filepath.Join(root, "uiacl1", "data"), ip, freeBaseOn(t, ip),
		"--acl", "--bootstrap-expect", "1", "--default-driver", "process")
	eventually(t, systemTimeout, "ready", func() error {
		resp, err := http.Get(a.url("/v1/ready"))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("ready: %d", resp.StatusCode)
		}
		return nil
	})
	boot := runForeman(t, bin, a.url(""), "acl", "bootstrap", "--json")
	var mgmt struct {
		Secret string `json:"secret"`
	}
	if boot.code != 0 || json.Unmarshal([]byte(boot.stdout), &mgmt) != nil || mgmt.Secret == "" {
		t.Fatalf("bootstrap: %d %s %s", boot.code, boot.stdout, boot.stderr)
	}
	ro := runForeman(t, bin, a.url(""), "acl", "token", "create", "--token", mgmt.Secret, "--name", "viewer", "--role", "read:*", "--json")
	var reader struct {
		Secret string `json:"secret"`
	}
	if ro.code != 0 || json.Unmarshal([]byte(ro.stdout), &reader) != nil || reader.Secret == "" {
		t.Fatalf("token create: %d %s %s", ro.code, ro.stdout, ro.stderr)
	}
	auth := map[string]string{"Authorization": "Bearer " + mgmt.Secret}
	var job struct {
		ID string `json:"id"`
	}
	eventually(t, systemTimeout, "a running job", func() error {
		if job.ID == "" {
			if err := postJSONHeaders(a.url("/v1/jobs"), auth, map[string]any{"name": "acl-sleeper", "command": "sleep 300"}, &job); err != nil {
				return err
			}
		}
		var j struct {
			Job struct {
				State string `json:"state"`
			} `json:"job"`
		}
		if err := getJSONToken(a.url("/v1/jobs/"+job.ID), mgmt.Secret, &j); err != nil {
			return err
		}
		if j.Job.State != "running" {
			return fmt.Errorf("state %s", j.Job.State)
		}
		return nil
	})

	// The token prompt on the first 401, then the read-only view.
	b.open(a.url("/ui/jobs/"+job.ID), "#token-dialog input[name=token]")
	b.run("enter the read-only token", chromedp.SendKeys(chromedp.CSS("#token-dialog input[name=token]"), reader.Secret),
		chromedp.Click(chromedp.CSS("#token-dialog button[type=submit]")))
	b.wait("job shown", `document.querySelector("#job-state")?.textContent === "running"`)
	b.wait("who the token is", `(document.querySelector("#who")?.textContent || "").includes("viewer (read:*)")`)
	disabled := func(sel, role string) string {
		return `(() => { const b = document.querySelector(` + jsStr(sel) + `); return !!b && b.disabled && b.classList.contains("denied") && b.title.startsWith(` + jsStr("Needs the "+role+" role") + `) && b.title.includes("read:*"); })()`
	}
	b.wait("cancel disabled, tooltip names submit", disabled("#cancel", "submit"))
	b.wait("retry disabled", disabled("#retry", "submit"))
	b.wait("live for a read-only token too", `document.querySelector("#live").classList.contains("live")`)
	b.shot("acl-job")
	// A click on a disabled button does nothing: no dialog, the job runs on.
	b.run("click cancel anyway", chromedp.Click(chromedp.CSS("#cancel")))
	if n := eval[int](b, `document.querySelectorAll("dialog").length`); n != 0 {
		t.Fatalf("a disabled cancel opened %d dialogs", n)
	}

	b.open(a.url("/ui/nodes"), `tr[data-node="uiacl1"]`)
	b.wait("drain disabled, needs operator", disabled(`tr[data-node="uiacl1"] button[data-action=drain]`, "operator"))
	b.wait("eligibility disabled", disabled(`tr[data-node="uiacl1"] button[data-action=ineligible]`, "operator"))
	b.shot("acl-nodes")

	b.open(a.url("/ui/submit"), "#submit-form")
	b.wait("submit disabled", disabled("#submit-btn", "submit"))

	b.open(a.url("/ui/jobs"), `#jobs tr[data-job]`)
	b.run("select a job", chromedp.Click(chromedp.CSS(`#jobs tr[data-job] input[type=checkbox]`)))
	b.wait("bulk cancel disabled", disabled(`button[data-action=bulk-cancel]`, "submit"))
	b.wait("bulk retry disabled", disabled(`button[data-action=bulk-retry]`, "submit"))

	b.open(a.url("/ui/"), "#counts .card")
	b.wait("overview says the leader needs operator", `document.querySelector("#leader").textContent.includes("operator")`)
	b.open(a.url("/ui/cluster"), "#forbidden")
	b.wait("cluster page names the role", `document.querySelector("#forbidden").textContent.includes("operator")`)

	// The same tab with a management token: the actions come back.
	eval[bool](b, `(sessionStorage.setItem("foreman.token", `+jsStr(mgmt.Secret)+`), true)`)
	b.open(a.url("/ui/jobs/"+job.ID), "#job-state")
	b.wait("cancel enabled for management", `(() => { const b = document.querySelector("#cancel"); return !!b && !b.disabled && !b.classList.contains("denied") && (document.querySelector("#who")?.textContent || "").includes("management"); })()`)
	b.run("cancel", chromedp.Click(chromedp.CSS("#cancel")), chromedp.WaitVisible(chromedp.CSS("dialog [data-confirm]")),
		chromedp.Click(chromedp.CSS("dialog [data-confirm]")))
	b.wait("cancelled", `document.querySelector("#job-state").textContent === "cancelled"`)
	if strings.Contains(eval[string](b, `document.body.innerText`), "Needs the") {
		t.Fatal("a management token still sees a disabled action")
	}
}
