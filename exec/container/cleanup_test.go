package container

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/opencontainers/runc/libcontainer"

	"github.com/foreman-sched/foreman/fsm"
)

// TestNothingLeftAfterDestroy: no mounts, cgroups or state dirs remain.
func TestNothingLeftAfterDestroy(t *testing.T) {
	d := newTestDriver(t, nil)
	before := mountinfo(t)
	task := newTask(t, testID(t), fsm.JobSpec{Command: []string{"sleep", "30"}, Resources: fsm.Resources{CPU: 200, MemoryMB: 64}})
	h, err := d.Start(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	leaf := cgroupDirs(t, d.cgroupParent+"/"+task.ID)
	present := 0
	for _, dir := range leaf {
		if _, err := os.Stat(dir); err == nil {
			present++
		}
	}
	if present == 0 {
		t.Fatalf("no cgroup dirs for a running container among %v", leaf)
	}
	if err := h.Destroy(); err != nil { // Destroy without Wait: kills first
		t.Fatal(err)
	}
	if err := h.Destroy(); err != nil {
		t.Fatalf("second Destroy: %v", err)
	}
	st := h.Wait()
	if st.Signal != "SIGKILL" {
		t.Fatalf("status after Destroy: %+v", st)
	}
	assertNoLeftovers(t, d, task.ID, before)
}

func assertNoLeftovers(t *testing.T, d *Driver, id string, mountsBefore []byte) {
	t.Helper()
	for _, dir := range cgroupDirs(t, d.cgroupParent+"/"+id) {
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("cgroup left: %s", dir)
		}
	}
	if _, err := os.Stat(filepath.Join(d.cfg.containersDir(), id)); err == nil {
		t.Errorf("state dir left for %s", id)
	}
	if after := mountinfo(t); string(after) != string(mountsBefore) {
		t.Errorf("mountinfo changed:\nbefore:\n%s\nafter:\n%s", mountsBefore, after)
	}
}

// TestCleanupOrphans models a supervisor that died: a new driver on the
// same state root kills and removes containers it is not told are live.
func TestCleanupOrphans(t *testing.T) {
	d := newTestDriver(t, nil)
	before := mountinfo(t)
	orphan := newTask(t, testID(t), fsm.JobSpec{Command: []string{"sleep", "60"}})
	keep := newTask(t, testID(t), fsm.JobSpec{Command: []string{"sleep", "60"}})
	ho, err := d.Start(context.Background(), orphan)
	if err != nil {
		t.Fatal(err)
	}
	hk, err := d.Start(context.Background(), keep)
	if err != nil {
		t.Fatal(err)
	}
	defer hk.Destroy()
	// A leftover empty cgroup from an even older crash.
	stale := cgroupDirs(t, d.cgroupParent+"/stale-attempt")
	for _, dir := range stale {
		os.MkdirAll(dir, 0o755)
	}

	restarted, err := New(d.cfg, d.log)
	if err != nil {
		t.Fatal(err)
	}
	if err := restarted.CleanupOrphans(map[string]bool{keep.ID: true}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { ho.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("orphan still running after CleanupOrphans")
	}
	ho.Destroy() // the old handle tolerates an already-destroyed container
	assertNoLeftovers(t, d, orphan.ID, before)
	for _, dir := range stale {
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("stale cgroup left: %s", dir)
		}
	}
	if _, err := os.Stat(filepath.Join(d.cfg.containersDir(), keep.ID)); err != nil {
		t.Fatalf("live container was removed: %v", err)
	}
	if st, err := hk.(*handle).c.Status(); err != nil || st != libcontainer.Running {
		t.Fatalf("live container: %v %v", st, err)
	}
}
