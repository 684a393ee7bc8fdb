package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// NamespaceUsage is what a namespace's work holds now.
type NamespaceUsage struct {
	Running int            `json:"running"` // jobs with a live attempt
	CPU     int64          `json:"cpu"`     // millicores held by live attempts (as placed)
	Memory  int64          `json:"memory"`  // MiB held by live attempts
	Jobs    map[string]int `json:"jobs"`    // active (non-terminal) jobs by state
}

// NamespaceStatus is one namespace: its quota and policy (zero: none) and
// its usage. Configured is false for a namespace that has jobs but no
// record.
type NamespaceStatus struct {
	Name       string         `json:"name"`
	Configured bool           `json:"configured"`
	MaxRunning int            `json:"max_running"` // 0 = unlimited
	MaxCPU     int64          `json:"max_cpu"`     // millicores; 0 = unlimited
	MaxMemory  int64          `json:"max_memory"`  // MiB; 0 = unlimited
	Drivers    []string       `json:"drivers,omitempty"`
	AllowRoot  bool           `json:"allow_root"`
	Volumes    []string       `json:"volumes,omitempty"` // host volumes its jobs may mount (empty: any)
	Share      int64          `json:"share,omitempty"`   // fair share; 0: not set
	Usage      NamespaceUsage `json:"usage"`
}

// NamespaceList is the reply to GET /v1/namespaces.
type NamespaceList struct {
	Namespaces []NamespaceStatus `json:"namespaces"`
}

// SetNamespaceRequest is the body of PUT /v1/namespaces/{name}: the whole
// record (an absent field is unlimited / unrestricted / false). max_cpu
// takes millicores or a string with units ("2", "500m"); max_memory MiB
// or a string ("4GiB").
type SetNamespaceRequest struct {
	MaxRunning *int            `json:"max_running,omitempty"`
	MaxCPU     json.RawMessage `json:"max_cpu,omitempty"`
	MaxMemory  json.RawMessage `json:"max_memory,omitempty"`
	Drivers    []string        `json:"drivers,omitempty"`
	AllowRoot  bool            `json:"allow_root,omitempty"`
	Volumes    []string        `json:"volumes,omitempty"`
	// Share is the namespace's fair share, 1..1000000 (absent: none);
	// 0 or negative is refused.
	Share *int64 `json:"share,omitempty"`
}

// namespaceDrivers are the drivers a namespace policy may list.
var namespaceDrivers = []string{"container", "process", HTTPDriver}

// setNamespace handles PUT /v1/namespaces/{name} (leader only; management:
// a namespace's policy can grant root).
func (s *server) setNamespace(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := CheckNamespace("name", name); err != nil {
		s.writeError(w, r, err)
		return
	}
	var req SetNamespaceRequest
	err := s.decodeBody(w, r, &req)
	var n fsm.Namespace
	if err == nil {
		n, err = req.normalize(name)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.apply(r.Context(), fsm.CmdSetNamespace, fsm.SetNamespace{Namespace: n})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	n.ModifyIndex = res.Index
	writeJSON(w, http.StatusOK, namespaceStatus(&n, n.Name))
}

func (req *SetNamespaceRequest) normalize(name string) (fsm.Namespace, error) {
	n := fsm.Namespace{Name: fsm.NamespaceOf(fsm.StoredNamespace(name)), AllowRoot: req.AllowRoot}
	if req.MaxRunning != nil {
		if *req.MaxRunning < 0 || *req.MaxRunning > MaxQueueLimit {
			return n, invalid("max_running", "must be between 0 (unlimited) and %d (got %d)", MaxQueueLimit, *req.MaxRunning)
		}
		n.MaxRunning = *req.MaxRunning
	}
	var err error
	if n.MaxCPU, err = parseQuantity("max_cpu", req.MaxCPU, ParseCPU, MaxCPUMillis, "millicores"); err != nil {
		return n, err
	}
	if n.MaxMemoryMB, err = parseQuantity("max_memory", req.MaxMemory, ParseMemory, MaxMemoryMiB, "MiB"); err != nil {
		return n, err
	}
	if req.Share != nil {
		if *req.Share < 1 || *req.Share > fsm.MaxShare {
			return n, invalid("share", "must be between 1 and %d (got %d)", fsm.MaxShare, *req.Share)
		}
		n.Share = *req.Share
	}
	if len(req.Drivers) > fsm.MaxNamespaceDrivers {
		return n, invalid("drivers", "at most %d drivers (got %d)", fsm.MaxNamespaceDrivers, len(req.Drivers))
	}
	for i, d := range req.Drivers {
		if !slices.Contains(namespaceDrivers, d) {
			return n, invalid(fmt.Sprintf("drivers[%d]", i), "must be \"container\", \"process\" or \"http\" (got %q)", d)
		}
		if !slices.Contains(n.Drivers, d) {
			n.Drivers = append(n.Drivers, d)
		}
	}
	if len(req.Volumes) > fsm.MaxVolumes {
		return n, invalid("volumes", "at most %d volumes (got %d)", fsm.MaxVolumes, len(req.Volumes))
	}
	for i, v := range req.Volumes {
		if err := fsm.ValidVolumeName(v); err != nil {
			return n, invalid(fmt.Sprintf("volumes[%d]", i), "%v", err)
		}
		if !slices.Contains(n.Volumes, v) {
			n.Volumes = append(n.Volumes, v)
		}
	}
	return n, nil
}

// deleteNamespace handles DELETE /v1/namespaces/{name} (leader only): the
// namespace's quota and policy go; its jobs stay.
func (s *server) deleteNamespace(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := CheckNamespace("name", name); err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, err := s.apply(r.Context(), fsm.CmdDeleteNamespace, fsm.DeleteNamespace{Name: fsm.NamespaceOf(fsm.StoredNamespace(name))}); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// getNamespace handles GET /v1/namespaces/{name}: any namespace name
// answers (one without a record or jobs has no quota and no usage).
func (s *server) getNamespace(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := CheckNamespace("name", name); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.allow(r, PermRead, name); err != nil {
		s.writeError(w, r, err)
		return
	}
	all, err := s.namespaceStatuses(fsm.NamespaceOf(fsm.StoredNamespace(name)))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, all[0])
}

// listNamespaces handles GET /v1/namespaces: every namespace with a record
// or active jobs that the token may read, by name.
func (s *server) listNamespaces(w http.ResponseWriter, r *http.Request) {
	all, err := s.namespaceStatuses("")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := NamespaceList{Namespaces: make([]NamespaceStatus, 0, len(all))}
	for _, n := range all {
		if s.allow(r, PermRead, n.Name) == nil {
			out.Namespaces = append(out.Namespaces, n)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func namespaceStatus(n *fsm.Namespace, name string) NamespaceStatus {
	st := NamespaceStatus{Name: name, Usage: NamespaceUsage{Jobs: map[string]int{}}}
	if n != nil {
		st.Configured = true
		st.MaxRunning, st.MaxCPU, st.MaxMemory = n.MaxRunning, n.MaxCPU, n.MaxMemoryMB
		st.Drivers, st.AllowRoot, st.Volumes = n.Drivers, n.AllowRoot, n.Volumes
		st.Share = n.Share
	}
	return st
}

// namespaceStatuses reads the records and usage of every namespace (only
// ns, by display name, when ns is set; it is then the one entry).
func (s *server) namespaceStatuses(only string) ([]NamespaceStatus, error) {
	byName := map[string]*NamespaceStatus{}
	get := func(stored string) *NamespaceStatus {
		name := fsm.NamespaceOf(stored)
		if only != "" && name != only {
			return nil
		}
		st := byName[name]
		if st == nil {
			v := namespaceStatus(nil, name)
			st = &v
			byName[name] = st
		}
		return st
	}
	if only != "" {
		get(fsm.StoredNamespace(only))
	}
	err := s.state.View(func(tx *fsm.Tx) error {
		recs, err := tx.Namespaces()
		if err != nil {
			return err
		}
		for i := range recs {
			if st := get(fsm.StoredNamespace(recs[i].Name)); st != nil {
				*st = namespaceStatus(&recs[i], st.Name)
			}
		}
		counts, err := tx.CountActiveByNamespace()
		if err != nil {
			return err
		}
		for _, c := range counts {
			if st := get(c.Namespace); st != nil {
				st.Usage.Jobs[string(c.State)] += c.Jobs
			}
		}
		seen := map[string]bool{}
		return tx.LiveAttemptSpecs(func(a *fsm.Attempt, spec *fsm.JobSpec) bool {
			st := get(spec.Namespace)
			if st == nil {
				return true
			}
			if !seen[a.JobID] {
				seen[a.JobID] = true
				st.Usage.Running++
			}
			st.Usage.CPU += a.Resources.CPU
			st.Usage.Memory += a.Resources.MemoryMB
			return true
		})
	})
	if err != nil {
		return nil, err
	}
	out := make([]NamespaceStatus, 0, len(byName))
	for _, st := range byName {
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// NamespaceShares is the reply to GET /v1/namespaces/shares.
type NamespaceShares = api.NamespaceShares

// namespaceShares handles GET /v1/namespaces/shares: each namespace's
// share, recent and live allocation and current factor, computed from
// this node's replicated state (the leader's order up to the placements
// still committing). Rows of namespaces the token may not read are left
// out; the normalized shares still count them.
func (s *server) namespaceShares(w http.ResponseWriter, r *http.Request) {
	if s.shares == nil {
		s.writeError(w, r, fmt.Errorf("%w: fair share view not wired in", ErrUnavailable))
		return
	}
	var out *NamespaceShares
	err := s.state.View(func(tx *fsm.Tx) error {
		var err error
		out, err = s.shares.NamespaceShares(tx, s.clock.Now())
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rows := out.Namespaces[:0]
	for _, n := range out.Namespaces {
		if s.allow(r, PermRead, n.Name) == nil {
			rows = append(rows, n)
		}
	}
	out.Namespaces = rows
	if out.Namespaces == nil {
		out.Namespaces = []api.NamespaceShare{}
	}
	writeJSON(w, http.StatusOK, out)
}
