// Package history records client operations and nemesis events with
// monotonic timestamps from one base, the input of every checker.
package history
