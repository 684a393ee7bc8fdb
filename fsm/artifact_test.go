package fsm

import (
	"fmt"
	"strings"
	"testing"
)

func TestValidArtifactPath(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"a.txt", true}, {"out/data.csv", true}, {"a/b/c/d", true}, {"..a", true}, {"a..", true},
		{"", false}, {".", false}, {"/etc/passwd", false}, {"../x", false}, {"a/../../x", false},
		{"a/..", false}, {"..", false}, {"a//b", false}, {"./a", false}, {"a/", false}, {`a\b`, false},
		{"a\x00b", false}, {strings.Repeat("x", ArtifactPathMaxLen+1), false},
	} {
		if err := ValidArtifactPath(tc.path); (err == nil) != tc.ok {
			t.Errorf("ValidArtifactPath(%q) = %v, want ok=%v", tc.path, err, tc.ok)
		}
	}
}

// TestReportArtifacts: a finish report's artifact list is kept with the
// attempt, bad entries dropped with a warning (never a failed apply), and
// a child's inputs name the parent's attempt, node and artifacts.
func TestReportArtifacts(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.submitWF("A", wfJob{name: "a"}, wfJob{name: "b", deps: []string{"a"}})
	id := wfJobID("A", "a")
	tok := h.place(id, "n1")
	many := []Artifact{{Path: "ok/1.txt", Size: 3}, {Path: "../etc/passwd", Size: 1}, {Path: "ok/1.txt", Size: 3}, {Path: "neg", Size: -1}}
	for i := range ArtifactsMaxFiles {
		many = append(many, Artifact{Path: fmt.Sprintf("f/%04d", i), Size: 1})
	}
	h.must(CmdReport, ReportAttempt{JobID: id, Attempt: 1, FencingToken: tok, Node: "n1",
		State: AttemptSucceeded, ExitCode: intp(0), Artifacts: many, ArtifactsWarning: "1 artifacts removed: symlink"})
	at := h.attempt(id, 1)
	if len(at.Artifacts) != ArtifactsMaxFiles || at.Artifacts[0] != (Artifact{Path: "ok/1.txt", Size: 3}) {
		t.Fatalf("artifacts kept: %d, first %+v", len(at.Artifacts), at.Artifacts[0])
	}
	if !strings.Contains(at.Warning, "symlink") || !strings.Contains(at.Warning, "4 artifact entries not listed") {
		t.Errorf("warning %q", at.Warning)
	}
	err := h.f.View(func(tx *Tx) error {
		spec, err := tx.JobSpec(wfJobID("A", "b"))
		if err != nil {
			return err
		}
		in, err := tx.JobInputs(spec)
		if err != nil || len(in) != 1 || in[0].Node != "n1" || in[0].Attempt != 1 || in[0].JobID != id || len(in[0].Artifacts) != ArtifactsMaxFiles {
			return fmt.Errorf("JobInputs: %d inputs, %v", len(in), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, h.f)
}
