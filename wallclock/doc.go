// Package wallclock is the agent's wall clock: the readings the leader
// stamps into raft commands (Command.At) and compares with run_at,
// deadlines and retry times. Durations (leases, LastHeardFrom, timeouts)
// do not come from here: they use the monotonic clock directly.
//
// A normal build is plain time.Now. A build with -tags jepsenclock adds an
// offset the jepsen clock nemesis sets at runtime, shifting the wall
// reading only and keeping the monotonic one, as on a host whose clock is
// wrong: see now_jepsenclock.go.
package wallclock
