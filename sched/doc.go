// Package sched decides where and when attempts run. It has two layers:
//
//   - Plan, a pure function of a Snapshot of the replicated state and a
//     time "now", returning the fsm commands to apply (releases of due
//     retries and run_at jobs, placements, unplaceable reasons, deadline
//     failures, lost attempts, drain stops) and the next time anything
//     timed becomes due. It reads no clock, no raft and no randomness, so
//     tests feed it synthetic snapshots and assert on the commands.
//   - Scheduler, the leader loop: it waits on the fsm's watch signal and a
//     single timer set to the plan's next wake-up, loads a Snapshot, calls
//     Plan and applies the commands through raft. It keeps no state that
//     must survive a failover: a new leader rebuilds everything from the
//     fsm, and Apply's state checks make a repeated command harmless.
//
// Wiring (main): sched.New(cfg, sched.Deps{Raft: clusterNode, State: fsm}, logger),
// then clusterNode.OnLeadership(func(ctx context.Context) { s.Run(ctx) }).
//
// See DESIGN.md for the reasons behind scoring, aging and lost detection.
package sched
