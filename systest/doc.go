// Package systest holds the system tests: each runs the real foreman binary
// ($FOREMAN_BIN, or one it builds) as separate agent processes on loopback or
// in network namespaces, and drives them through the CLI, the REST API and
// the UI as a user would. They run from the repository root (TestMain).
package systest
