package fsm

import (
	"errors"
	"fmt"
	"testing"
)

func TestNamespaceRecord(t *testing.T) {
	h := newHarness(t)
	var got *Namespace
	read := func(name string) *Namespace {
		t.Helper()
		if err := h.f.View(func(tx *Tx) (err error) { got, err = tx.Namespace(name); return err }); err != nil {
			t.Fatalf("namespace %s: %v", name, err)
		}
		return got
	}
	if n := read("team-a"); n != nil {
		t.Fatalf("namespace before any set = %+v, want nil", n)
	}
	h.must(CmdSetNamespace, SetNamespace{Namespace: Namespace{Name: "team-a", MaxRunning: 2, MaxCPU: 1500, MaxMemoryMB: 512, Drivers: []string{"process"}}})
	n := read("team-a")
	if n == nil || n.MaxRunning != 2 || n.MaxCPU != 1500 || n.MaxMemoryMB != 512 || !n.AllowsDriver("process") || n.AllowsDriver("container") || n.ModifyIndex != h.idx {
		t.Fatalf("namespace = %+v", n)
	}
	// The default namespace is keyed by its display name, whichever form is asked.
	h.must(CmdSetNamespace, SetNamespace{Namespace: Namespace{Name: DefaultNamespace, AllowRoot: true}})
	if n := read(""); n == nil || !n.AllowRoot || n.HasQuota() {
		t.Fatalf("default namespace = %+v", n)
	}
	var all []Namespace
	_ = h.f.View(func(tx *Tx) (err error) { all, err = tx.Namespaces(); return err })
	if len(all) != 2 || all[0].Name != "default" || all[1].Name != "team-a" {
		t.Fatalf("namespaces = %+v", all)
	}
	h.must(CmdDeleteNamespace, DeleteNamespace{Name: "team-a"})
	h.must(CmdDeleteNamespace, DeleteNamespace{Name: "default"})
	if n := read("team-a"); n != nil {
		t.Fatalf("deleted namespace = %+v", n)
	}
	if r := h.apply(CmdDeleteNamespace, DeleteNamespace{Name: "team-a"}); !errors.Is(r.Err, ErrNotFound) {
		t.Fatalf("delete again: %v, want ErrNotFound", r.Err)
	}
}

// Bad namespace commands are refused with an error and change nothing.
func TestNamespaceBadCommands(t *testing.T) {
	for name, p := range map[string]any{
		"empty name":      SetNamespace{},
		"slash":           SetNamespace{Namespace: Namespace{Name: "a/b"}},
		"negative cpu":    SetNamespace{Namespace: Namespace{Name: "a", MaxCPU: -1}},
		"negative run":    SetNamespace{Namespace: Namespace{Name: "a", MaxRunning: -5}},
		"empty driver":    SetNamespace{Namespace: Namespace{Name: "a", Drivers: []string{""}}},
		"too many driver": SetNamespace{Namespace: Namespace{Name: "a", Drivers: make([]string, MaxNamespaceDrivers+1)}},
		"delete empty":    DeleteNamespace{},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			before := h.hash()
			typ := CmdSetNamespace
			if _, ok := p.(DeleteNamespace); ok {
				typ = CmdDeleteNamespace
			}
			if r := h.apply(typ, p); !errors.Is(r.Err, ErrBadCommand) {
				t.Fatalf("err = %v, want ErrBadCommand", r.Err)
			}
			if h.hash() != before {
				t.Fatal("refused command changed the state")
			}
		})
	}
}

func TestIsRootUser(t *testing.T) {
	for u, want := range map[string]bool{"root": true, "0": true, "0:0": true, "root:wheel": true, "": false, "nobody": false, "1000:0": false, "rootless": false} {
		if got := IsRootUser(u); got != want {
			t.Errorf("IsRootUser(%q) = %v, want %v", u, got, want)
		}
	}
}

// Event counts name at most MaxMetricNamespaces namespaces; the rest count
// as OtherNamespace.
func TestEventCountsNamespaceBounded(t *testing.T) {
	r := newEventRing(16, 0)
	for i := range MaxMetricNamespaces + 10 {
		r.append([]Event{{Type: EventJob, Name: NameSubmitted, Namespace: fmt.Sprintf("ns%03d", i)}})
	}
	by := r.CountsByNamespace()
	if len(by) != MaxMetricNamespaces+1 || by[OtherNamespace]["job.submitted"] != 10 {
		t.Fatalf("%d namespaces, %s has %v", len(by), OtherNamespace, by[OtherNamespace])
	}
	if r.Counts()["job.submitted"] != MaxMetricNamespaces+10 {
		t.Fatalf("total %v", r.Counts())
	}
}
