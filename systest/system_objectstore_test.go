package systest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/cli"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
	"github.com/foreman-sched/foreman/objstore"
	"github.com/foreman-sched/foreman/objstore/objstoretest"
)

// outputsView is what the test reads of an attempt's outputs.
type outputsView struct {
	Attempts []struct {
		Num     int          `json:"attempt"`
		Node    string       `json:"node"`
		State   string       `json:"state"`
		Outputs *fsm.Outputs `json:"outputs"`
	} `json:"attempts"`
}

// outputsOf is the outputs record of job id's last attempt, read from a.
func outputsOf(a *agentProc, id string) (*fsm.Outputs, error) {
	var v outputsView
	if err := getJSON(a.url("/v1/jobs/"+id), &v); err != nil {
		return nil, err
	}
	if len(v.Attempts) == 0 || v.Attempts[len(v.Attempts)-1].Outputs == nil {
		return nil, fmt.Errorf("job %s: no outputs record yet", id)
	}
	return v.Attempts[len(v.Attempts)-1].Outputs, nil
}

// TestSystemObjectStore (issue 25) on three real agents and a real S3
// server (SeaweedFS): a workflow parent writes an artifact and a result on
// node A; A is killed -9 once the parent's outputs are stored; the child
// runs on node B and reads both; the parent's logs and artifact are read
// from every node that is left. Then the store stops: attempts still
// finish, their outputs stay pending (nothing is claimed stored), and when
// the store is back every file arrives.
func TestSystemObjectStore(t *testing.T) {
	if testing.Short() {
		t.Skip("system test: skipped in -short mode")
	}
	srv := objstoretest.Start(t, "foreman-systest") // sets AWS_* for the agents
	const prefix = "cluster"
	// A store an agent cannot use stops it at start, saying why in one line.
	for _, tc := range []struct {
		url, secret, want string
	}{
		{"s3://no-such-bucket/x", objstoretest.SecretKey, "bucket does not exist: no-such-bucket"},
		{"s3://foreman-systest", "wrong-secret", "access to the object store refused"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), cliCommandTimeout)
		cmd := osexec.CommandContext(ctx, foremanBin(t), "agent", "--dev", "--port", fmt.Sprint(freeBase(t)),
			"--object-store", tc.url, "--object-store-endpoint", srv.Endpoint, "--object-store-path-style")
		cmd.Env = append(os.Environ(), "AWS_SECRET_ACCESS_KEY="+tc.secret)
		b, err := cmd.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if err == nil || timedOut || !strings.Contains(string(b), tc.want) || strings.Contains(string(b), "wrong-secret") {
			t.Errorf("agent --object-store %s: %v, output %q; want an exit naming %q (and no secret)", tc.url, err, b, tc.want)
		}
	}
	c := newSysCluster(t, 3, "--object-store", "s3://foreman-systest/"+prefix, "--object-store-endpoint", srv.Endpoint,
		"--object-store-path-style", "--object-store-retry", "30m")
	bin := foremanBin(t)
	leader := c.leader()
	fs := c.followers()
	nodeA, nodeB := fs[0], fs[1]
	root := t.TempDir()
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	gate := filepath.Join(root, "gate")

	cl := apiClient(t, leader.url(""), cli.ClientConfig{})
	ctx := context.Background()
	one := 1

	// A task's checkpoint follows it through the store: its first attempt
	// runs on A (B is ineligible, the leader excluded), writes a checkpoint
	// and fails; it is retried once A is dead (below).
	if r := runForeman(t, bin, leader.url(""), "node", "eligibility", nodeB.name, "ineligible"); r.code != 0 {
		t.Fatalf("node eligibility: %d %s", r.code, r.stderr)
	}
	ck := submitJob(t, leader, map[string]any{
		"command": []string{"/bin/sh", "-c", `if [ -e "$FOREMAN_CHECKPOINT/state" ]; then cat "$FOREMAN_CHECKPOINT/state" > "$FOREMAN_RESULT"; else printf "from-$FOREMAN_NODE" > "$FOREMAN_CHECKPOINT/state"; exit 3; fi`},
		"driver":  "process", "max_attempts": one, "constraints": []string{"sysnode != " + leader.name},
	})
	waitJobState(t, leader, ck, "failed")
	eventually(t, systemTimeout, "the checkpoint stored", func() error {
		o, err := outputsOf(leader, ck)
		if err != nil {
			return err
		}
		if o.State != fsm.OutputsStored || o.Object(fsm.OutputCheckpoint) == nil {
			return fmt.Errorf("outputs %+v", o)
		}
		return nil
	})
	if r := runForeman(t, bin, leader.url(""), "node", "eligibility", nodeB.name, "eligible"); r.code != 0 {
		t.Fatalf("node eligibility: %d %s", r.code, r.stderr)
	}
	job := func(name string, node *agentProc, script string, deps ...string) httpapi.JobSpecInput {
		return httpapi.JobSpecInput{Name: name, Command: httpapi.JSONString(script), Driver: "process", MaxAttempts: &one,
			Constraints: []string{"sysnode == " + node.name}, DependsOn: deps}
	}
	wf := httpapi.WorkflowInput{Name: "objstore", Jobs: []httpapi.JobSpecInput{
		job("parent", nodeA, `printf "result-of-parent" > "$FOREMAN_RESULT" && mkdir -p "$FOREMAN_ARTIFACTS/out" &&
			printf "artifact-of-parent" > "$FOREMAN_ARTIFACTS/out/data.txt" && echo "stdout-of-parent" && echo "stderr-of-parent" >&2`),
		// The gate holds the child until node A is dead.
		job("gate", nodeB, "while [ ! -e "+gate+" ]; do sleep 0.1; done"),
		job("child", nodeB, `printf "%s+%s@%s" "$(cat "$FOREMAN_INPUTS/parent/result")" "$(cat "$FOREMAN_INPUTS/parent/artifacts/out/data.txt")" "$FOREMAN_NODE" > "$FOREMAN_RESULT"`, "parent", "gate"),
	}}
	var sub *api.WorkflowSubmitResponse
	eventually(t, systemTimeout, "submit the workflow", func() error {
		var err error
		sub, err = submitWorkflow(ctx, cl, wf)
		return err
	})
	ids := map[string]string{}
	for _, j := range sub.Jobs {
		ids[j.Name] = j.ID
	}
	parent, child := ids["parent"], ids["child"]
	waitJobState(t, leader, parent, "succeeded")
	var out *fsm.Outputs
	eventually(t, systemTimeout, "the parent's outputs stored", func() error {
		var err error
		if out, err = outputsOf(leader, parent); err != nil {
			return err
		}
		if out.State != fsm.OutputsStored {
			return fmt.Errorf("outputs %+v", out)
		}
		return nil
	})
	if out.Store != "s3://foreman-systest/"+prefix || out.Object("artifacts/out/data.txt") == nil || out.Object("logs/stdout") == nil || out.Object("logs/stderr") == nil {
		t.Fatalf("parent's outputs record: %+v", out)
	}
	if k := out.Object("artifacts/out/data.txt").Key; k != prefix+"/default/"+parent+"/1/artifacts/out/data.txt" {
		t.Errorf("artifact key %q", k)
	}

	nodeA.kill9()
	// At once, while gossip may still call A alive: the proxy to A fails
	// and the answer comes from the store.
	if r := runForeman(t, bin, leader.url(""), "artifacts", "get", parent, "out/data.txt", "-o", "-"); r.code != 0 || r.stdout != "artifact-of-parent" {
		t.Errorf("artifacts get right after the kill: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := runForeman(t, bin, leader.url(""), "logs", parent); r.code != 0 || r.stdout != "stdout-of-parent\n" {
		t.Errorf("logs right after the kill: %d %q %q", r.code, r.stdout, r.stderr)
	}
	eventually(t, systemTimeout, nodeA.name+" dead", func() error {
		var nodes struct {
			Nodes []fsm.Node `json:"nodes"`
		}
		if err := getJSON(leader.url("/v1/nodes"), &nodes); err != nil {
			return err
		}
		for _, n := range nodes.Nodes {
			if n.Name == nodeA.name && n.Gossip != fsm.NodeDead {
				return fmt.Errorf("%s is %s", n.Name, n.Gossip)
			}
		}
		return nil
	})
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitJobState(t, leader, child, "succeeded")
	res, err := cl.JobResult(ctx, child)
	if want := "result-of-parent+artifact-of-parent@" + nodeB.name; err != nil || string(res) != want {
		t.Errorf("child's result %q (%v), want %q", res, err, want)
	}
	// The checkpoint job again: its second attempt runs on B and finds A's
	// checkpoint, from the store.
	if r := runForeman(t, bin, leader.url(""), "job", "retry", ck); r.code != 0 {
		t.Fatalf("job retry: %d %s", r.code, r.stderr)
	}
	waitJobState(t, leader, ck, "succeeded")
	if res, err := cl.JobResult(ctx, ck); err != nil || string(res) != "from-"+nodeA.name {
		t.Errorf("the retried job's result %q (%v), want A's checkpoint %q", res, err, "from-"+nodeA.name)
	}

	// From every node that is left: logs and the artifact, from the store.
	for _, a := range c.others(nodeA) {
		addr := a.url("")
		if r := runForeman(t, bin, addr, "logs", parent); r.code != 0 || r.stdout != "stdout-of-parent\n" {
			t.Errorf("foreman logs %s via %s: %d %q %q", parent, a.name, r.code, r.stdout, r.stderr)
		}
		if r := runForeman(t, bin, addr, "logs", "--stderr", parent); r.code != 0 || r.stderr != "stderr-of-parent\n" {
			t.Errorf("foreman logs --stderr via %s: %d %q %q", a.name, r.code, r.stdout, r.stderr)
		}
		if r := runForeman(t, bin, addr, "artifacts", "get", parent, "out/data.txt", "-o", "-"); r.code != 0 || r.stdout != "artifact-of-parent" {
			t.Errorf("artifacts get via %s: %d %q %q", a.name, r.code, r.stdout, r.stderr)
		}
		resp, err := http.Get(a.url("/v1/jobs/" + parent + "/artifacts/out/data.txt"))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get(httpapi.HeaderArtifactSource) != httpapi.SourceStore {
			t.Errorf("GET artifact via %s: %d source %q, want 200 from the store", a.name, resp.StatusCode, resp.Header.Get(httpapi.HeaderArtifactSource))
		}
		if r := runForeman(t, bin, addr, "job", "status", parent); r.code != 0 || !strings.Contains(r.stdout, "in s3://foreman-systest/"+prefix+" (3 objects)") {
			t.Errorf("job status via %s: %d %q %q", a.name, r.code, r.stdout, r.stderr)
		}
	}

	// The store stops: attempts finish; their outputs stay pending.
	srv.Stop()
	var jobs []string
	for i := range 3 {
		jobs = append(jobs, submitJob(t, leader, map[string]any{
			"command": []string{"/bin/sh", "-c", fmt.Sprintf(`head -c 300000 /dev/urandom > "$FOREMAN_ARTIFACTS/blob" && printf "%d" > "$FOREMAN_ARTIFACTS/n" && echo out-%d`, i, i)},
			"driver":  "process",
		}))
	}
	for _, id := range jobs {
		waitJobState(t, leader, id, "succeeded")
	}
	eventually(t, systemTimeout, "an upload retried against the stopped store", func() error {
		for _, a := range c.others(nodeA) {
			b, _ := os.ReadFile(a.logPath)
			if strings.Contains(string(b), "upload failed; retrying") {
				return nil
			}
		}
		return fmt.Errorf("no retry logged yet")
	})
	for _, id := range jobs {
		o, err := outputsOf(leader, id)
		if err != nil || o.State != fsm.OutputsPending || len(o.Objects) != 0 {
			t.Fatalf("job %s with the store down: outputs %+v %v, want pending with no objects", id, o, err)
		}
	}
	// The store is back: every file arrives, byte for byte.
	srv.Restart()
	st, err := objstore.New(srv.Config(""))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range jobs {
		var o *fsm.Outputs
		eventually(t, 3*systemTimeout, "job "+id+"'s outputs stored after the outage", func() error {
			var err error
			if o, err = outputsOf(leader, id); err != nil {
				return err
			}
			if o.State != fsm.OutputsStored {
				return fmt.Errorf("outputs %+v", o)
			}
			return nil
		})
		if len(o.Objects) != 4 {
			t.Errorf("job %s: %d objects, want blob, n, stdout, stderr: %+v", id, len(o.Objects), o.Objects)
		}
		for _, name := range []string{"artifacts/blob", "artifacts/n", "logs/stdout"} {
			obj := o.Object(name)
			if obj == nil {
				t.Errorf("job %s: %s not stored", id, name)
				continue
			}
			var viaAPI strings.Builder
			path := "/v1/jobs/" + id + "/logs"
			if a, ok := strings.CutPrefix(name, "artifacts/"); ok {
				path = "/v1/jobs/" + id + "/artifacts/" + a
			}
			if err := getRaw(leader.url(path), &viaAPI); err != nil {
				t.Fatal(err)
			}
			r, size, err := st.Open(ctx, obj.Key)
			if err != nil {
				t.Fatalf("open %s: %v", obj.Key, err)
			}
			b, _ := io.ReadAll(r)
			r.Close()
			if size != obj.Size || string(b) != viaAPI.String() {
				t.Errorf("%s of job %s: the store holds %d bytes (record %d), the node serves %d", name, id, len(b), obj.Size, viaAPI.Len())
			}
		}
	}
	var m strings.Builder
	if err := getRaw(leader.url("/v1/metrics"), &m); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"foreman_outputs_uploaded_bytes_total", "foreman_outputs_upload_failures_total", "foreman_outputs_uploads_pending 0"} {
		if !strings.Contains(m.String(), name) {
			t.Errorf("metrics lack %s", name)
		}
	}
}

// getRaw copies the body of a GET to out.
func getRaw(url string, out io.Writer) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %s %s", url, resp.Status, b)
	}
	_, err = io.Copy(out, resp.Body)
	return err
}

// TestSystemObjectStoreGivesUp: with the store down for longer than
// --object-store-retry, the attempt still finishes, and its record, the
// event stream, `job status` and `artifacts ls` say which files were not
// stored; the node keeps serving them.
func TestSystemObjectStoreGivesUp(t *testing.T) {
	if testing.Short() {
		t.Skip("system test: skipped in -short mode")
	}
	srv := objstoretest.Start(t, "foreman-giveup")
	bin := foremanBin(t)
	root, err := os.MkdirTemp("", "foreman-systest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killStrays(root); os.RemoveAll(root) })
	base := freeBase(t)
	dir := filepath.Join(root, "dev", "data")
	a := &agentProc{name: "dev", dir: dir, base: base, bin: bin, logPath: filepath.Join(root, "dev", "dev.log"),
		args: []string{"agent", "--dev", "--port", fmt.Sprint(base), "--data-dir", dir, "--default-driver", "process",
			"--job-users", "*", "--job-default-user=",
			"--object-store", "s3://foreman-giveup", "--object-store-endpoint", srv.Endpoint, "--object-store-path-style",
			"--object-store-retry", "3s"}}
	a.start(t) // checks the store: it is up now
	t.Cleanup(func() {
		a.stop9()
		if t.Failed() {
			b, _ := os.ReadFile(a.logPath)
			t.Logf("--- dev log ---\n%s", tail(string(b), 6000))
		}
	})
	eventually(t, systemTimeout, "dev agent ready", func() error {
		var r struct{}
		return getJSON(a.url("/v1/ready"), &r)
	})
	srv.Stop()
	id := submitJob(t, a, map[string]any{
		"command": []string{"/bin/sh", "-c", `printf kept > "$FOREMAN_ARTIFACTS/out.txt" && echo hello`},
		"driver":  "process",
	})
	waitJobState(t, a, id, "succeeded")
	var o *fsm.Outputs
	eventually(t, systemTimeout, "the upload given up", func() error {
		var err error
		if o, err = outputsOf(a, id); err != nil {
			return err
		}
		if o.State != fsm.OutputsPartial {
			return fmt.Errorf("outputs %+v", o)
		}
		return nil
	})
	notStored := strings.Join(o.NotStored, ",")
	if len(o.Objects) != 0 || !strings.Contains(notStored, "artifacts/out.txt") || !strings.Contains(notStored, "logs/stdout") ||
		!strings.Contains(o.Error, "gave up after 3s") {
		t.Errorf("outputs %+v: want nothing stored, out.txt and stdout named, the cause", o)
	}
	addr := a.url("")
	if r := runForeman(t, bin, addr, "job", "status", id); r.code != 0 || !strings.Contains(r.stdout, "artifacts/out.txt") || !strings.Contains(r.stdout, "on node dev only") && !strings.Contains(r.stdout, "stay on node") {
		t.Errorf("job status: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := runForeman(t, bin, addr, "artifacts", "ls", id); r.code != 0 || !strings.Contains(r.stderr, "object store s3://foreman-giveup: partial") || !strings.Contains(r.stderr, "not stored: ") {
		t.Errorf("artifacts ls: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := runForeman(t, bin, addr, "artifacts", "get", id, "out.txt", "-o", "-"); r.code != 0 || r.stdout != "kept" {
		t.Errorf("artifacts get from the node: %d %q %q", r.code, r.stdout, r.stderr)
	}
	var tl strings.Builder
	if err := getRaw(a.url("/v1/jobs/"+id+"/events"), &tl); err != nil || !strings.Contains(tl.String(), "outputs_not_stored") || !strings.Contains(tl.String(), "artifacts/out.txt") {
		t.Errorf("the job's timeline: %v %s", err, tl.String())
	}
}

// TestSystemObjectStoreInputs: job inputs from HTTP and from the S3
// store, placed in the job's directory before it starts (checksum
// checked, cached by it), from the API and `submit --input`; a 404, a
// wrong checksum and bad specs fail with the source or field named.
func TestSystemObjectStoreInputs(t *testing.T) {
	if testing.Short() {
		t.Skip("system test: skipped in -short mode")
	}
	srv := objstoretest.Start(t, "foreman-inputs")
	st, err := objstore.New(srv.Config(""))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := st.Put(ctx, "in/data.txt", strings.NewReader("s3-data"), 7); err != nil {
		t.Fatal(err)
	}
	var gets atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/huge.bin" { // says 100 GiB; the agent must refuse before reading
			w.Header().Set("Content-Length", "107374182400")
			w.WriteHeader(http.StatusOK)
			return
		}
		if r.URL.Path != "/file.txt" {
			http.NotFound(w, r)
			return
		}
		gets.Add(1)
		io.WriteString(w, "http-data")
	}))
	t.Cleanup(hs.Close)
	sum := fmt.Sprintf("sha256:%x", sha256.Sum256([]byte("http-data")))

	bin := foremanBin(t)
	root, err := os.MkdirTemp("", "foreman-systest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killStrays(root); os.RemoveAll(root) })
	base := freeBase(t)
	dir := filepath.Join(root, "dev", "data")
	a := &agentProc{name: "dev", dir: dir, base: base, bin: bin, logPath: filepath.Join(root, "dev", "dev.log"),
		args: []string{"agent", "--dev", "--port", fmt.Sprint(base), "--data-dir", dir, "--default-driver", "process",
			"--job-users", "*", "--job-default-user=",
			"--object-store", "s3://foreman-inputs/out", "--object-store-endpoint", srv.Endpoint, "--object-store-path-style"}}
	a.start(t)
	t.Cleanup(func() {
		a.stop9()
		if t.Failed() {
			b, _ := os.ReadFile(a.logPath)
			t.Logf("--- dev log ---\n%s", tail(string(b), 6000))
		}
	})
	eventually(t, systemTimeout, "dev agent ready", func() error {
		var r struct{}
		return getJSON(a.url("/v1/ready"), &r)
	})
	one := 1
	job := func(inputs ...map[string]string) map[string]any {
		return map[string]any{"command": []string{"/bin/sh", "-c", `cat in/file.txt s3.txt > "$FOREMAN_RESULT"`},
			"driver": "process", "max_attempts": one, "inputs": inputs}
	}
	httpIn := map[string]string{"source": hs.URL + "/file.txt", "dest": "in/", "checksum": sum}
	s3In := map[string]string{"source": "s3://foreman-inputs/in/data.txt", "dest": "s3.txt"}
	for i := range 2 {
		id := submitJob(t, a, job(httpIn, s3In))
		waitJobState(t, a, id, "succeeded")
		var res strings.Builder
		if err := getRaw(a.url("/v1/jobs/"+id+"/result"), &res); err != nil || res.String() != "http-datas3-data" {
			t.Errorf("job %d's result %q (%v), want both inputs", i, res.String(), err)
		}
	}
	if n := gets.Load(); n != 1 {
		t.Errorf("the HTTP input was fetched %d times; want once (then from the node's cache by checksum)", n)
	}
	// Failures name the source and the cause; the attempt fails (and is
	// retried like any failed start when max_attempts allows).
	for _, tc := range []struct {
		in   map[string]string
		want string
	}{
		{map[string]string{"source": hs.URL + "/missing.txt"}, "404"},
		{map[string]string{"source": hs.URL + "/file.txt", "dest": "x", "checksum": "sha256:" + strings.Repeat("0", 64)}, "checksum mismatch"},
		{map[string]string{"source": "s3://foreman-inputs/in/none.txt"}, "no such object"},
		{map[string]string{"source": hs.URL + "/huge.bin"}, "107374182400 bytes, over this node's input limit"},
	} {
		id := submitJob(t, a, job(tc.in))
		j := waitJobState(t, a, id, "failed")
		if r := j.Job.Reason; !strings.Contains(r, tc.in["source"]) || !strings.Contains(r, tc.want) {
			t.Errorf("input %s: reason %q, want the source and %q", tc.in["source"], r, tc.want)
		}
	}
	// Bad specs: a 400 naming the field; the CLI exits non-zero naming it.
	for field, in := range map[string]map[string]string{
		"inputs[0].dest":     {"source": hs.URL + "/file.txt", "dest": "../x"},
		"inputs[0].source":   {"source": "ftp://h/x"},
		"inputs[0].checksum": {"source": hs.URL + "/file.txt", "checksum": "md5:abc"},
	} {
		err := postJSON(a.url("/v1/jobs"), job(in), nil)
		if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), field) {
			t.Errorf("submit with a bad %s: %v", field, err)
		}
	}
	addr := a.url("")
	if r := runForeman(t, bin, addr, "submit", "--driver", "process", "--input", "https://user:pw@h/x", "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "inputs[0].source") {
		t.Errorf("submit --input with credentials in the URL: %d %q", r.code, r.stderr)
	}
	r := runForeman(t, bin, addr, "submit", "--driver", "process", "--input", hs.URL+"/file.txt:copy.txt", "--", "cat", "copy.txt")
	if r.code != 0 {
		t.Fatalf("submit --input: %d %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	waitJobState(t, a, id, "succeeded")
	if r := runForeman(t, bin, addr, "logs", id); r.stdout != "http-data" {
		t.Errorf("logs of the --input job: %q %q", r.stdout, r.stderr)
	}
	// The agent's store credentials are not in a job's environment.
	r = runForeman(t, bin, addr, "submit", "--driver", "process", "--", "env")
	id = strings.TrimSpace(r.stdout)
	waitJobState(t, a, id, "succeeded")
	if r := runForeman(t, bin, addr, "logs", id); !strings.Contains(r.stdout, "FOREMAN_JOB_ID=") || strings.Contains(r.stdout, "AWS_") || strings.Contains(r.stdout, objstoretest.SecretKey) {
		t.Errorf("a job's environment: %q", r.stdout)
	}
}
