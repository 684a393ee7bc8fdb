package systest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/foreman-sched/foreman/fsm"
)

// dirSums is every file of dir (relative path → sha256).
func dirSums(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = sha256.Sum256(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A data dir written by a newer foreman (its state file says schema N+1,
// written by v9.9.9) stops this agent at start with one line naming both
// versions, and no file of the dir changes: no rebuild, no move aside.
func TestSystemNewerDataDirRefused(t *testing.T) {
	bin := foremanBin(t)
	root := t.TempDir()
	dir := filepath.Join(root, "n1")
	a := startAgent(t, bin, "n1", dir, freeBase(t))
	eventually(t, systemTimeout, "agent leads", func() error { _, err := leaderOf(a); return err })
	id := submitJob(t, a, map[string]any{"name": "before", "command": []string{"true"}, "driver": "process"})
	// The attempt's supervisor outlives the agent by design and writes
	// result.json when the command ends; the dir is still only once the job has.
	waitJobState(t, a, id, "succeeded")
	a.term(t)

	// What a newer binary leaves: its schema and version in the state file.
	db, err := bolt.Open(filepath.Join(dir, "fsm.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte("meta"))
		if err := meta.Put([]byte("schema_version"), fmt.Appendf(nil, "%d", fsm.SchemaVersion+1)); err != nil {
			return err
		}
		return meta.Put([]byte("written_by"), []byte("v9.9.9"))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	before := dirSums(t, dir)

	ctx, cancel := context.WithTimeout(context.Background(), systemTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "agent", "--name", "n1", "--data-dir", dir, "--bind", "127.0.0.1", "--port", fmt.Sprint(freeBase(t)))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("agent on a newer data dir: %v (want exit 1)\n%s", err, out)
	}
	line := strings.TrimSuffix(string(out), "\n")
	want := fmt.Sprintf("data dir %s written by schema %d (foreman v9.9.9), this binary (foreman ", dir, fsm.SchemaVersion+1)
	if strings.Contains(line, "\n") || !strings.Contains(line, want) || !strings.Contains(line, fmt.Sprintf("understands up to schema %d", fsm.SchemaVersion)) {
		t.Fatalf("agent on a newer data dir said:\n%s\nwant one line with %q", out, want)
	}
	t.Logf("refused: %s", line)
	after := dirSums(t, dir)
	if len(after) != len(before) {
		t.Errorf("files before %d, after %d", len(before), len(after))
	}
	for p, s := range before {
		if after[p] != s {
			t.Errorf("%s changed", p)
		}
	}
}
