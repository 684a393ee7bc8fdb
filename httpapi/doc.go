// Package httpapi is foreman's REST API under /v1/: the handlers, the
// event stream, log and artifact proxying between nodes, auth and metrics,
// and the API's OpenAPI description (openapi.yaml). Its Go client is
// package api, which the CLI, foreman bench and the tests use; this
// package holds none.
//
// The handler reads from the local state machine and sends every change
// through the Cluster interface, so the package imports only fsm types and
// the small interfaces it declares (deps.go); main adapts cluster, exec and
// fsm to them. Writes that reach a follower are proxied to the leader's
// HTTP address, so the handlers that stamp IDs and times (submit, drain) run
// only on the leader. Logs stay on the node that ran the attempt; any node
// proxies them from there.
//
// Concurrent submits on the leader share raft entries (group commit,
// groupcommit.go): one fsm.CmdSubmitGroup entry carries many requests, each
// with its own outcome, so the per-entry costs (log write, replication,
// fsync on every voter, apply transaction) are paid once per group.
//
// Every error leaves through one function (statusFor in errors.go) that maps
// sentinel errors to HTTP status codes and the JSON body
// {"error": "...", "code": "..."}. See docs/api.md for the wire contract.
package httpapi
