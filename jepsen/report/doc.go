// Package report turns a scenario's history into the numbers the summary
// shows (counts, availability windows, recovery times, elections) and
// writes summary.json files and a markdown table across scenarios.
package report
