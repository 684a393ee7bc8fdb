// Package bench is `foreman bench`: the benchmark client of a running
// cluster.
//
// It measures submit throughput, latencies, DAG release, cron, gangs, the
// event stream and many simulated nodes through package api, the public Go
// client, the same way a user's program would.
package bench
