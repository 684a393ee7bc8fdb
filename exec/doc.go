// Package exec runs attempts on this node.
//
// The agent's Worker learns from the replicated state which attempts are
// assigned here and starts, for each, a detached supervisor process (the
// same binary, `foreman supervise --dir <attemptDir>`). The supervisor picks
// a Driver by name (process here; container in exec/container), starts the
// task, drains its output into size-capped log files, enforces the timeout
// and the lease, and writes result.json. The agent renews each lease over
// <attemptDir>/lease.sock only while it is in contact with the leader, so an
// attempt on a node cut off from the leader dies by itself before the leader
// may start a replacement (DESIGN.md, "Fencing by lease"). Because the
// supervisor outlives the agent, a restarted agent re-adopts running
// attempts and reports those that finished while it was down.
//
// ShimMain is the tiny PID 1 the container driver runs in front of the job
// so that the kill signal reaches it.
//
// See exec/DESIGN.md for the lease timing.
package exec
