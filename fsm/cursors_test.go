package fsm

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// TestCursorsAnswerAsTheBucket: a kept cursor's get and delete answer as
// Bucket.Get and Bucket.Delete do, after writes between its uses too.
func TestCursorsAnswerAsTheBucket(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "c.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		if _, err := b.CreateBucket([]byte("k0500x")); err != nil {
			return err
		}
		var cs cursors
		key := func(i int) []byte { return fmt.Appendf(nil, "k%04d", i) }
		// Enough keys for several levels, written between reads.
		for i := 0; i < 3000; i += 2 {
			if err := b.Put(key(i), key(i)); err != nil {
				return err
			}
			if got := cs.get(b, key(i)); string(got) != string(key(i)) {
				return fmt.Errorf("get %s after its put: %q", key(i), got)
			}
			if got := cs.get(b, key(i+1)); got != nil {
				return fmt.Errorf("get of absent %s: %q", key(i+1), got)
			}
		}
		for _, k := range [][]byte{[]byte("a"), []byte("zzz"), key(2999)} {
			if got, want := cs.get(b, k), b.Get(k); got != nil || want != nil {
				return fmt.Errorf("get of absent %s: %q (bucket: %q)", k, got, want)
			}
		}
		// An index entry's value is empty (below: in a read transaction,
		// present is not nil).
		if err := b.Put([]byte("k0700x"), nil); err != nil {
			return err
		}
		if got, want := cs.get(b, []byte("k0700x")), b.Get([]byte("k0700x")); (got == nil) != (want == nil) || len(got) != 0 {
			return fmt.Errorf("get of an empty value: %#v, bucket %#v", got, want)
		}
		if got := cs.get(b, []byte("k0500x")); got != nil {
			return fmt.Errorf("get of a nested bucket's key: %q, want nil", got)
		}
		if err := cs.delete(b, []byte("k0500x")); !errors.Is(err, bolterrors.ErrIncompatibleValue) {
			return fmt.Errorf("delete of a nested bucket's key: %v", err)
		}
		for i := 0; i < 3000; i += 3 {
			if err := cs.delete(b, key(i)); err != nil {
				return err
			}
			if b.Get(key(i)) != nil || cs.get(b, key(i)) != nil {
				return fmt.Errorf("%s still there after delete", key(i))
			}
		}
		for i := 0; i < 3000; i++ {
			if got, want := cs.get(b, key(i)), b.Get(key(i)); string(got) != string(want) {
				return fmt.Errorf("get %s: %q, bucket %q", key(i), got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		var cs cursors
		b := tx.Bucket([]byte("b"))
		for _, k := range []string{"k0700x", "k0002", "k0003", "k0500x"} {
			if got, want := cs.get(b, []byte(k)), b.Get([]byte(k)); string(got) != string(want) || (got == nil) != (want == nil) {
				return fmt.Errorf("read transaction, get %s: %#v, bucket %#v", k, got, want)
			}
		}
		if cs.get(b, []byte("k0700x")) == nil {
			return fmt.Errorf("read transaction: an empty value read as absent")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
