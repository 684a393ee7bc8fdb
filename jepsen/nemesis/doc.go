// Package nemesis injects the faults of a scenario into a rig.Cluster.
//
// The faults: iptables grudges (halves, isolate the leader, majorities ring, bridge),
// kill -9 and restart from the same data dir, SIGSTOP/SIGCONT by PID, a
// membership change (a node leaves, a new one joins) and wall-clock skew
// through the agent's test-build clock hook. The grudge shapes are
// pure functions, computed as Jepsen's jepsen.nemesis does.
package nemesis
