package fsm

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// A state written by the previous build (the golden workload: only the
// commands it knew, none of this build's buckets) snapshots and restores
// here unchanged, and this build's readers and commands work on it: no
// held-silent set, no singleton index, after and volumes fields absent. An
// entry of a command this build does not know is refused with one line
// naming it, and the next entry applies.
func TestPreviousBuildStateReadsHere(t *testing.T) {
	h := goldenLog(t)
	want := h.hash()
	data := snapshotBytes(t, h.f)
	f, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	if _, got, err := f.StateHash(); err != nil || got != want {
		t.Fatalf("restored hash %s (%v), want %s", got, err, want)
	}
	h.f = f
	if err := f.View(func(tx *Tx) error {
		s, err := tx.SilentClients()
		if err == nil && len(s) != 0 {
			t.Errorf("held set %v in a previous build's state", s)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	h.addNode("compat-n")
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "compat-s1", Spec: JobSpec{Name: "c", Command: []string{"true"}, Singleton: true}}}})
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "compat-s2", Spec: JobSpec{Name: "c", Command: []string{"true"}, Singleton: true}}}})
	if got := h.job("compat-s2"); got.State != JobWaiting || len(got.Spec.After) != 1 {
		t.Fatalf("second singleton on the old state: %s %+v", got.State, got.Spec.After)
	}
	h.must(CmdSilentClients, SilentClients{})

	h.idx++
	bad := encodeCmd(t, CmdGC, t0, GC{})
	bad = bytes.Replace(bad, []byte(CmdGC), []byte("zz"), 1)
	r, _ := f.Apply(&raft.Log{Index: h.idx, Term: 1, Type: raft.LogCommand, Data: bad}).(*Result)
	if r == nil || !errors.Is(r.Err, ErrBadCommand) || !strings.Contains(r.Err.Error(), `unknown command type "zz"`) || strings.Contains(r.Err.Error(), "\n") {
		t.Fatalf("an unknown command: %+v", r)
	}
	h.addNode("compat-after") // the next entry applies
}
