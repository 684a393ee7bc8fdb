// Package fsm is foreman's replicated state machine: the cluster's state
// and the only code that changes it.
//
// It holds the command types the leader puts into the raft log, the bbolt
// schema that holds jobs, attempts, nodes, queues and idempotency keys,
// the deterministic Apply that turns committed entries into state, raft
// snapshots of that state, and the read views (View, ListJobs, Watch,
// Subscribe) every other package uses.
//
// Apply never reads the clock, randomness or map order: Command.At is
// "now" and IDs come stamped in the commands. A batch of entries is one
// bbolt transaction that also records the applied index, so after a crash
// the file is either before or after the whole batch. See DESIGN.md.
package fsm
