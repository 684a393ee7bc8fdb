package container

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/foreman-sched/foreman/exec"
	"github.com/foreman-sched/foreman/fsm"
)

// A host volume is bound at its destination: a read-only one can be read
// and not written, a writable one written through to the host.
func TestHostVolumesBound(t *testing.T) {
	d := newTestDriver(t, nil)
	ro, rw := t.TempDir(), t.TempDir()
	for _, dir := range []string{ro, rw} {
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ro, "in.txt"), []byte("dataset\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	task := newTask(t, testID(t), fsm.JobSpec{Command: sh(`cat /data/in.txt; touch /data/x 2>/dev/null && echo ro-writable; echo out > /scratch/out.txt && echo wrote`)})
	task.Volumes = []exec.TaskVolume{{Name: "data", Path: ro, Dest: "/data", ReadOnly: true}, {Name: "scratch", Path: rw, Dest: "/scratch"}}
	h, err := d.Start(context.Background(), task)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	st := waitFor(t, h)
	if err := h.Destroy(); err != nil {
		t.Fatal(err)
	}
	if out := readFile(t, task.Stdout.Name()); out != "dataset\nwrote\n" || st.ExitCode != 0 {
		t.Fatalf("stdout %q stderr %q status %+v", out, readFile(t, task.Stderr.Name()), st)
	}
	if _, err := os.Stat(filepath.Join(ro, "x")); err == nil {
		t.Fatal("the job wrote into the read-only volume")
	}
	if got := readFile(t, filepath.Join(rw, "out.txt")); got != "out\n" {
		t.Fatalf("the writable volume on the host holds %q", got)
	}
}
