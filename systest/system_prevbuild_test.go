package systest

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// prevBuildBase is the address the fixture's agent ran on: its raft
// configuration records it, so this build must start on it too.
const prevBuildBase = 27470

// A data dir and a backup written by the previous build
// (testdata/prevbuild at the repository root: made by make.sh with that build's binary; its
// version is in the archive) are read by this one: started on the data
// dir as it is, on it without its state file (the previous build's raft
// log replayed from its first entry), and the backup inspected and
// restored. Every job keeps its state, and this build's features work on
// the old state. A data dir from a newer build is refused:
// TestSystemNewerDataDirRefused.
func TestSystemPreviousBuildDataDir(t *testing.T) {
	bin := foremanBin(t)
	if !portsFree([]string{"127.0.0.1"}, prevBuildBase) {
		t.Fatalf("ports %d-%d are taken: the fixture's agent ran there (its raft configuration names it)", prevBuildBase, prevBuildBase+2)
	}
	unpack := func() string {
		root := t.TempDir()
		archive, err := filepath.Abs(filepath.Join("testdata", "prevbuild", "prevbuild.tar.gz"))
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("tar", "-C", root, "-xzf", archive).CombinedOutput()
		if err != nil {
			t.Fatalf("unpack: %v %s", err, out)
		}
		return root
	}
	// states leaves out the runs of the fixture's nightly schedule: once
	// its next time (03:00 UTC after the fixture was made) has passed, an
	// agent started on the fixture starts one at once, on any later date.
	states := func(a *agentProc) map[string]string {
		var page struct {
			Jobs []struct {
				ID, State string
				Spec      struct{ Name, Schedule string }
			}
		}
		if err := getJSON(a.url("/v1/jobs?limit=1000"), &page); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, j := range page.Jobs {
			if j.Spec.Schedule == "" {
				out[j.Spec.Name+" "+j.ID] = j.State
			}
		}
		return out
	}
	byName := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, st := range m {
			out[strings.Fields(k)[0]] = st
		}
		return out
	}

	// As it is.
	root := unpack()
	version, _ := os.ReadFile(filepath.Join(root, "version"))
	t.Logf("fixture written by %s", strings.TrimSpace(string(version)))
	a := startAgent(t, bin, "n1", filepath.Join(root, "n1"), prevBuildBase, "--default-driver", "process")
	eventually(t, systemTimeout, "agent leads", func() error { _, err := leaderOf(a); return err })
	old := states(a)
	want := map[string]string{"probe": "succeeded", "ok-1": "succeeded", "ok-2": "succeeded", "ok-3": "succeeded",
		"failed": "failed", "later": "waiting", "after-later": "waiting", "dep-later": "waiting"}
	got := byName(old)
	for name, st := range want {
		if got[name] != st {
			t.Errorf("job %s: %q, want %q (all: %v)", name, got[name], st, got)
		}
	}
	if len(old) != 14 {
		t.Errorf("%d jobs, want the fixture's 14: %v", len(old), old)
	}
	var sched struct{ Spec struct{ Name, Cron string } }
	if err := getJSON(a.url("/v1/schedules/nightly"), &sched); err != nil || sched.Spec.Name != "nightly" || sched.Spec.Cron != "0 3 * * *" {
		t.Errorf("the schedule: %v %+v", err, sched)
	}
	// This build's features on the old state: an array runs; the old
	// waiting job's cancel decides its after and depends_on children.
	cli := cliAt(t, bin, a.url(""))
	arr, err := cli("submit", "--array", "0-2", "--", "true")
	if err != nil {
		t.Fatalf("an array on the old state: %v %s", err, arr)
	}
	waitJobState(t, a, arr, "succeeded")
	var laterID string
	for k := range old {
		if strings.HasPrefix(k, "later ") {
			laterID = strings.Fields(k)[1]
		}
	}
	if out, err := cli("job", "cancel", laterID); err != nil {
		t.Fatalf("cancel %s: %v %s", laterID, err, out)
	}
	eventually(t, systemTimeout, "children decided", func() error {
		got := byName(states(a))
		if got["after-later"] != "cancelled" || got["dep-later"] != "skipped" {
			return fmt.Errorf("after-later %s, dep-later %s", got["after-later"], got["dep-later"])
		}
		return nil
	})
	a.term(t)

	// Without its state file: the previous build's log replayed from its
	// first entry gives the same jobs in the same states.
	root = unpack()
	if err := os.Remove(filepath.Join(root, "n1", "fsm.db")); err != nil {
		t.Fatal(err)
	}
	b := startAgent(t, bin, "n1", filepath.Join(root, "n1"), prevBuildBase, "--default-driver", "process")
	eventually(t, systemTimeout, "agent leads after replay", func() error { _, err := leaderOf(b); return err })
	if replayed := states(b); !maps.Equal(replayed, old) {
		t.Errorf("replayed from the log: %v\nwant %v", replayed, old)
	}

	// The previous build's backup: inspected, and restored over the jobs.
	snap := filepath.Join(root, "backup.snap")
	r := runForeman(t, bin, b.url(""), "operator", "snapshot", "inspect", "--json", snap)
	var info struct{ Counts struct{ Jobs int } }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &info) != nil || info.Counts.Jobs != 14 {
		t.Fatalf("inspect the previous build's backup: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if _, err := cliAt(t, bin, b.url(""))("submit", "--", "true"); err != nil {
		t.Fatal(err)
	}
	if r := runForeman(t, bin, b.url(""), "operator", "snapshot", "restore", "--force", snap); r.code != 0 {
		t.Fatalf("restore the previous build's backup: exit %d, %q", r.code, r.stderr)
	}
	eventually(t, systemTimeout, "restored", func() error {
		if got := states(b); !maps.Equal(got, old) {
			return fmt.Errorf("after the restore: %v", got)
		}
		return nil
	})
}
