// Package jepsen is foreman's fault-injection suite: it runs real agents in
// network namespaces (or an in-process cluster), drives a recording workload
// while a nemesis injects partitions, crashes and pauses, then checks the
// invariants of DESIGN.md against the recorded history.
//
// Layout: history (recorded ops), client (a small decoupled HTTP client),
// netns (bridge + namespaces + iptables), rig (agent processes), nemesis
// (faults), workload (traffic + final drain), checker (pure checkers),
// report (metrics windows and summaries). This package holds the scenarios
// and the entry tests; see README.md.
package jepsen
