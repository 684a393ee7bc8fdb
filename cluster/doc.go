// Package cluster turns one foreman agent into a member of a cluster.
//
// It runs hashicorp/raft over the fsm state machine (log and stable store in
// raft-boltdb, snapshots on disk, TCP transport), memberlist gossip for
// liveness and node self-descriptions, bootstrap and join, voter management,
// forwarding of writes from followers to the leader, and leadership signals
// for the scheduler and the executor's lease.
//
// The package owns no scheduling logic. The leader's reconcile loop only
// turns gossip into fsm.UpsertNode / fsm.SetNodeState commands and keeps the
// raft configuration at the configured number of voters.
//
// See DESIGN.md for why it is built this way and which timings it uses.
package cluster
