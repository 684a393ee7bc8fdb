package fsm

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
)

// cursors keeps one cursor per bucket for a transaction, for the reads
// and deletes on the apply path and for the loops that read a record per
// index entry. bbolt's Bucket.Get and Bucket.Delete make
// a new cursor on every call, whose search stack then grows from nothing
// level by level: about four heap objects per call, a quarter of all the
// objects a leader allocated under load (an allocation profile of
// `foreman bench nodes`). A kept cursor's stack keeps its capacity.
// Seek repositions the cursor from the root every time, so a write since
// the last use does not matter (bbolt asks for exactly that).
type cursors struct {
	buckets [8]*bolt.Bucket
	cs      [8]*bolt.Cursor
	n       int
}

// of is b's kept cursor. A transaction touches a few buckets, so they are
// kept in place (a map would be one more allocation for a one-job batch);
// past eight, a bucket's cursor is made per call, as bbolt does.
func (cs *cursors) of(b *bolt.Bucket) *bolt.Cursor {
	for i := range cs.n {
		if cs.buckets[i] == b {
			return cs.cs[i]
		}
	}
	c := b.Cursor()
	if cs.n < len(cs.buckets) {
		cs.buckets[cs.n], cs.cs[cs.n] = b, c
		cs.n++
	}
	return c
}

// get is b.Get(k): the value, nil when k is absent or names a nested
// bucket.
func (cs *cursors) get(b *bolt.Bucket, k []byte) []byte {
	ck, v := cs.of(b).Seek(k)
	if !bytes.Equal(ck, k) {
		return nil
	}
	return v
}

// delete is b.Delete(k): nothing when k is absent, ErrIncompatibleValue
// when it names a nested bucket.
func (cs *cursors) delete(b *bolt.Bucket, k []byte) error {
	c := cs.of(b)
	if ck, _ := c.Seek(k); !bytes.Equal(ck, k) {
		return nil
	}
	return c.Delete()
}
