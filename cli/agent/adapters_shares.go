package agent

import (
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/sched"
)

// fairShares computes GET /v1/namespaces/shares (httpapi.Shares) with the
// planner's own functions and the scheduler's half-life.
type fairShares struct{ halfLife time.Duration }

func (f fairShares) NamespaceShares(tx *fsm.Tx, now time.Time) (*api.NamespaceShares, error) {
	rep, err := sched.NamespaceShares(tx, now, f.halfLife)
	if err != nil {
		return nil, err
	}
	out := &api.NamespaceShares{Enabled: rep.Enabled, HalfLifeSeconds: rep.HalfLife.Seconds(),
		Capacity: allocation(rep.Capacity), Namespaces: make([]api.NamespaceShare, 0, len(rep.Rows))}
	for _, r := range rep.Rows {
		out.Namespaces = append(out.Namespaces, api.NamespaceShare{Name: r.Namespace, Share: r.Share, Normalized: r.Normalized,
			Recent: allocation(r.Recent), RecentDominant: r.RecentDominant, Live: allocation(r.Live), LiveDominant: r.LiveDominant, Factor: r.Key})
	}
	return out, nil
}

func allocation(a sched.Alloc) api.Allocation {
	return api.Allocation{CPU: a.CPU, Memory: a.MemoryMB, GPUs: a.GPUs}
}
