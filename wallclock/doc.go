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

// EnvFile names the offset file of a process (only read with the hook).
// The file holds "<seq> <offset-ns>"; on SIGUSR2 the process reads it,
// applies the offset and writes the same line to <file>.ack, which the
// nemesis waits for; it also writes an ack at start, which tells the
// nemesis the hook is there. The variable is removed from the environment
// at start, so only the process it was given to (the agent, not its
// supervisors or jobs) obeys.
const EnvFile = "FOREMAN_JEPSEN_CLOCK"
