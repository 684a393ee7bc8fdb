package exec

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// The checkpoint directory is the same for every attempt of a job (one per
// gang task), keeps what a job wrote, receives the API's checkpoint, and
// is emptied when over its bound.
func TestPrepareCheckpoint(t *testing.T) {
	dir := dataDir(t)
	w, err := NewWorker(testConfig(t, dir), WorkerDeps{Assignments: newFakeState(), Reporter: newFakeState(), LeaderContact: newFakeState()})
	if err != nil {
		t.Fatal(err)
	}
	a := Assignment{Attempt: fsm.Attempt{JobID: "J", Num: 1}}
	ck, env, err := w.prepareCheckpoint(t.Context(), a, ProcessDriverName)
	if err != nil {
		t.Fatal(err)
	}
	if ck != filepath.Join(dir, "checkpoints", "J") || strings.Join(env, " ") != "FOREMAN_CHECKPOINT="+ck {
		t.Fatalf("dir %s env %v", ck, env)
	}
	if err := os.WriteFile(filepath.Join(ck, "model.pt"), []byte("weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The next attempt sees the file, and the API's bytes.
	a.Attempt.Num, a.Checkpoint = 2, []byte("epoch=3")
	ck2, env, err := w.prepareCheckpoint(t.Context(), a, "container")
	if err != nil || ck2 != ck || strings.Join(env, " ") != "FOREMAN_CHECKPOINT="+ContainerCheckpointDir {
		t.Fatalf("second attempt: %s %v %v", ck2, env, err)
	}
	for name, want := range map[string]string{"model.pt": "weights", CheckpointFileName: "epoch=3"} {
		if b, err := os.ReadFile(filepath.Join(ck, name)); err != nil || string(b) != want {
			t.Fatalf("%s: %q %v", name, b, err)
		}
	}
	// A gang task has its own directory.
	task, _, err := w.prepareCheckpoint(t.Context(), Assignment{Attempt: fsm.Attempt{JobID: "G", Num: 5, Task: &fsm.GangTask{Index: 2, Size: 3}}}, ProcessDriverName)
	if err != nil || filepath.Base(task) != "G-task-2" {
		t.Fatalf("task dir %s %v", task, err)
	}
	// Over the bound: emptied.
	f, err := os.Create(filepath.Join(ck, "huge"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(CheckpointDirMax + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	a.Checkpoint = nil
	if _, _, err := w.prepareCheckpoint(t.Context(), a, ProcessDriverName); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(ck); len(ents) != 0 {
		t.Fatalf("%d entries left in an over-sized checkpoint dir", len(ents))
	}
}

// workerFetcher serves another worker's checkpoints the way the agent's
// HTTP route does (WriteCheckpoint's tar stream).
type workerFetcher map[string]*Worker

func (f workerFetcher) FetchCheckpoint(_ context.Context, node, name string, out io.Writer) error {
	w := f[node]
	if w == nil {
		return fmt.Errorf("node %s unreachable", node)
	}
	return w.WriteCheckpoint(name, out)
}

// A task's next attempt on another node gets the checkpoint directory of
// the node that ran its previous attempt (files, subdirectories; no
// symlinks), in place of a stale local copy; a node that cannot answer
// leaves the local copy.
func TestCheckpointFetchedAcrossNodes(t *testing.T) {
	fetch := workerFetcher{}
	mk := func(name string) *Worker {
		cfg := testConfig(t, dataDir(t))
		cfg.Node = name
		w, err := NewWorker(cfg, WorkerDeps{Assignments: newFakeState(), Reporter: newFakeState(), LeaderContact: newFakeState(), Checkpoints: fetch})
		if err != nil {
			t.Fatal(err)
		}
		fetch[name] = w
		return w
	}
	a, b := mk("a"), mk("b")
	task := fsm.Attempt{JobID: "G", Num: 1, Task: &fsm.GangTask{Index: 1, Size: 2}}
	ckA, _, err := a.prepareCheckpoint(t.Context(), Assignment{Attempt: task}, ProcessDriverName)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(ckA, "shards"), 0o755)
	os.WriteFile(filepath.Join(ckA, "step"), []byte("42"), 0o644)
	os.WriteFile(filepath.Join(ckA, "shards", "0.bin"), []byte("weights"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(ckA, "link"))
	// b ran an older attempt of the task: its copy is stale.
	old := task
	ckB, _, err := b.prepareCheckpoint(t.Context(), Assignment{Attempt: old}, ProcessDriverName)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ckB, "stale"), []byte("x"), 0o644)

	next := task
	next.Num = 3
	if _, _, err := b.prepareCheckpoint(t.Context(), Assignment{Attempt: next, CheckpointFrom: "a"}, ProcessDriverName); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"step": "42", "shards/0.bin": "weights"} {
		if got, err := os.ReadFile(filepath.Join(ckB, name)); err != nil || string(got) != want {
			t.Fatalf("%s on b: %q %v", name, got, err)
		}
	}
	for _, gone := range []string{"stale", "link"} {
		if _, err := os.Lstat(filepath.Join(ckB, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s on b after the fetch: %v", gone, err)
		}
	}
	// The holder is unreachable: the attempt starts with b's copy.
	next.Num = 5
	if _, _, err := b.prepareCheckpoint(t.Context(), Assignment{Attempt: next, CheckpointFrom: "gone"}, ProcessDriverName); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(ckB, "step")); string(got) != "42" {
		t.Fatalf("b's copy after a failed fetch: %q", got)
	}
	if err := a.WriteCheckpoint("../x", io.Discard); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("bad name: %v", err)
	}
}

// A tar stream with an entry outside the directory, or a symlink, is
// refused before anything is written.
func TestExtractCheckpointRefusesEscapes(t *testing.T) {
	for _, h := range []tar.Header{
		{Typeflag: tar.TypeReg, Name: "../escape", Size: 1, Mode: 0o644},
		{Typeflag: tar.TypeSymlink, Name: "l", Linkname: "/etc"},
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&h)
		if h.Size > 0 {
			tw.Write([]byte("x"))
		}
		tw.Close()
		dir := t.TempDir()
		if _, err := extractCheckpoint(&buf, dir); err == nil {
			t.Fatalf("%s accepted", h.Name)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape")); err == nil {
			t.Fatal("escaped")
		}
	}
}
