package sched

import (
	"github.com/foreman-sched/foreman/fsm"
)

// Namespace quotas (issue 16) are enforced here, like a queue's
// max_running: a job whose namespace would go over a limit stays queued
// with a reason and consumes nothing. A namespace's usage is its live
// jobs (max_running) and the resources its live attempts hold, as
// placed (the default request included, and every task of a gang), plus
// the placements still committing. Usage only grows during a plan, so
// once a job of a placement group (which includes the namespace) is over
// quota the rest of the group is too, and the stop-at-the-first-misfit
// rule stays exact. A gang is checked whole: all its tasks fit the quota
// or none is placed.

// NamespaceUsage is what a namespace's live work holds.
type NamespaceUsage struct {
	Running  int   // jobs with a live attempt
	CPU      int64 // millicores held by live attempts
	MemoryMB int64
}

func (u *NamespaceUsage) add(r *fsm.Resources, tasks int) {
	u.Running++
	u.CPU += r.CPU * int64(tasks)
	u.MemoryMB += r.MemoryMB * int64(tasks)
}

// quotaBook tracks usage of the namespaces that have a quota during one
// plan.
type quotaBook struct {
	quotas map[string]*fsm.Namespace // stored namespace name → record with a quota
	usage  map[string]*NamespaceUsage
}

func newQuotaBook(snap *Snapshot) *quotaBook {
	if len(snap.NamespaceQuotas) == 0 {
		return nil
	}
	b := &quotaBook{quotas: snap.NamespaceQuotas, usage: make(map[string]*NamespaceUsage, len(snap.NamespaceQuotas))}
	for ns := range snap.NamespaceQuotas {
		u := snap.NamespaceUsage[ns] // a copy: the snapshot is not modified
		b.usage[ns] = &u
	}
	for i := range snap.Placing {
		p := &snap.Placing[i]
		if u := b.usage[p.Namespace]; u != nil {
			u.add(&p.Resources, max(1, len(p.Tasks)))
		}
	}
	return b
}

// misfit returns why a job of namespace ns asking req per task (tasks
// of them) would go over its namespace's quota, or "".
func (b *quotaBook) misfit(ns string, req *fsm.Resources, tasks int) string {
	if b == nil {
		return ""
	}
	q := b.quotas[ns]
	if q == nil {
		return ""
	}
	u := b.usage[ns]
	name := fsm.NamespaceOf(ns)
	switch {
	case q.MaxRunning > 0 && u.Running+1 > q.MaxRunning:
		return "namespace " + name + " at max_running " + itoa(q.MaxRunning)
	case q.MaxCPU > 0 && u.CPU+req.CPU*int64(tasks) > q.MaxCPU:
		return "namespace " + name + " over cpu quota " + itoa64(q.MaxCPU) + "m"
	case q.MaxMemoryMB > 0 && u.MemoryMB+req.MemoryMB*int64(tasks) > q.MaxMemoryMB:
		return "namespace " + name + " over memory quota " + itoa64(q.MaxMemoryMB) + "MiB"
	}
	return ""
}

// take records a placement of a job of namespace ns.
func (b *quotaBook) take(ns string, req *fsm.Resources, tasks int) {
	if b == nil {
		return
	}
	if u := b.usage[ns]; u != nil {
		u.add(req, tasks)
	}
}

// namespaceReader is what loadNamespaceQuotas needs beyond Reader; the
// leader's reader (*fsm.Tx) has it (checked at compile time).
type namespaceReader interface {
	Namespaces() ([]fsm.Namespace, error)
	JobSpec(id string) (*fsm.JobSpec, error)
}

var _ namespaceReader = (*fsm.Tx)(nil)

// loadNamespaceQuotas fills s.NamespaceQuotas and s.NamespaceUsage when
// the reader has namespace records with a quota, and s.Shares with the
// namespaces' fair shares. Usage reads the job of
// every live attempt, so a cluster without quotas pays nothing.
func loadNamespaceQuotas(r Reader, s *Snapshot) error {
	nr, ok := r.(namespaceReader)
	if !ok {
		return nil
	}
	list, err := nr.Namespaces()
	if err != nil {
		return err
	}
	for i := range list {
		n := &list[i]
		if n.Share > 0 {
			if s.Shares == nil {
				s.Shares = map[string]int64{}
			}
			s.Shares[fsm.StoredNamespace(n.Name)] = n.Share
		}
		if !n.HasQuota() {
			continue
		}
		if s.NamespaceQuotas == nil {
			s.NamespaceQuotas = map[string]*fsm.Namespace{}
			s.NamespaceUsage = map[string]NamespaceUsage{}
		}
		s.NamespaceQuotas[fsm.StoredNamespace(n.Name)] = n
	}
	if len(s.NamespaceQuotas) == 0 {
		return nil
	}
	nsOf := map[string]string{} // job ID → stored namespace
	for i := range s.Live {
		a := &s.Live[i]
		ns, seen := nsOf[a.JobID]
		if !seen {
			spec, err := nr.JobSpec(a.JobID)
			if err != nil {
				return err
			}
			ns = spec.Namespace
			nsOf[a.JobID] = ns
		}
		if s.NamespaceQuotas[ns] == nil {
			continue
		}
		u := s.NamespaceUsage[ns]
		if !seen {
			u.Running++
		}
		u.CPU += a.Resources.CPU
		u.MemoryMB += a.Resources.MemoryMB
		s.NamespaceUsage[ns] = u
	}
	return nil
}
