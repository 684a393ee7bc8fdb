package systest

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// `foreman operator raft dump` prints a stopped agent's raft log with each
// command's payload decoded: the submit and the placement of a job are
// there, in index order, under the job's ID. While the agent runs it is
// refused (the agent holds the log's lock) with one line, and nothing of
// the log changes either way.
func TestSystemRaftDump(t *testing.T) {
	bin := foremanBin(t)
	dir := filepath.Join(t.TempDir(), "n1")
	a := startAgent(t, bin, "n1", dir, freeBase(t))
	eventually(t, systemTimeout, "agent leads", func() error { _, err := leaderOf(a); return err })
	id := submitJob(t, a, map[string]any{"name": "dumped", "command": []string{"true"}, "driver": "process"})
	waitJobState(t, a, id, "succeeded")

	r := runForeman(t, bin, "http://127.0.0.1:1", "operator", "raft", "dump", "--data-dir", dir)
	if r.code == 0 || !strings.Contains(r.stderr, "stop the agent first") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("dump of a running agent's log: exit %d, stderr %q; want a one-line refusal", r.code, r.stderr)
	}
	a.term(t)
	before := dirSums(t, dir)

	r = runForeman(t, bin, "http://127.0.0.1:1", "operator", "raft", "dump", "--data-dir", dir, "--json")
	if r.code != 0 {
		t.Fatalf("raft dump --json: exit %d: %s", r.code, r.stderr)
	}
	type entry struct {
		Index   uint64          `json:"index"`
		Term    uint64          `json:"term"`
		Type    string          `json:"type"`
		Command string          `json:"command"`
		Payload json.RawMessage `json:"payload"`
		Error   string          `json:"error"`
	}
	var prev uint64
	var submitted, placed, succeeded uint64
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var e entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if prev != 0 && e.Index != prev+1 {
			t.Fatalf("entry %d follows %d", e.Index, prev)
		}
		prev = e.Index
		if e.Term == 0 || e.Error != "" {
			t.Fatalf("entry %d: term %d, error %q", e.Index, e.Term, e.Error)
		}
		if !strings.Contains(string(e.Payload), id) {
			continue
		}
		switch {
		case strings.HasPrefix(e.Command, "submit") && submitted == 0:
			submitted = e.Index
		case e.Command == "place":
			placed = e.Index
		case strings.HasPrefix(e.Command, "report") && strings.Contains(string(e.Payload), `"succeeded"`):
			succeeded = e.Index
		}
	}
	if submitted == 0 || placed <= submitted || succeeded <= placed {
		t.Fatalf("job %s: submitted at %d, placed at %d, reported succeeded at %d; want them in that order\n%s", id, submitted, placed, succeeded, r.stdout)
	}

	r = runForeman(t, bin, "http://127.0.0.1:1", "operator", "raft", "dump", "--data-dir", dir, "--from", strconv.FormatUint(placed, 10), "--to", strconv.FormatUint(placed, 10))
	fields := strings.Split(strings.TrimSpace(r.stdout), "\t")
	if r.code != 0 || len(fields) != 6 || fields[0] != strconv.FormatUint(placed, 10) || fields[3] != "place" || !strings.Contains(fields[5], id) {
		t.Fatalf("dump of entry %d: exit %d, %q (%s)", placed, r.code, r.stdout, r.stderr)
	}
	r = runForeman(t, bin, "http://127.0.0.1:1", "operator", "raft", "dump", "--data-dir", dir, "--from", "9", "--to", "3")
	if r.code != 2 || !strings.Contains(r.stderr, "--to 3 is below --from 9") {
		t.Fatalf("--to below --from: exit %d, %q", r.code, r.stderr)
	}
	if after := dirSums(t, dir); len(after) != len(before) {
		t.Fatalf("the dump changed the data dir: %d files before, %d after", len(before), len(after))
	} else {
		for p, s := range before {
			if after[p] != s {
				t.Fatalf("the dump changed %s", p)
			}
		}
	}
}
