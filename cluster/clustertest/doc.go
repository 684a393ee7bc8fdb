// Package clustertest starts real foreman cluster nodes in one process for
// tests: real raft over loopback TCP, real memberlist on loopback, real
// bbolt state files in temporary directories. Partition and Heal cut and
// restore links through cluster.Config.Network; Kill and Restart simulate a
// crash and a restart from the same data directory.
//
//	c := clustertest.NewCluster(t, 3, clustertest.Options{})
//	leader := c.WaitForLeader()
//	c.Kill(leader.Index)
//	c.WaitForLeader()
package clustertest
