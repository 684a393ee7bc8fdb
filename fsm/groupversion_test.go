package fsm

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// A state file whose queued_by_group keys predate namespace and user in
// the placement group (no placement_group_version) is re-indexed at Open.
func TestOpenRebuildsOldPlacementGroups(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	f, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, f: f, now: t0}
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: jobID(1), Spec: JobSpec{Command: []string{"x"}, Namespace: "team", User: "nobody"}}}})
	want := h.hash()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// What an older binary left: the job's entry under the old group key.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketMeta).Delete(metaGroupVersion); err != nil {
			return err
		}
		b := tx.Bucket(bucketQueuedByGroup)
		var keys [][]byte
		_ = b.ForEach(func(k, _ []byte) error { keys = append(keys, append([]byte(nil), k...)); return nil })
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
			old := append([]byte(nil), k...)
			old[0] ^= 0xff // another group hash
			if err := b.Put(old, nil); err != nil {
				return err
			}
		}
		return nil
	})
	_ = db.Close()
	if err != nil {
		t.Fatal(err)
	}
	f, err = Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	checkIndexes(t, f)
	if _, got, _ := f.StateHash(); got != want {
		t.Fatalf("state hash after the rebuild %s, want %s", got, want)
	}
}
