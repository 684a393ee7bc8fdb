package exec

import (
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
	ck, env, err := w.prepareCheckpoint(a, ProcessDriverName)
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
	ck2, env, err := w.prepareCheckpoint(a, "container")
	if err != nil || ck2 != ck || strings.Join(env, " ") != "FOREMAN_CHECKPOINT="+ContainerCheckpointDir {
		t.Fatalf("second attempt: %s %v %v", ck2, env, err)
	}
	for name, want := range map[string]string{"model.pt": "weights", CheckpointFileName: "epoch=3"} {
		if b, err := os.ReadFile(filepath.Join(ck, name)); err != nil || string(b) != want {
			t.Fatalf("%s: %q %v", name, b, err)
		}
	}
	// A gang task has its own directory.
	task, _, err := w.prepareCheckpoint(Assignment{Attempt: fsm.Attempt{JobID: "G", Num: 5, Task: &fsm.GangTask{Index: 2, Size: 3}}}, ProcessDriverName)
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
	if _, _, err := w.prepareCheckpoint(a, ProcessDriverName); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(ck); len(ents) != 0 {
		t.Fatalf("%d entries left in an over-sized checkpoint dir", len(ents))
	}
}
