package container

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// TestResultAndInputsMounts: the job writes /foreman/result (a host file)
// and reads its parents' results under /foreman/inputs, which it cannot
// change (read-only).
func TestResultAndInputsMounts(t *testing.T) {
	d := newTestDriver(t, nil)
	task := newTask(t, testID(t), fsm.JobSpec{Command: sh(`cat /foreman/inputs/extract/result > /foreman/result; echo more >> /foreman/result; ` +
		`if echo x > /foreman/inputs/extract/result 2>/dev/null; then echo inputs-writable; fi`)})
	task.ResultFile = filepath.Join(task.Dir, "result")
	task.InputsDir = filepath.Join(task.Dir, "inputs")
	if err := os.WriteFile(task.ResultFile, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(task.InputsDir, "extract"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(task.InputsDir, "extract", "result"), []byte("rows=42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := d.Start(context.Background(), task)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	st := waitFor(t, h)
	if err := h.Destroy(); err != nil {
		t.Fatal(err)
	}
	if st.ExitCode != 0 {
		t.Fatalf("exit %d: %s", st.ExitCode, readFile(t, task.Stderr.Name()))
	}
	if got := readFile(t, task.ResultFile); got != "rows=42\nmore\n" {
		t.Fatalf("result %q (stderr %q)", got, readFile(t, task.Stderr.Name()))
	}
	if out := readFile(t, task.Stdout.Name()); out != "" {
		t.Fatalf("stdout %q", out)
	}
}
