package fsm

import (
	"slices"
	"strings"
)

// nodeCache memoizes the decoded node records for Tx.Nodes. The leader's
// scheduler and every submit's capacity check read all of them, and with
// thousands of clients (issue 23) decoding each record again on every read
// was most of the leader's CPU during a submit run, though node records
// change rarely. It is a versionedMemo (versioned.go) keyed by node name:
// while 5,000 clients attach, decoding every record on every plan was 45%
// of the leader's CPU, and patching the memo with the nodes written since
// its version removed it. The memo is sorted by name and never changed:
// readers get a copy of the slice and share the records' maps and slices.
type nodeCache = versionedMemo[[]Node]

// patchNodes is memo with the records of names as read now (get returns
// nil for a node that is gone), sorted by name like the bucket.
func patchNodes(memo []Node, names []string, get func(name string) (*Node, error)) ([]Node, error) {
	out := make([]Node, 0, len(memo)+len(names))
	i := 0
	for _, name := range names {
		for i < len(memo) && memo[i].Name < name {
			out = append(out, memo[i])
			i++
		}
		if i < len(memo) && memo[i].Name == name {
			i++ // replaced (or dropped) by what is read now
		}
		n, err := get(name)
		if err != nil {
			return nil, err
		}
		if n != nil {
			out = append(out, *n)
		}
	}
	return append(out, memo[i:]...), nil
}

// NodesVersion counts the committed batches that wrote a node record (or
// restored the state): a reader that watches one node's record re-reads
// it only when this moved.
func (f *FSM) NodesVersion() uint64 { return f.nodes.done.Load() }

// memoNode finds name in a memo (sorted by name, as the bucket's keys).
func memoNode(memo []Node, name string) (*Node, bool) {
	i, ok := slices.BinarySearchFunc(memo, name, func(n Node, name string) int { return strings.Compare(n.Name, name) })
	if !ok {
		return nil, false
	}
	return &memo[i], true
}
