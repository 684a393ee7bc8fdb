// Package checker holds the pure checkers of the suite. Each takes recorded
// data (client history, execution records, the cluster's final view) and
// returns a Result; none talks to the network, so all are unit-tested on
// synthetic histories.
package checker
