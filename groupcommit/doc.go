// Package groupcommit merges concurrent requests into shared raft entries.
//
// Every raft entry costs a log write, a replication round, an fsync on
// every voter, a decode and an apply on every node, whatever it carries;
// with many clients those per-entry costs, not the requests, set the
// price. A Queue commits at most a fixed number of groups at once: a
// request that finds a slot free goes at once (alone: no added latency on
// an idle server), the others queue, and when a group returns its runner
// takes everything queued (up to a size bound) as the next group. So
// groups grow exactly as much as the load makes requests wait anyway,
// without a timer.
//
// What a group is and how its members get their outcomes is the caller's:
// the submits' group commit (httpapi) and the clients' reports
// (cluster). Its own package because both use it and neither may import
// the other; it imports only the standard library.
package groupcommit
