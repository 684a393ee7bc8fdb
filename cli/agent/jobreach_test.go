package agent

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/foreman-sched/foreman/exec"
)

// A root agent whose default job user cannot reach its data dir does not
// offer the process driver (and says why in unusable); one whose jobs run
// as root, or whose data dir is reachable (parents it makes included),
// does.
func TestUnreachableDataDirDropsProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root (only a root agent switches job users)")
		}
		t.Skip("needs root (only a root agent switches job users)")
	}
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} { // the test's own dirs
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	tight, open := filepath.Join(base, "tight"), filepath.Join(base, "open")
	if err := os.Mkdir(tight, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dataDir, user string
		offered             bool
	}{
		{"under a 0700 dir", filepath.Join(tight, "data"), "nobody", false},
		{"jobs run as root", filepath.Join(tight, "data"), "", true},
		{"searchable parents", filepath.Join(open, "data"), "nobody", true},
		{"parents the agent makes", filepath.Join(base, "new", "sub", "data"), "nobody", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			unusable := map[string]error{}
			w := &exec.WorkerConfig{DataDir: tc.dataDir, DefaultJobUser: tc.user}
			usable := withoutUnreachableProcess(w, []string{"container", "http", exec.ProcessDriverName}, unusable)
			if slices.Contains(usable, exec.ProcessDriverName) != tc.offered {
				t.Fatalf("drivers %v, process offered: want %v", usable, tc.offered)
			}
			if err := unusable[exec.ProcessDriverName]; tc.offered != (err == nil) || !tc.offered && !errors.Is(err, exec.ErrJobUserCannotReach) {
				t.Fatalf("unusable process: %v", err)
			}
			if !slices.Contains(usable, "container") || !slices.Contains(usable, "http") {
				t.Fatalf("drivers %v: the others must stay", usable)
			}
			if st, err := os.Stat(tc.dataDir); tc.user != "" && (err != nil || st.Mode().Perm() != 0o700) { // made only to switch users
				t.Fatalf("data dir: %v %v, want it made 0700", st.Mode(), err)
			}
		})
	}
}
