package jepsen

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/jepsen/checker"
	"github.com/foreman-sched/foreman/jepsen/client"
	"github.com/foreman-sched/foreman/jepsen/history"
	"github.com/foreman-sched/foreman/jepsen/nemesis"
	"github.com/foreman-sched/foreman/jepsen/netns"
	"github.com/foreman-sched/foreman/jepsen/report"
	"github.com/foreman-sched/foreman/jepsen/rig"
	"github.com/foreman-sched/foreman/jepsen/workload"
)

// Subnet is the private /24 used only on this suite's bridge.
const Subnet = "10.213.7"

// Scenario is one run: a cluster, a workload, one nemesis window.
type Scenario struct {
	Name    string
	Nemesis string
	Nodes   int
	Seed    uint64
	// Warmup, Fault and Recover are the before / during / after phases of
	// traffic; Drain bounds the final phase (liveness).
	Warmup, Fault, Recover, Drain time.Duration
	// Converge bounds the wait for equal state hashes after the drain.
	Converge time.Duration
	// Sleeps overrides the probe durations (seconds) of the workload.
	Sleeps []string
	// Workers overrides the number of client workers.
	Workers int
	// Workload is "submit" (the default: jobs, reads, the queue, execution
	// and run_at checkers), "cron" (schedules and the cron checkers) or
	// "dag" (workflows, invariant 4) or "gang" (gangs, preemption: the
	// gang-partial, gang-placements and preempted checkers) or "outputs"
	// (agents with an object store; jobs write artifacts and logs: the
	// submit checkers plus checker.Outputs) or "gpu" (jobs asking whole
	// GPUs on fake GPU hosts: the gpu checker).
	Workload string
	// ACL runs the agents with --acl; the harness bootstraps a management
	// token and every client sends it. The workload's clients send a
	// least-privilege token instead (submit in the default namespace; write
	// for the cron and DAG workloads), issued with the management token.
	ACL bool
	// TLS runs the agents with HTTPS, mutual TLS between them (raft and the
	// internal HTTP) and an encrypted gossip: a CA and one agent
	// certificate per node made with the certs package, and a gossip key.
	// Every client trusts the CA.
	TLS bool
	// Clients adds agents outside raft (--role client) beside the Nodes
	// servers; they run jobs like any node. The workload talks to the
	// servers only (a client serves no API).
	Clients int
	// StoreRetry is the agents' --object-store-retry with an object
	// store (0: 10m); shorter than a store-down window, uploads give up
	// and attempts end partial.
	StoreRetry time.Duration
}

// Defaults fills zero durations.
func (s Scenario) Defaults() Scenario {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&s.Warmup, 8*time.Second)
	def(&s.Fault, 15*time.Second)
	def(&s.Recover, 10*time.Second)
	def(&s.Drain, 90*time.Second)
	def(&s.Converge, 30*time.Second)
	if s.Nodes == 0 {
		s.Nodes = 3
	}
	return s
}

// Run executes one scenario and writes its artifacts to outDir. Cleanup
// (processes, namespaces, temp dir) happens before it returns, and again
// through cleanup if the caller's test panics midway.
func Run(bin, outDir string, sc Scenario, cleanup func(func())) report.Summary {
	sc = sc.Defaults()
	sum := report.Summary{Scenario: sc.Name, Nemesis: sc.Nemesis, Seed: sc.Seed, Nodes: sc.Nodes,
		FirstWriteAfterFault: -1, FirstWriteAfterHeal: -1}
	harness := func(format string, args ...any) { sum.Harness = append(sum.Harness, fmt.Sprintf(format, args...)) }
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		harness("results dir: %v", err)
		sum.Decide()
		return sum
	}
	nem, err := nemesis.ByName(sc.Nemesis)
	if err != nil {
		harness("%v", err)
		sum.Decide()
		return sum
	}
	unlock, err := netns.Lock(30 * time.Minute)
	if err != nil {
		harness("%v", err)
		sum.Decide()
		return sum
	}
	defer unlock()
	netns.Sweep()
	tmp, err := os.MkdirTemp("", "foreman-jepsen-")
	if err != nil {
		harness("temp dir: %v", err)
		sum.Decide()
		return sum
	}
	topo, err := netns.Setup(Subnet, sc.Nodes+sc.Clients)
	if err != nil {
		os.RemoveAll(tmp)
		harness("topology: %v", err)
		sum.Decide()
		return sum
	}
	c := rig.NewCluster(bin, tmp, topo, min(sc.Nodes, 3))
	c.MarkClients(sc.Nodes)
	if sc.ACL {
		c.ExtraFlags = append(c.ExtraFlags, "--acl")
	}
	if sc.Workload == "gang" {
		c.ExtraFlags = append(c.ExtraFlags, workload.GangAgentFlags...)
	}
	if sc.Workload == "outputs" || sc.Nemesis == "store-down" || sc.Nemesis == "store-down-kill" {
		// A real S3 server on the host side of the bridge: every
		// namespace routes to the bridge's address.
		bin, err := rig.WeedBinary()
		if err != nil {
			topo.Teardown()
			os.RemoveAll(tmp)
			harness("object store: %v", err)
			sum.Decide()
			return sum
		}
		c.Store = &rig.Store{Bin: bin, Dir: filepath.Join(tmp, "store"), IP: topo.HostIP(), Bucket: "foreman-jepsen", Retry: sc.StoreRetry}
		if err := c.Store.Start(90 * time.Second); err != nil {
			c.Store.Stop()
			topo.Teardown()
			os.RemoveAll(tmp)
			harness("object store: %v", err)
			sum.Decide()
			return sum
		}
		c.ExtraFlags = append(c.ExtraFlags, c.Store.AgentFlags()...)
		c.Env = append(c.Env, c.Store.Env()...)
	}
	if sc.Workload == "gpu" {
		c.GPUs = workload.GPUsPerNode
	}
	if sc.TLS {
		if err := c.EnableTLS(); err != nil {
			topo.Teardown()
			os.RemoveAll(tmp)
			harness("TLS material: %v", err)
			sum.Decide()
			return sum
		}
	}
	var once sync.Once
	teardown := func() {
		once.Do(func() {
			c.Shutdown()
			if c.Store != nil {
				c.Store.Stop()
				copyFile(filepath.Join(c.Store.Dir, "weed.log"), filepath.Join(outDir, "weed.log"))
			}
			topo.Teardown()
			saveArtifacts(tmp, outDir)
			if os.Getenv("FOREMAN_JEPSEN_KEEP") != "" {
				// For a post-mortem: the nodes' raft logs and state files.
				fmt.Fprintf(os.Stderr, "jepsen: kept %s (FOREMAN_JEPSEN_KEEP)\n", tmp)
				return
			}
			os.RemoveAll(tmp)
		})
	}
	cleanup(teardown)
	defer teardown()

	if err := topo.Ping(); err != nil {
		harness("connectivity: %v", err)
		sum.Decide()
		return sum
	}
	ctx := context.Background()
	recDir := filepath.Join(tmp, "records")
	_ = os.MkdirAll(recDir, 0o777)
	if err := c.Start(); err != nil {
		harness("start: %v", err)
		sum.Decide()
		return sum
	}
	workloadToken := ""
	if sc.ACL {
		if err := c.BootstrapACL(ctx, 60*time.Second); err != nil {
			harness("%v", err)
			sum.Decide()
			return sum
		}
		if err := c.StartClients(ctx, 30*time.Second); err != nil {
			harness("clients: %v", err)
			sum.Decide()
			return sum
		}
		role := api.ACLRole{Role: "submit", Namespace: "default"}
		if sc.Workload == "cron" || sc.Workload == "dag" {
			role.Role = "write"
		}
		tok, err := c.IssueToken(ctx, 30*time.Second, "jepsen-workload", role)
		if err != nil {
			harness("%v", err)
			sum.Decide()
			return sum
		}
		workloadToken = tok
	}
	if _, err := c.WaitLeader(ctx, 60*time.Second); err != nil {
		harness("bootstrap: %v", err)
		sum.Decide()
		return sum
	}
	if err := c.WaitReady(ctx, 30*time.Second); err != nil {
		harness("ready: %v", err)
	}

	rec := history.NewRecorder()
	env := &workload.Env{Rec: rec, Dir: recDir, Seed: sc.Seed}
	for _, i := range c.Servers() { // the servers come first: env's indices are the nodes'
		env.Clients = append(env.Clients, c.WorkloadClient(i, workloadToken))
	}
	env.SetAlive(func(i int) bool { return i < len(c.Nodes) && c.Nodes[i].Running() })
	if c.Store != nil {
		mc, err := c.Store.Client()
		if err != nil {
			harness("object store client: %v", err)
		}
		env.Store, env.Bucket = mc, c.Store.Bucket
		servers := c.Servers()
		env.Kill = func(i int) error { return c.Nodes[servers[i]].Kill9() }
	}
	var wl workload.Workload
	switch sc.Workload {
	case "cron":
		wl = workload.NewCron()
	case "gang":
		wl = workload.NewGang(sc.Nodes)
	case "outputs":
		o := workload.NewOutputs()
		o.WantPartial = sc.StoreRetry > 0 && sc.Nemesis == "store-down"
		wl = o
	case "gpu":
		g := workload.NewGPU(c.GPUUUIDs)
		g.DeviceMiB = rig.GPUMemoryMiB
		wl = g
	case "dag":
		d := workload.NewDAG()
		if sc.Workers > 0 {
			d.Workers = sc.Workers
		}
		wl = d
	default:
		s := workload.NewSubmit()
		if len(sc.Sleeps) > 0 {
			s.Sleeps = sc.Sleeps
		}
		if sc.Workers > 0 {
			s.Workers = sc.Workers
		}
		wl = s
	}

	pollCtx, stopPoll := context.WithCancel(ctx)
	samples := pollLeaders(pollCtx, c, rec)

	wctx, stopTraffic := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); wl.Run(wctx, env) }()

	rng := rand.New(rand.NewPCG(sc.Seed, 7))
	time.Sleep(sc.Warmup)
	faultStart := rec.Now()
	info, err := nem.Start(ctx, c, rng)
	if err != nil {
		harness("nemesis start: %v", err)
	}
	sum.Fault = info
	time.Sleep(sc.Fault)
	if err := nem.Stop(ctx, c); err != nil {
		harness("nemesis stop: %v", err)
	}
	healAt := rec.Now()
	rec.AddEvent(history.Event{Name: nem.Name(), Start: faultStart, End: healAt, Info: info})
	time.Sleep(sc.Recover)
	trafficEnd := rec.Now()
	stopTraffic()
	wg.Wait()

	// Belt and braces: whatever the nemesis did, the final phase runs
	// fully healed (no grudges, nobody paused).
	_ = topo.Heal()
	for _, n := range c.Nodes {
		_ = n.Resume()
	}
	if _, ok := nem.(nemesis.Skewer); ok {
		for _, n := range c.Nodes {
			if n.Running() {
				_ = n.SetClock(0)
			}
		}
	}
	drainStart := time.Now()
	if err := wl.Drain(ctx, env, sc.Drain); err != nil {
		harness("%v", err)
	}
	sum.DrainTime = time.Since(drainStart)
	conv, applied := converge(ctx, c, sc.Converge)
	stopPoll()
	leaderSamples := <-samples

	opts := workload.CheckOptions{ClockBound: time.Millisecond, HTMLPath: filepath.Join(outDir, "history.html"),
		Events: rec.Events(), Timeout: time.Minute, NoReruns: sc.Nemesis == "down-client"}
	if sk, ok := nem.(nemesis.Skewer); ok {
		opts.ClockAhead, sum.ClockBehind = sk.Skew()
		sum.ClockAhead = opts.ClockAhead
	}
	if lg, ok := nem.(nemesis.Logger); ok {
		sum.FaultLog = lg.Log()
	}
	sum.Results = append(wl.Check(env, opts), conv, logMatching(c, applied))
	ops := rec.Ops()
	sum.Windows = report.Windows(ops, faultStart, healAt, trafficEnd)
	sum.FirstWriteAfterFault = report.FirstWrite(ops, faultStart)
	sum.FirstWriteAfterHeal = report.FirstWrite(ops, healAt)
	sum.Elections, sum.LeaderChanges = report.Elections(leaderSamples)
	q := map[string]int{}
	for _, r := range sum.Results {
		if r.Name == "submit-queue" {
			q = r.Stats
		}
	}
	sum.Attempted, sum.Acknowledged, sum.Lost, sum.Duplicated, sum.Recovered, sum.Stuck =
		q["attempted"], q["acknowledged"], q["lost"], q["duplicated"], q["recovered"], q["stuck"]
	sum.Indeterminate = indeterminate(ops)
	for _, cl := range env.Clients {
		cl.Close()
	}
	sum.Decide()
	_ = rec.WriteJSONL(filepath.Join(outDir, "history.jsonl"))
	_ = sum.WriteJSON(filepath.Join(outDir, "summary.json"))
	return sum
}

// indeterminate counts keys whose every submit was info.
func indeterminate(ops []history.Op) int {
	resolved, seen := map[string]bool{}, map[string]bool{}
	for _, op := range ops {
		if op.Kind == history.Submit {
			seen[op.Key] = true
			if op.Outcome != history.Info {
				resolved[op.Key] = true
			}
		}
	}
	return len(seen) - len(resolved)
}

// pollLeaders samples every node's raft view twice a second until ctx ends.
func pollLeaders(ctx context.Context, c *rig.Cluster, rec *history.Recorder) <-chan []report.LeaderSample {
	out := make(chan []report.LeaderSample, 1)
	go func() {
		var samples []report.LeaderSample
		clients := map[int]*client.Client{}
		defer func() {
			for _, cl := range clients {
				cl.Close()
			}
			out <- samples
		}()
		for tick := 0; tick < 100000; tick++ {
			for i, n := range c.Nodes {
				if !n.Running() || n.Client {
					continue
				}
				if clients[i] == nil {
					clients[i] = client.NewTLS(n.Name, n.URL(), time.Second, c.ClientTLS())
					clients[i].Token = c.Token
				}
				ri, err := clients[i].Raft(ctx)
				if err == nil {
					samples = append(samples, report.LeaderSample{At: rec.Now(), Node: n.Name, Leader: ri.Leader, Term: ri.Term})
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return out
}

// converge polls every running node's state hash until all agree; it
// also returns the last hashes (each with its node's applied index).
func converge(ctx context.Context, c *rig.Cluster, d time.Duration) (checker.Result, []checker.NodeHash) {
	deadline := time.Now().Add(d)
	var last []checker.NodeHash
	polls := 0
	for {
		polls++
		last = last[:0]
		for i, n := range c.Nodes {
			if !n.Running() || n.Client { // a client holds no state to hash
				continue
			}
			cl := c.Client(i)
			last = append(last, cl.Hash(ctx))
			cl.Close()
		}
		if checker.Converged(last) || time.Now().After(deadline) {
			return checker.Convergence(last, polls), last
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// logMatching stops the servers and compares their raft logs up to what
// each had applied when the convergence check last asked (a server that
// did not answer it is left out).
func logMatching(c *rig.Cluster, applied []checker.NodeHash) checker.Result {
	at := map[string]uint64{}
	for _, h := range applied {
		if h.Err == "" {
			at[h.Node] = h.Index
		}
	}
	var logs []checker.NodeLog
	var unread []string
	for _, n := range c.Nodes {
		idx, ok := at[n.Name]
		if n.Client || !ok {
			continue
		}
		_ = n.Stop(5 * time.Second)
		nl, err := readNodeLog(n.Name, n.DataDir, idx)
		if err != nil {
			unread = append(unread, fmt.Sprintf("%s: %v", n.Name, err))
			continue
		}
		logs = append(logs, nl)
	}
	r := checker.LogMatching(logs)
	for _, u := range unread {
		r.Notes = append(r.Notes, "log not read: "+u)
	}
	return r
}

// readNodeLog reads a stopped server's raft log up to applied.
func readNodeLog(name, dataDir string, applied uint64) (checker.NodeLog, error) {
	nl := checker.NodeLog{Node: name, Applied: applied, Entries: map[uint64]checker.LogEntry{}}
	err := cluster.ReadLog(dataDir, 0, applied, func(l *raft.Log) error {
		h := sha256.New()
		h.Write([]byte{byte(l.Type)})
		h.Write(l.Data)
		e := checker.LogEntry{Term: l.Term, Desc: l.Type.String()}
		h.Sum(e.Sum[:0])
		if cmd, err := fsm.DecodeCommand(l.Data); l.Type == raft.LogCommand && err == nil {
			e.Desc = fmt.Sprintf("%s at %s", cmd.Type, cmd.At.Format("15:04:05.000"))
		}
		nl.Entries[l.Index] = e
		return nil
	})
	return nl, err
}

// saveArtifacts copies node logs and probe records into the results.
func saveArtifacts(tmp, out string) {
	for _, glob := range []string{"logs/*.log", "records/*.log"} {
		paths, _ := filepath.Glob(filepath.Join(tmp, glob))
		for _, p := range paths {
			dst := filepath.Join(out, filepath.Base(filepath.Dir(p))+"-"+filepath.Base(p))
			copyFile(p, dst)
		}
	}
}

func copyFile(src, dst string) {
	in, err := os.Open(src)
	if err != nil {
		return
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return
	}
	defer out.Close()
	_, _ = io.Copy(out, in)
}
