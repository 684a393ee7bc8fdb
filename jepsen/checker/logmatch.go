package checker

import "fmt"

// NodeLog is one server's raft log as it was left when the run ended: its
// entries by index, and the index its state machine had applied.
type NodeLog struct {
	Node    string
	Applied uint64
	Entries map[uint64]LogEntry
}

// LogEntry is what identifies an entry's content: its term and a digest of
// its type and data, with a short description for the report.
type LogEntry struct {
	Term uint64
	Sum  [32]byte
	Desc string
}

// LogMatching checks raft's log matching property directly: any two
// servers hold the same entries up to the lower of their applied indexes
// (everything applied was committed). The convergence checker compares
// the states those entries built, which two different logs could still
// reach by chance; a resumed leader that wrote its own entry with its
// successor's term (hashicorp/raft#695) broke this.
func LogMatching(logs []NodeLog) Result {
	r := Result{Name: "log-matching", Valid: true, Stats: map[string]int{"nodes": len(logs)}}
	compared := 0
	for i := range logs {
		for j := i + 1; j < len(logs); j++ {
			a, b := logs[i], logs[j]
			upTo := min(a.Applied, b.Applied)
			for idx := uint64(1); idx <= upTo; idx++ {
				ea, oka := a.Entries[idx]
				eb, okb := b.Entries[idx]
				if !oka || !okb {
					continue // compacted into a snapshot on one of them
				}
				compared++
				if ea.Term != eb.Term || ea.Sum != eb.Sum {
					r.errorf("index %d: %s has t%d %s, %s has t%d %s", idx, a.Node, ea.Term, ea.Desc, b.Node, eb.Term, eb.Desc)
				}
			}
		}
	}
	r.Stats["entries_compared"] = compared
	if len(logs) < 2 {
		r.notef("%s", fmt.Sprintf("%d server log(s) readable: nothing to compare", len(logs)))
	}
	return r
}
