package sched

import (
	"sort"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// ShareReport is the fair-share view of the state at one time: what
// `foreman namespace shares` shows. Any server computes it from its
// replicated state with the planner's own functions, so it shows what
// the leader's next plan would order by (up to the placements still
// committing).
type ShareReport struct {
	// Enabled: some namespace sets a share, so plans order by it.
	Enabled  bool
	HalfLife time.Duration
	Capacity Alloc
	Rows     []ShareRow
}

// ShareRow is one namespace with a share, live or recent allocation.
type ShareRow struct {
	Namespace  string // display name
	Share      int64  // as set; 0: not set (counts as 1 while Enabled)
	Normalized float64
	Recent     Alloc // recent average allocation (decayed)
	Live       Alloc // held by live attempts now
	// RecentDominant and LiveDominant are their dominant shares of
	// Capacity; Key = (recent + live) dominant share / share.
	RecentDominant float64
	LiveDominant   float64
	Key            float64
}

// NamespaceShares builds the report from a read transaction at now with
// half-life h.
func NamespaceShares(tx *fsm.Tx, now time.Time, h time.Duration) (*ShareReport, error) {
	rep := &ShareReport{HalfLife: h}
	list, err := tx.Namespaces()
	if err != nil {
		return nil, err
	}
	shares := map[string]int64{}
	for _, n := range list {
		if n.Share > 0 {
			shares[fsm.StoredNamespace(n.Name)] = n.Share
			rep.Enabled = true
		}
	}
	nodes, err := tx.NodesShared()
	if err != nil {
		return nil, err
	}
	rep.Capacity = Capacity(nodes)
	live := map[string]Alloc{}
	err = tx.LiveAttemptSpecs(func(a *fsm.Attempt, spec *fsm.JobSpec) bool {
		l := live[spec.Namespace]
		l.add(&a.Resources, 1)
		live[spec.Namespace] = l
		return true
	})
	if err != nil {
		return nil, err
	}
	recent, err := RecentUsage(UsageHoursOf(tx), now, h)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for ns := range shares {
		seen[ns] = true
	}
	for ns := range live {
		seen[ns] = true
	}
	for ns, a := range recent {
		if a != (Alloc{}) {
			seen[ns] = true
		}
	}
	var total float64
	for ns := range seen {
		total += float64(max(1, shares[ns]))
	}
	for ns := range seen {
		r := ShareRow{Namespace: fsm.NamespaceOf(ns), Share: shares[ns], Recent: recent[ns], Live: live[ns]}
		r.Normalized = float64(max(1, r.Share)) / total
		r.RecentDominant = r.Recent.Dominant(rep.Capacity)
		r.LiveDominant = r.Live.Dominant(rep.Capacity)
		r.Key = FairKey(r.Live, r.Recent, r.Share, rep.Capacity)
		rep.Rows = append(rep.Rows, r)
	}
	sort.Slice(rep.Rows, func(i, j int) bool { return rep.Rows[i].Namespace < rep.Rows[j].Namespace })
	return rep, nil
}
