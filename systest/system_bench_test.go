package systest

import (
	"fmt"
	"sort"
	"testing"
	"time"
)

// Failover numbers on real agents. Each iteration builds a fresh 3-agent
// cluster (not timed); run with -benchtime 5x for five samples:
//
//	FOREMAN_BIN=bin/foreman go test -run '^$' -bench 'NodeKilled|LeaderKilled' -benchtime 5x ./systest/
//
// The metrics are seconds: median and max over the iterations of this run.

func reportSeconds(b *testing.B, samples []time.Duration, what string) {
	if len(samples) == 0 {
		return
	}
	s := append([]time.Duration(nil), samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	b.ReportMetric(med.Seconds(), what+"-median-s")
	b.ReportMetric(s[len(s)-1].Seconds(), what+"-max-s")
	b.ReportMetric(0, "ns/op") // wall time per op includes cluster set-up; meaningless here
	b.Logf("%s over %d runs: %v (median %.2fs)", what, len(s), s, med.Seconds())
}

// BenchmarkNodeKilledToRunningElsewhere: kill -9 the agent of a follower
// running a job; time until the job is reported running on another node.
func BenchmarkNodeKilledToRunningElsewhere(b *testing.B) {
	var samples []time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		samples = append(samples, nodeKilledOnce(b))
	}
	reportSeconds(b, samples, "rerun")
}

func nodeKilledOnce(b *testing.B) time.Duration {
	var took time.Duration
	// A sub-test context so each cluster's cleanups run at the end of its iteration.
	runIsolated(b, func(t testing.TB) {
		c := newSysCluster(t, 3)
		d := newJobDir(t, c.root)
		leader := c.leader()
		id := submitJob(t, leader, d.waitingJob("long", "sysnode != "+leader.name))
		j := waitJobState(t, leader, id, "running")
		victim := c.byName(j.attempt(1).Node)
		killed := time.Now()
		victim.kill9()
		_, took = runningElsewhere(t, leader, id, victim.name, killed)
	})
	return took
}

// BenchmarkLeaderKilledToNextPlacement: kill -9 the leader, then submit a job
// through a survivor (retrying with one idempotency key while there is no
// leader); time from the kill until the job has an attempt placed, and until
// it runs.
func BenchmarkLeaderKilledToNextPlacement(b *testing.B) {
	var placed, running []time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		runIsolated(b, func(t testing.TB) {
			c := newSysCluster(t, 3)
			leader := c.leader()
			survivor := c.others(leader)[0]
			d := newJobDir(t, c.root)
			killed := time.Now()
			leader.kill9()
			id := submitJob(t, survivor, d.waitingJob("after-failover"))
			var p time.Duration
			eventually(t, systemTimeout, "the job placed", func() error {
				j, err := getJob(survivor, id)
				if err != nil {
					return err
				}
				if l := j.latest(); l == nil {
					return fmt.Errorf("%s", j)
				}
				p = time.Since(killed)
				return nil
			})
			waitJobState(t, survivor, id, "running")
			placed = append(placed, p)
			running = append(running, time.Since(killed))
			d.release(t)
		})
	}
	reportSeconds(b, placed, "placed")
	reportSeconds(b, running, "running")
}

// runIsolated runs f with its own cleanup scope, so each iteration's
// cluster is torn down before the next one starts (b.Cleanup would keep
// every cluster alive until the benchmark ends).
func runIsolated(b *testing.B, f func(t testing.TB)) {
	b.Helper()
	s := &scopedTB{TB: b}
	defer s.done() // also on Fatal (runtime.Goexit runs deferred calls)
	f(s)
}

type scopedTB struct {
	testing.TB
	cleanups []func()
}

func (s *scopedTB) Cleanup(f func()) { s.cleanups = append(s.cleanups, f) }

func (s *scopedTB) done() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
	s.cleanups = nil
}

// BenchmarkLeaderKilledToRunningElsewhere: the job runs on the leader, which
// is killed -9; time until the job runs on another node. The new leader has no
// contact history, so it waits lease + margin from taking office.
func BenchmarkLeaderKilledToRunningElsewhere(b *testing.B) {
	var samples []time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		runIsolated(b, func(t testing.TB) {
			c := newSysCluster(t, 3)
			d := newJobDir(t, c.root)
			leader := c.leader()
			for _, f := range c.followers() {
				setEligibility(t, leader, f.name, "ineligible")
			}
			id := submitJob(t, leader, d.waitingJob("long"))
			waitJobState(t, leader, id, "running")
			for _, f := range c.followers() {
				setEligibility(t, leader, f.name, "eligible")
			}
			survivor := c.others(leader)[0]
			killed := time.Now()
			leader.kill9()
			_, took := runningElsewhere(t, survivor, id, leader.name, killed)
			samples = append(samples, took)
		})
	}
	reportSeconds(b, samples, "rerun")
}
