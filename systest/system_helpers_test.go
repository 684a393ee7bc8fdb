package systest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// System tests run the real binary as separate agent processes on loopback.
// Each multi-agent cluster gets its own 127.X.Y.0/24 addresses (X from the
// test process ID, Y a per-process counter) so parallel test runs and other
// engineers' tests do not meet on the same address and port.

// Named timeouts. They are generous for a slow 2-core CI machine; the product's
// own targets (the 15 s "dead node → rerun elsewhere" budget, the lease) are
// asserted separately on measured durations.
const (
	systemTimeout     = 60 * time.Second // cluster formation, job state changes
	agentExitTimeout  = 30 * time.Second // a SIGTERMed agent shuts down
	defaultLease      = 6 * time.Second  // exec.DefaultLeaseDuration (agent --lease default)
	leaderContact     = 2 * time.Second  // cluster's LeaderContactTimeout: renewals stop this long after contact is lost
	killSlack         = 3 * time.Second  // supervisor noticing + SIGKILL + our polling
	rerunTarget       = 15 * time.Second // DESIGN.md: dead node → rerun elsewhere
	measureTimeout    = 60 * time.Second // how long we keep measuring past a target, to report the number
	cliCommandTimeout = 60 * time.Second
)

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// TestMain runs the system tests from the repository root: they run the
// README's commands and read testdata/, contrib/ and scripts/ as a user at
// the root would, and `go build .` there builds the binary under test.
func TestMain(m *testing.M) {
	if err := os.Chdir(".."); err != nil {
		fmt.Fprintln(os.Stderr, "systest: chdir to the repository root:", err)
		os.Exit(2)
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// foremanBin returns the binary under test: $FOREMAN_BIN (make test sets it)
// or one build per test process, shared by every test.
func foremanBin(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("FOREMAN_BIN"); b != "" {
		return b
	}
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "foreman-systest-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "foreman")
		cmd := exec.Command("go", "build", "-tags", "netgo osusergo", "-o", binPath, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if b, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("build foreman: %v\n%s", err, b)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// freeBase finds a base port whose three consecutive ports are free on 127.0.0.1.
func freeBase(t testing.TB) int {
	t.Helper()
	return freeBaseOn(t, "127.0.0.1")
}

// freeBaseOn finds a base port whose three consecutive TCP and UDP ports are free on every ip.
func freeBaseOn(t testing.TB, ips ...string) int {
	t.Helper()
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", net.JoinHostPort(ips[0], "0"))
		if err != nil {
			t.Fatal(err)
		}
		base := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if base > 65000 {
			continue
		}
		if portsFree(ips, base) {
			return base
		}
	}
	t.Fatal("no free port range")
	return 0
}

func portsFree(ips []string, base int) bool {
	for _, ip := range ips {
		for p := base; p < base+3; p++ {
			addr := net.JoinHostPort(ip, fmt.Sprint(p))
			l, err := net.Listen("tcp", addr)
			if err != nil {
				return false
			}
			l.Close()
			u, err := net.ListenPacket("udp", addr)
			if err != nil {
				return false
			}
			u.Close()
		}
	}
	return true
}

type agentProc struct {
	name, dir string
	ip        string // bind address; "" means 127.0.0.1
	base      int
	args      []string // the full agent command line, for restarts
	cmd       *exec.Cmd
	logPath   string
	bin       string
}

func (a *agentProc) host() string {
	if a.ip == "" {
		return "127.0.0.1"
	}
	return a.ip
}

func (a *agentProc) url(path string) string {
	return fmt.Sprintf("http://%s%s", net.JoinHostPort(a.host(), fmt.Sprint(a.base)), path)
}

func startAgent(t testing.TB, bin, name, dir string, base int, extra ...string) *agentProc {
	t.Helper()
	return startAgentAt(t, bin, name, dir, "127.0.0.1", base, extra...)
}

// startAgentAt starts `foreman agent` bound to ip:base. Its log goes to
// <dir>/../<name>.log and is printed (tail) when the test fails.
func startAgentAt(t testing.TB, bin, name, dir, ip string, base int, extra ...string) *agentProc {
	t.Helper()
	// Jobs of these tests write into the tests' 0700 temp dirs: they run as
	// the agent's user (TestSystemJobUsers covers the unprivileged default).
	args := append([]string{"agent", "--name", name, "--data-dir", dir, "--bind", ip,
		"--port", fmt.Sprint(base), "--job-users", "*", "--job-default-user="}, extra...)
	a := &agentProc{name: name, dir: dir, ip: ip, base: base, args: args, bin: bin,
		logPath: filepath.Join(filepath.Dir(dir), name+".log")}
	a.start(t)
	t.Cleanup(func() {
		a.stop9()
		if t.Failed() {
			b, _ := os.ReadFile(a.logPath)
			t.Logf("--- %s log ---\n%s", name, tail(string(b), 6000))
		}
	})
	return a
}

func (a *agentProc) start(t testing.TB) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(a.logPath), 0o755); err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(logf, "=== %s start %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(a.args, " "))
	cmd := exec.Command(a.bin, a.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	logf.Close() // the child holds its own copy
	a.cmd = cmd
}

// restart starts the agent again with the same flags and data dir.
func (a *agentProc) restart(t testing.TB) {
	t.Helper()
	if a.running() {
		t.Fatalf("restart %s: still running", a.name)
	}
	a.start(t)
}

func (a *agentProc) running() bool { return a.cmd != nil && a.cmd.ProcessState == nil }

// kill9 sends SIGKILL to the agent process only: its supervisors live in
// their own sessions and must survive it.
func (a *agentProc) kill9() {
	if a.running() {
		_ = a.cmd.Process.Signal(syscall.SIGKILL)
		_ = a.cmd.Wait()
	}
}

// stop9 kills the agent's whole process group (cleanup).
func (a *agentProc) stop9() {
	if a.running() {
		_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
		_ = a.cmd.Wait()
	}
}

// term sends SIGTERM to the agent process and waits for it to exit.
func (a *agentProc) term(t testing.TB) time.Duration {
	t.Helper()
	start := time.Now()
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = a.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(agentExitTimeout):
		a.stop9()
		<-done
		t.Fatalf("%s did not exit within %s of SIGTERM", a.name, agentExitTimeout)
	}
	return time.Since(start)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// ---- HTTP ----

func getJSON(url string, v any) error {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return json.Unmarshal(b, v)
}

func postJSON(url string, body any, v any) error {
	return postJSONHeaders(url, nil, body, v)
}

func postJSONHeaders(url string, hdr map[string]string, body any, v any) error {
	b, _ := json.Marshal(body)
	c := http.Client{Timeout: 10 * time.Second}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, rb)
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(rb, v)
}

// eventually polls cond until it returns nil or the deadline passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() error) {
	t.Helper()
	if err := poll(d, cond); err != nil {
		t.Fatalf("%s: not true after %s: %v", what, d, err)
	}
}

// poll is eventually without the failure: it returns cond's last error.
func poll(d time.Duration, cond func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond) // polling interval, not synchronisation
	}
}

// ---- API views ----

type raftView struct {
	Leader  string `json:"leader"`
	Term    uint64 `json:"term"`
	Servers []struct {
		ID       string `json:"id"`
		Role     string `json:"role"`
		Suffrage string `json:"suffrage"`
	} `json:"servers"`
}

func leaderOf(a *agentProc) (string, error) {
	var rv raftView
	if err := getJSON(a.url("/v1/cluster/raft"), &rv); err != nil {
		return "", err
	}
	if rv.Leader == "" {
		return "", fmt.Errorf("%s sees no leader", a.name)
	}
	return rv.Leader, nil
}

// termOf is a's current raft term.
func termOf(t testing.TB, a *agentProc) uint64 {
	t.Helper()
	var rv raftView
	if err := getJSON(a.url("/v1/cluster/raft"), &rv); err != nil {
		t.Fatalf("raft info of %s: %v", a.name, err)
	}
	return rv.Term
}

type attemptView struct {
	Num             int       `json:"attempt"`
	Node            string    `json:"node"`
	State           string    `json:"state"`
	Reason          string    `json:"reason"`
	FencingToken    uint64    `json:"fencing_token"`
	Counted         bool      `json:"counted"`
	CancelRequested string    `json:"cancel_requested"`
	AssignedAt      time.Time `json:"assigned_at"`
	StartedAt       time.Time `json:"started_at"`
	FinishedAt      time.Time `json:"finished_at"`
	ExitCode        *int      `json:"exit_code"`
}

type jobView struct {
	Job struct {
		ID              string    `json:"id"`
		State           string    `json:"state"`
		Reason          string    `json:"reason"`
		Attempts        int       `json:"attempts"`
		CountedAttempts int       `json:"counted_attempts"`
		Current         int       `json:"current_attempt"`
		NextRunAt       time.Time `json:"next_run_at"`
		ExitCode        *int      `json:"exit_code"`
	} `json:"job"`
	Attempts []attemptView `json:"attempts"`
}

// attempt returns attempt number n (1-based) or nil.
func (j *jobView) attempt(n int) *attemptView {
	for i := range j.Attempts {
		if j.Attempts[i].Num == n {
			return &j.Attempts[i]
		}
	}
	return nil
}

// latest returns the attempt with the highest number, or nil.
func (j *jobView) latest() *attemptView {
	var l *attemptView
	for i := range j.Attempts {
		if l == nil || j.Attempts[i].Num > l.Num {
			l = &j.Attempts[i]
		}
	}
	return l
}

func (j *jobView) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "job %s %s (%s) attempts=%d counted=%d:", j.Job.ID, j.Job.State, j.Job.Reason, j.Job.Attempts, j.Job.CountedAttempts)
	for _, a := range j.Attempts {
		fmt.Fprintf(&b, " [#%d %s %s/%s tok=%d counted=%v]", a.Num, a.Node, a.State, a.Reason, a.FencingToken, a.Counted)
	}
	return b.String()
}

func getJob(a *agentProc, id string) (*jobView, error) {
	var j jobView
	if err := getJSON(a.url("/v1/jobs/"+id), &j); err != nil {
		return nil, err
	}
	return &j, nil
}

func submitJob(t testing.TB, a *agentProc, spec map[string]any) string {
	t.Helper()
	var sub struct {
		ID string `json:"id"`
	}
	// A submit can race an election; the idempotency key makes the retry safe.
	key := fmt.Sprintf("systest-%d-%d", os.Getpid(), submitSeq.Add(1))
	eventually(t, systemTimeout, "submit", func() error {
		return postJSONHeaders(a.url("/v1/jobs"), map[string]string{"Idempotency-Key": key}, spec, &sub)
	})
	if sub.ID == "" {
		t.Fatal("submit returned no job ID")
	}
	return sub.ID
}

var submitSeq atomic.Int64

func waitJobState(t testing.TB, a *agentProc, id, want string) *jobView {
	t.Helper()
	var last *jobView
	eventually(t, systemTimeout, "job "+id+" "+want, func() error {
		j, err := getJob(a, id)
		if err != nil {
			return err
		}
		last = j
		if j.Job.State != want {
			switch j.Job.State {
			case "failed", "cancelled", "succeeded", "skipped":
				t.Fatalf("job %s ended %s (%s), want %s: %s", id, j.Job.State, j.Job.Reason, want, j)
			}
			return fmt.Errorf("%s", j)
		}
		return nil
	})
	return last
}

// ---- jobs that report their PID and wait for a release file ----

// jobDir is a directory a job writes to (through env SYSDIR): pid-<attempt>
// (the shell's PID, which is also its process group), node-<attempt>,
// run-<attempt>-<node>-<pid> for every execution; the job ends when the file
// "release" appears.
type jobDir string

const waitScript = `echo $$ > "$SYSDIR/pid-$FOREMAN_ATTEMPT.tmp" && mv "$SYSDIR/pid-$FOREMAN_ATTEMPT.tmp" "$SYSDIR/pid-$FOREMAN_ATTEMPT"
echo "$FOREMAN_NODE" > "$SYSDIR/node-$FOREMAN_ATTEMPT"
touch "$SYSDIR/run-$FOREMAN_ATTEMPT-$FOREMAN_NODE-$$"
while [ ! -e "$SYSDIR/release" ]; do sleep 0.2; done
echo released`

func newJobDir(t testing.TB, root string) jobDir {
	t.Helper()
	d := filepath.Join(root, fmt.Sprintf("job-%d", submitSeq.Add(1)))
	if err := os.MkdirAll(d, 0o777); err != nil {
		t.Fatal(err)
	}
	return jobDir(d)
}

// waitingJob is a process-driver job spec that runs until d.release().
func (d jobDir) waitingJob(name string, constraints ...string) map[string]any {
	spec := map[string]any{
		"name":    name,
		"command": []string{"/bin/sh", "-c", waitScript},
		"env":     map[string]string{"SYSDIR": string(d), "PATH": "/usr/local/bin:/usr/bin:/bin"},
		"driver":  "process",
	}
	if len(constraints) > 0 {
		spec["constraints"] = constraints
	}
	return spec
}

func (d jobDir) release(t testing.TB) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(string(d), "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// pid waits for attempt n's PID file.
func (d jobDir) pid(t testing.TB, n int) int {
	t.Helper()
	var pid int
	eventually(t, systemTimeout, fmt.Sprintf("attempt %d writes its PID", n), func() error {
		b, err := os.ReadFile(filepath.Join(string(d), fmt.Sprintf("pid-%d", n)))
		if err != nil {
			return err
		}
		_, err = fmt.Sscan(string(b), &pid)
		return err
	})
	return pid
}

// runs lists the executions recorded for attempt n (node-pid strings).
func (d jobDir) runs(n int) []string {
	m, _ := filepath.Glob(filepath.Join(string(d), fmt.Sprintf("run-%d-*", n)))
	sort.Strings(m)
	for i := range m {
		m[i] = strings.TrimPrefix(filepath.Base(m[i]), fmt.Sprintf("run-%d-", n))
	}
	return m
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// killStrays SIGKILLs every process whose command line or environment
// mentions root: the detached supervisors and jobs our agents started.
// Processes are killed one by one, by PID.
func killStrays(root string) {
	self := os.Getpid()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil || pid == self {
			continue
		}
		cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if bytes.Contains(cl, []byte(root)) || bytes.Contains(env, []byte(root)) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// ---- clusters ----

var (
	clusterSeq atomic.Int64
	mypid      = os.Getpid()
)

// subnet returns a fresh 127.X.Y prefix for one cluster.
func subnet() string {
	n := clusterSeq.Add(1)
	pid := os.Getpid()
	return fmt.Sprintf("127.%d.%d", 64+pid%160, (int(n)+pid/160)%250+1)
}

type sysCluster struct {
	t      testing.TB
	bin    string
	root   string
	agents []*agentProc
}

// newSysCluster starts n agents with --bootstrap-expect n on 127.X.Y.1..n,
// each labelled sysnode=<name>, and waits until they agree on a leader and
// every node is registered alive.
func newSysCluster(t testing.TB, n int, extra ...string) *sysCluster {
	t.Helper()
	return newSysClusterNamed(t, n, "n", extra...)
}

// newSysClusterNamed is newSysCluster with nodes named prefix1..prefixN.
func newSysClusterNamed(t testing.TB, n int, prefix string, extra ...string) *sysCluster {
	t.Helper()
	return newSysClusterOf(t, foremanBin(t), n, prefix, extra...)
}

// newSysClusterOf is newSysClusterNamed running the binary bin (an older
// release, for the upgrade test).
func newSysClusterOf(t testing.TB, bin string, n int, prefix string, extra ...string) *sysCluster {
	t.Helper()
	root, err := os.MkdirTemp("", "foreman-systest-")
	if err != nil {
		t.Fatal(err)
	}
	// Traversable by others (not listable): a test's agent may run jobs as
	// nobody, which must reach its attempt dir under the agents' data dirs.
	if err := os.Chmod(root, 0o711); err != nil {
		t.Fatal(err)
	}
	c := &sysCluster{t: t, bin: bin, root: root}
	// Registered first, so it runs last: after the agents are gone, reap the
	// supervisors and jobs they left (detached by design), then the files.
	t.Cleanup(func() {
		killStrays(root)
		if keep := os.Getenv("FOREMAN_SYSTEST_KEEP"); keep == "always" || keep != "" && t.Failed() {
			// Debugging a failure (or any run, with "always"): the agents'
			// whole logs and every attempt dir (supervisor.log,
			// result.json) stay for reading.
			t.Logf("FOREMAN_SYSTEST_KEEP: the cluster's files stay in %s", root)
			return
		}
		_ = poll(10*time.Second, func() error {
			if err := os.RemoveAll(root); err != nil {
				killStrays(root)
				return err
			}
			return nil
		})
	})
	net24 := subnet()
	var ips []string
	for i := 1; i <= n; i++ {
		ips = append(ips, fmt.Sprintf("%s.%d", net24, i))
	}
	base := freeBaseOn(t, ips...)
	for i, ip := range ips {
		name := fmt.Sprintf("%s%d", prefix, i+1)
		args := append([]string{"--bootstrap-expect", fmt.Sprint(n), "--label", "sysnode=" + name,
			"--default-driver", "process"}, extra...)
		if lvl := os.Getenv("FOREMAN_SYSTEST_LOG_LEVEL"); lvl != "" { // debugging: e.g. debug
			args = append(args, "--log-level", lvl)
		}
		if i > 0 {
			args = append(args, "--join", net.JoinHostPort(ips[0], fmt.Sprint(base)))
		}
		c.agents = append(c.agents, startAgentAt(t, bin, name, filepath.Join(root, name, "data"), ip, base, args...))
	}
	c.leader()
	eventually(t, systemTimeout, fmt.Sprintf("%d nodes registered alive", n), func() error {
		var nodes struct {
			Nodes []struct {
				Name   string `json:"name"`
				Gossip string `json:"gossip"`
			} `json:"nodes"`
		}
		if err := getJSON(c.agents[0].url("/v1/nodes?consistent=true"), &nodes); err != nil {
			return err
		}
		alive := 0
		for _, nd := range nodes.Nodes {
			if nd.Gossip == "alive" {
				alive++
			}
		}
		if alive != n {
			return fmt.Errorf("%d of %d alive: %+v", alive, n, nodes.Nodes)
		}
		return nil
	})
	return c
}

func (c *sysCluster) byName(name string) *agentProc {
	for _, a := range c.agents {
		if a.name == name {
			return a
		}
	}
	c.t.Fatalf("no agent %q", name)
	return nil
}

// others returns the running agents other than the given ones.
func (c *sysCluster) others(not ...*agentProc) []*agentProc {
	var out []*agentProc
next:
	for _, a := range c.agents {
		for _, x := range not {
			if a == x {
				continue next
			}
		}
		if a.running() {
			out = append(out, a)
		}
	}
	return out
}

// leader waits until every running agent names the same leader, and returns it.
func (c *sysCluster) leader() *agentProc {
	c.t.Helper()
	var name string
	eventually(c.t, systemTimeout, "every running agent agrees on a leader", func() error {
		name = ""
		for _, a := range c.others() {
			l, err := leaderOf(a)
			if err != nil {
				return err
			}
			if name != "" && l != name {
				return fmt.Errorf("%s says %s, another says %s", a.name, l, name)
			}
			name = l
		}
		for _, a := range c.others() {
			if a.name == name {
				return nil
			}
		}
		return fmt.Errorf("the agreed leader %q is not running", name)
	})
	return c.byName(name)
}

// followers returns the running agents that are not the leader.
func (c *sysCluster) followers() []*agentProc { return c.others(c.leader()) }

// waitConverged polls GET /v1/cluster/hash on the given agents until all
// report the same index; at the same index the hashes must be equal.
func (c *sysCluster) waitConverged(agents []*agentProc) (index uint64) {
	c.t.Helper()
	type hashView struct {
		Node  string `json:"node"`
		Index uint64 `json:"index"`
		Hash  string `json:"hash"`
	}
	eventually(c.t, systemTimeout, "state hashes converge", func() error {
		var hs []hashView
		for _, a := range agents {
			var h hashView
			if err := getJSON(a.url("/v1/cluster/hash"), &h); err != nil {
				return err
			}
			hs = append(hs, h)
		}
		for _, h := range hs[1:] {
			if h.Index != hs[0].Index {
				return fmt.Errorf("indexes differ: %+v", hs)
			}
			if h.Hash != hs[0].Hash {
				c.t.Fatalf("invariant 6: same index %d, different hashes: %+v", h.Index, hs)
			}
		}
		index = hs[0].Index
		return nil
	})
	return index
}

// ---- capabilities ----

// requireRoot fails under CI=true and skips loudly otherwise when the test
// cannot run here.
func requireCapability(t testing.TB, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true but this machine lacks %s: the test cannot run", what)
	}
	t.Skipf("SKIPPED (LOUDLY): this machine lacks %s; CI=true makes this a failure", what)
}

func haveIptables() error {
	if os.Geteuid() != 0 {
		return errors.New("not root")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return err
	}
	if out, err := exec.Command("iptables", "-w", "-L", "INPUT", "-n").CombinedOutput(); err != nil {
		return fmt.Errorf("iptables -L: %v %s", err, out)
	}
	return nil
}

// Live reports whether the attempt may still be executing.
func (a *attemptView) Live() bool { return a.State == "assigned" || a.State == "running" }
