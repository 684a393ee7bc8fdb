package netns

import "sort"

// Grudge maps a node index to the node indices whose packets it drops.
type Grudge map[int][]int

// Apply installs INPUT DROP rules in each receiver's namespace, as Jepsen
// does. A complete (symmetric) grudge must list both directions.
func (t *Topology) Apply(g Grudge) error {
	keys := make([]int, 0, len(g))
	for k := range g {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	for _, dst := range keys {
		for _, src := range g[dst] {
			if err := run("ip", "netns", "exec", t.NS[dst], "iptables", "-w", "-A", "INPUT", "-s", t.IPs[src], "-j", "DROP"); err != nil {
				return err
			}
		}
	}
	return nil
}

// Heal flushes every namespace's filter rules.
func (t *Topology) Heal() error {
	var first error
	for _, ns := range t.NS {
		for _, c := range [][]string{{"-w", "-F"}, {"-w", "-X"}} {
			if err := run(append([]string{"ip", "netns", "exec", ns, "iptables"}, c...)...); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}
