package systest

import (
	"testing"
	"time"
)

// BenchmarkNodeLostRerun measures the "dead node → rerun elsewhere" budget
// (DESIGN.md: ~15 s; cluster/DESIGN.md "Timings" breaks it down) on three
// real agents: a job runs off the leader, its node's agent is killed -9,
// and the clock runs until the job runs on another node. Each iteration is
// a fresh cluster. Reported: rerun-s (kill → replacement running),
// node-dead-s (kill → the node dead in the leader's state) and copy-gone-s
// (kill → the orphaned copy killed by its supervisor). make bench runs it;
// TestSystemNodeKilled asserts the ordering, not the speed.
func BenchmarkNodeLostRerun(b *testing.B) {
	var rerun, dead, gone time.Duration
	for range b.N {
		b.StopTimer()
		o := runOffLeader(b, newSysCluster(b, 3))
		d, id, leader, victim, pid := o.d, o.id, o.leader, o.victim, o.pid
		b.StartTimer()

		killed := time.Now()
		victim.kill9()
		nodeDead := watchNodeDead(b, leader, victim.name, killed)
		gone += waitDead(b, pid, killed)
		_, took := runningElsewhere(b, leader, id, victim.name, killed)
		rerun += took
		dead += nodeDead()

		b.StopTimer()
		d.release(b)
		waitJobState(b, leader, id, "succeeded")
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(rerun.Seconds()/n, "rerun-s")
	b.ReportMetric(dead.Seconds()/n, "node-dead-s")
	b.ReportMetric(gone.Seconds()/n, "copy-gone-s")
}
