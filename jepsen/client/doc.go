// Package client is the suite's own recording transport for the foreman
// REST API: it never retries (an indeterminate outcome is recorded as
// such, not resent) and classifies every outcome as ok, fail or info the
// way the checkers need. The requests and answers are package api's
// types, the same the CLI uses; only the transport is the suite's.
package client
