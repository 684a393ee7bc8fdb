// Package cli is foreman's command line.
//
// It holds the App, the client commands (one file per command group, each
// a user of package api, the public Go client), their output helpers, and
// the argument normalisation that lets flags follow positional arguments.
// The agent's wiring (cli/agent) and the bench client (cli/bench) are
// commands built in their own packages; main.go hands them to NewApp.
package cli
