package exec

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// TestArtifacts: what a job leaves under $FOREMAN_ARTIFACTS is listed in
// its report in path order within the per-attempt cap (the rest, and
// anything not a regular file, is deleted with a warning); OpenArtifact
// serves only files inside the directory; a child gets a parent's
// artifacts under $FOREMAN_INPUTS/<parent>/artifacts/, or fails to start
// naming the node when they cannot be fetched; the node cap evicts the
// oldest attempt's artifacts.
func TestArtifacts(t *testing.T) {
	state := newFakeState()
	cfg := testConfig(t, dataDir(t))
	cfg.ArtifactsMaxBytes = 100
	cfg.ArtifactsNodeMaxBytes = 50
	h := startWorker(t, state, cfg)

	state.assign("art", fsm.JobSpec{Command: sh(`cd "$FOREMAN_ARTIFACTS" && mkdir sub && printf 0123456789 > a.txt &&
		head -c 20 /dev/zero > sub/b.txt && head -c 200 /dev/zero > big.bin && ln -s /etc/passwd link &&
		ln -s /etc dirlink && mkfifo fifo`)})
	r := h.waitFinal(t, "art", waitShort)
	want := []fsm.Artifact{{Path: "a.txt", Size: 10}, {Path: "sub/b.txt", Size: 20}}
	if r.State != fsm.AttemptSucceeded || len(r.Artifacts) != 2 || r.Artifacts[0] != want[0] || r.Artifacts[1] != want[1] {
		t.Fatalf("report: %s %+v (%s)", r.State, r.Artifacts, r.StderrTail)
	}
	if !strings.Contains(r.ArtifactsWarning, "3 artifacts removed: not regular") || !strings.Contains(r.ArtifactsWarning, "1 artifacts removed: over the per-attempt cap") {
		t.Errorf("warning %q", r.ArtifactsWarning)
	}
	f, err := h.w.OpenArtifact("art", 1, "sub/b.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if len(b) != 20 {
		t.Errorf("sub/b.txt: %d bytes", len(b))
	}
	for _, bad := range []string{"../task.json", "link", "dirlink/passwd", "big.bin", "/etc/passwd", "sub/../../task.json"} {
		if f, err := h.w.OpenArtifact("art", 1, bad); !errors.Is(err, ErrNoSuchArtifact) {
			if f != nil {
				f.Close()
			}
			t.Errorf("OpenArtifact(%q): %v, want ErrNoSuchArtifact", bad, err)
		}
	}

	state.assign("child", fsm.JobSpec{Command: sh(`wc -c < "$FOREMAN_INPUTS/p/artifacts/sub/b.txt" | tr -d ' ' > "$FOREMAN_RESULT"; cat "$FOREMAN_INPUTS/p/artifacts/a.txt" >> "$FOREMAN_RESULT"`)},
		func(a *Assignment) {
			a.Inputs = []Input{{Name: "p", JobID: "art", Attempt: 1, Node: "n1", Artifacts: want}}
		})
	if r := h.waitFinal(t, "child", waitShort); r.State != fsm.AttemptSucceeded || string(r.Result) != "20\n0123456789" {
		t.Fatalf("child: %s %q (%s %s)", r.State, r.Result, r.Reason, r.StderrTail)
	}
	state.assign("orphan", fsm.JobSpec{Command: []string{"true"}}, func(a *Assignment) {
		a.Inputs = []Input{{Name: "p", JobID: "gone", Attempt: 1, Node: "n2", Artifacts: want}}
	})
	if r := h.waitFinal(t, "orphan", waitShort); r.State != fsm.AttemptFailed || !strings.Contains(r.Reason, "node n2") {
		t.Fatalf("child of an unreachable parent: %s %q", r.State, r.Reason)
	}

	// 30 bytes kept of "art", 40 more here: over the node's 50, so the
	// older attempt's artifacts go.
	state.assign("newer", fsm.JobSpec{Command: sh(`head -c 40 /dev/zero > "$FOREMAN_ARTIFACTS/x"`)})
	if r := h.waitFinal(t, "newer", waitShort); len(r.Artifacts) != 1 {
		t.Fatalf("newer: %+v", r.Artifacts)
	}
	deadline := time.Now().Add(waitShort)
	for {
		_, errOld := os.Stat(artifactsDir(h.w.AttemptDir("art", 1)))
		_, errNew := os.Stat(artifactsDir(h.w.AttemptDir("newer", 1)) + "/x")
		if errors.Is(errOld, os.ErrNotExist) && errNew == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node cap: old artifacts %v, new %v", errOld, errNew)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
