// Package workload generates recorded traffic against a cluster and, after
// the final heal, drains it and collects the final view the checkers need.
// New workloads (cron exactly-once per tick, DAG order) implement Workload.
package workload
