package clustertest

import (
	"net"
	"strconv"
	"sync"
)

// fabric is the in-process network: which node owns which port, and which
// nodes may talk. A node always reaches itself.
type fabric struct {
	mu     sync.RWMutex
	owner  map[int]int // port → node index
	groups map[int]int // node index → partition group; nil = fully connected
}

func newFabric() *fabric { return &fabric{owner: map[int]int{}} }

func (f *fabric) register(idx, base int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for p := base; p < base+3; p++ {
		f.owner[p] = idx
	}
}

func (f *fabric) partition(groups [][]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.groups = map[int]int{}
	for g, members := range groups {
		for _, i := range members {
			f.groups[i] = g
		}
	}
}

func (f *fabric) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.groups = nil
}

func (f *fabric) reachable(from int, addr string) bool {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return true
	}
	port, _ := strconv.Atoi(p)
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.groups == nil {
		return true
	}
	to, ok := f.owner[port]
	if !ok || to == from {
		return true
	}
	gf, okf := f.groups[from]
	gt, okt := f.groups[to]
	if !okf || !okt {
		return false // a node left out of every group is isolated
	}
	return gf == gt
}

// view is one node's cluster.Network.
type view struct {
	f    *fabric
	from int
}

func (v view) Reachable(addr string) bool { return v.f.reachable(v.from, addr) }
