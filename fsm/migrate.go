package fsm

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Schema version 1 stored every record as JSON; version 2 stores CBOR
// (codec.go). Keys and indexes did not change. openDB upgrades a version 1
// file (a state file or a raft snapshot written by an older binary) in
// place, in the same transaction that records the new version, so a crash
// leaves either the old file or the new one. The conversion is a function
// of the file alone, so every node that upgrades the same state gets the
// same bytes.

// recordBuckets lists the buckets whose values are records, with a
// constructor for each record type.
var recordBuckets = []struct {
	name []byte
	new  func() any
}{
	{bucketJobs, func() any { return new(Job) }},
	{bucketAttempts, func() any { return new(Attempt) }},
	{bucketNodes, func() any { return new(Node) }},
	{bucketIdempotency, func() any { return new(idemRecord) }},
	{bucketQueues, func() any { return new(Queue) }},
}

// migrateV1 re-encodes every JSON record of a schema version 1 file.
func migrateV1(tx *bolt.Tx) error {
	for _, rb := range recordBuckets {
		b := tx.Bucket(rb.name)
		type kv struct{ k, v []byte }
		var out []kv
		err := b.ForEach(func(k, v []byte) error {
			rec := rb.new()
			if err := json.Unmarshal(v, rec); err != nil {
				return fmt.Errorf("%w: schema 1 record %s/%q: %v", ErrCorrupt, rb.name, k, err)
			}
			enc, err := encode(rec)
			if err != nil {
				return err
			}
			out = append(out, kv{append([]byte(nil), k...), enc})
			return nil
		})
		if err != nil {
			return err
		}
		// Values are replaced after the walk: bbolt forbids writes
		// during ForEach.
		for _, e := range out {
			if err := b.Put(e.k, e.v); err != nil {
				return err
			}
		}
	}
	return nil
}
