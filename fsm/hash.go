package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"

	bolt "go.etcd.io/bbolt"
)

// StateHash returns the applied index and a sha256 over every bucket's
// keys and values in key order, leaving out node-local meta keys. Two
// nodes that applied the same log agree on it at the same index.
func (f *FSM) StateHash() (index uint64, sum string, err error) {
	return f.stateHash(nil)
}

// stateHash leaves out the buckets in skip (tests pin older layouts).
func (f *FSM) stateHash(skip map[string]bool) (index uint64, sum string, err error) {
	err = f.View(func(t *Tx) error {
		index = t.AppliedIndex()
		h := sha256.New()
		err := t.tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if skip[string(name)] {
				return nil
			}
			writeLV(h, name)
			local := string(name) == string(bucketMeta)
			return b.ForEach(func(k, v []byte) error {
				if local && nodeLocalMeta[string(k)] {
					return nil
				}
				writeLV(h, k)
				writeLV(h, v)
				return nil
			})
		})
		sum = hex.EncodeToString(h.Sum(nil))
		return err
	})
	return index, sum, err
}

// writeLV writes a length-prefixed field so ("ab","c") and ("a","bc")
// hash differently.
func writeLV(h hash.Hash, b []byte) {
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
	h.Write(b)
}
