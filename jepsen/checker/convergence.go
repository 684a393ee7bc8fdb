package checker

// NodeHash is one node's /v1/cluster/hash answer (Err set when unreachable).
type NodeHash struct {
	Node  string `json:"node"`
	Index uint64 `json:"index"`
	Hash  string `json:"hash"`
	Err   string `json:"err,omitempty"`
}

// Converged reports whether every node answered with one index and hash.
func Converged(hs []NodeHash) bool {
	if len(hs) == 0 {
		return false
	}
	for _, h := range hs {
		if h.Err != "" || h.Index != hs[0].Index || h.Hash != hs[0].Hash {
			return false
		}
	}
	return true
}

// Convergence turns the last poll of the hashes (taken at the deadline, or
// as soon as they agreed) into a result.
func Convergence(last []NodeHash, polls int) Result {
	r := Result{Name: "convergence", Valid: true, Stats: map[string]int{"nodes": len(last), "polls": polls}}
	if Converged(last) {
		return r
	}
	for _, h := range last {
		if h.Err != "" {
			r.errorf("node %s: %s", h.Node, h.Err)
		} else {
			r.errorf("node %s at index %d hash %s", h.Node, h.Index, h.Hash)
		}
	}
	if len(last) == 0 {
		r.errorf("no node answered")
	}
	return r
}
