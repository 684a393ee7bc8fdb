package fsm

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// newerFile writes a state file as a newer binary would leave it: this
// build's file (closed cleanly) with meta overridden by set.
func newerFile(t *testing.T, set map[string]string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fsm.db")
	f, err := Open(path, Options{NoSync: true, Version: "v0.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for k, v := range set {
			if err := tx.Bucket(bucketMeta).Put([]byte(k), []byte(v)); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// A file from a newer binary (a newer schema, or a log of a newer command
// version beside it) is refused in one line naming both versions, and is
// left byte for byte as it was.
func TestNewerStateRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  map[string]string
		want string
	}{
		{"schema", map[string]string{"schema_version": fmt.Sprint(SchemaVersion + 1), "written_by": "v0.9.0"},
			fmt.Sprintf("written by schema %d (foreman v0.9.0), this binary (foreman v0.1.0) understands up to schema %d; run foreman v0.9.0 or newer", SchemaVersion+1, SchemaVersion)},
		{"command version", map[string]string{"command_version": fmt.Sprint(CommandVersion + 1), "written_by": "v0.2.0"},
			fmt.Sprintf("written by command version %d (foreman v0.2.0), this binary (foreman v0.1.0) understands up to command version %d", CommandVersion+1, CommandVersion)},
		{"no writer recorded", map[string]string{"schema_version": "7", "written_by": ""},
			"written by schema 7 (a foreman that did not record its version), this binary (foreman v0.1.0) understands up to schema 2; run a newer foreman"},
		{"features", map[string]string{"features": fmt.Sprint(uint64(KnownFeatures) | 1<<40 | 1<<41), "written_by": "v0.3.0"},
			"written by foreman v0.3.0 with features 40,41 that this binary (foreman v0.1.0) does not know; run foreman v0.3.0 or newer"},
		{"not closed cleanly", map[string]string{"schema_version": "3", "written_by": "v0.3.0", "clean_shutdown": ""},
			"written by schema 3 (foreman v0.3.0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := tc.set
			if v, ok := set["written_by"]; ok && v == "" {
				delete(set, "written_by")
				path := newerFile(t, set)
				dropMeta(t, path, "written_by")
				checkRefused(t, path, tc.want)
				return
			}
			if _, ok := set["clean_shutdown"]; ok {
				delete(set, "clean_shutdown")
				path := newerFile(t, set)
				dropMeta(t, path, "clean_shutdown")
				checkRefused(t, path, tc.want)
				return
			}
			checkRefused(t, newerFile(t, set), tc.want)
		})
	}
}

func dropMeta(t *testing.T, path, key string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete([]byte(key)) }); err != nil {
		t.Fatal(err)
	}
}

func checkRefused(t *testing.T, path, want string) {
	t.Helper()
	before := fileSum(t, path)
	v, err := ReadFileVersion(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Newer(path, "v0.1.0"); !errors.Is(err, ErrNewerState) {
		t.Fatalf("ReadFileVersion %+v: Newer = %v", v, err)
	}
	_, err = Open(path, Options{NoSync: true, Version: "v0.1.0"})
	if !errors.Is(err, ErrNewerState) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Open: %v\nwant one line with %q, ErrNewerState, not ErrCorrupt", err, want)
	}
	if fileSum(t, path) != before {
		t.Fatal("the refused file changed")
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Fatalf("the dir holds %v, want the file alone", ents)
	}
}

// The version records are a migration of their own: a previous build's
// file (none of them) gets them at its first Open, the state hash does not
// move, a second Open changes nothing, an older binary's Open never lowers
// the command version, and the state itself is untouched.
func TestVersionRecordsMigration(t *testing.T) {
	h := goldenLog(t)
	want := h.hash()
	data := snapshotBytes(t, h.f)
	path := filepath.Join(t.TempDir(), "fsm.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// The golden state is this build's; make it the previous build's.
	dropMeta(t, path, "written_by")
	dropMeta(t, path, "command_version")
	if v, err := ReadFileVersion(path); err != nil || v.CommandVersion != 0 || v.WrittenBy != "" || v.Schema != SchemaVersion {
		t.Fatalf("previous build's file: %+v %v", v, err)
	}

	open := func(version string) FileVersion {
		t.Helper()
		f, err := Open(path, Options{NoSync: true, Version: version})
		if err != nil {
			t.Fatal(err)
		}
		if _, got, err := f.StateHash(); err != nil || got != want {
			t.Fatalf("state hash after Open(%s): %s %v, want %s", version, got, err, want)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		v, err := ReadFileVersion(path)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := open("v0.1.0"); v != (FileVersion{Schema: SchemaVersion, CommandVersion: CommandVersion, WrittenBy: "v0.1.0", Features: KnownFeatures}) {
		t.Fatalf("after the first Open: %+v", v)
	}
	// Every Open and Close toggles the clean-shutdown flag (and so the
	// file's pages); compare what the file holds instead.
	once := dumpFile(t, path)
	open("v0.1.0")
	if again := dumpFile(t, path); again != once {
		t.Fatalf("a second Open by the same binary changed the records:\n%s\nthen\n%s", once, again)
	}
	// A binary that understands the file but records an older command
	// version (none here: simulate with a newer record) keeps the newer.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(metaCommandVersion, []byte(fmt.Sprint(CommandVersion-1)))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if v := open("v0.1.1"); v.CommandVersion != CommandVersion || v.WrittenBy != "v0.1.1" {
		t.Fatalf("after an Open by v0.1.1: %+v", v)
	}
	// The records are node-local: a snapshot restored elsewhere hashes the same.
	var buf bytes.Buffer
	f, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf.Write(snapshotBytes(t, f))
	g, err := Open(filepath.Join(t.TempDir(), "other.db"), Options{NoSync: true, Version: "v9"})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Restore(nopCloser{bytes.NewReader(buf.Bytes())}); err != nil {
		t.Fatal(err)
	}
	if _, got, _ := g.StateHash(); got != want {
		t.Fatalf("restored elsewhere: hash %s, want %s", got, want)
	}
}

// A raft snapshot from a newer binary is refused by Restore with the same
// line, and the live state is untouched.
func TestRestoreNewerSnapshotRefused(t *testing.T) {
	path := newerFile(t, map[string]string{"schema_version": fmt.Sprint(SchemaVersion + 1), "written_by": "v0.9.0"})
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(filepath.Join(t.TempDir(), "fsm.db"), Options{NoSync: true, Version: "v0.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, before, _ := f.StateHash()
	err = f.Restore(nopCloser{bytes.NewReader(data)})
	if !errors.Is(err, ErrNewerState) || !strings.Contains(err.Error(), "(foreman v0.9.0)") {
		t.Fatalf("Restore of a newer snapshot: %v", err)
	}
	if _, after, _ := f.StateHash(); after != before {
		t.Fatal("the state changed")
	}
}

// A raft snapshot whose file names features this binary does not know is
// restored: the meta is the leader's binary, and state of a feature exists
// only once every server (this one too) advertised it. The file keeps the
// features it was given, and this binary's.
func TestRestoreSnapshotWithNewerFeatures(t *testing.T) {
	unknown := FeatureSet(1) << 40
	path := newerFile(t, map[string]string{"features": fmt.Sprint(uint64(unknown)), "written_by": "v0.3.0"})
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f, err := Open(filepath.Join(dir, "fsm.db"), Options{NoSync: true, Version: "v0.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	v, err := ReadFileVersion(filepath.Join(dir, "fsm.db"))
	if err != nil {
		t.Fatal(err)
	}
	if v.Features != unknown|KnownFeatures {
		t.Fatalf("features after restore: %b, want %b", v.Features, unknown|KnownFeatures)
	}
}

// dumpFile lists every bucket's keys and values (bar the clean-shutdown
// flag) of the closed file at path.
func dumpFile(t *testing.T, path string) string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var b strings.Builder
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
			return bk.ForEach(func(k, v []byte) error {
				if !bytes.Equal(name, bucketMeta) || !bytes.Equal(k, metaCleanShutdown) {
					fmt.Fprintf(&b, "%s/%q=%x\n", name, k, sha256.Sum256(v))
				}
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
