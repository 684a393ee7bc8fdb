// Package bench is `foreman bench`: the benchmark client that measures a
// running cluster (submit throughput, latencies, DAG release, cron, gangs,
// the event stream, many simulated nodes) through package api, the public
// Go client, the same way a user's program would.
package bench
