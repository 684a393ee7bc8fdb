// Package client is the suite's own small HTTP client for the foreman REST
// API. It is deliberately decoupled from httpapi.Client so the suite tests
// the wire contract, and it classifies every outcome as ok, fail or info
// (indeterminate) the way the checkers need.
package client
