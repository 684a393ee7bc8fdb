package fsm

import (
	"fmt"
	"math"
	"time"

	"github.com/fxamacker/cbor/v2"
)

// The record codec. Every value stored in bbolt and every raft command
// (envelope and payload) goes through encode and decode: CBOR (RFC 8949)
// in Core Deterministic Encoding, by github.com/fxamacker/cbor, which
// reads the `json` struct tags (names, omitempty, omitzero), so a new
// record field or a new command payload type needs no codec code. The
// schema version in meta (and CommandVersion for raft entries) must change
// whenever this format does.
//
// Determinism (StateHash compares files byte for byte): struct fields and
// map keys alike are written sorted by key (length first, then bytes: a
// struct's declaration order does not matter), integers and floats take
// their shortest exact form. time.Time is an RFC
// 3339 string in UTC with nanoseconds (exact round trip; a zero time is
// CBOR null, and omitzero leaves it out). Strings are written as they are,
// invalid UTF-8 included (encoding/json used to replace it), and read back
// unchanged. Duration is its int64 nanoseconds (its JSON methods are for
// the API only).
//
// Hand-written codecs. The records every job transition reads and writes
// are also encoded and decoded without reflection, which cost several
// microseconds a record: the usage record (usage_codec.go), the attempt
// (attempt_codec.go) and the job record around its raw spec
// (jobrecord_codec.go). Each writes exactly the bytes encode writes, so
// the state does not depend on which wrote it, and reads exactly those
// bytes, in that key order and shortest form; a record it does not write
// (an attempt with GPUs, artifacts, outputs, a gang task or named
// resources; a job with dependencies, a gang or an array) goes through
// encode, and one it does not read through decode, which judges
// corruption. Tests compare both codecs on random records (…MatchesEncode)
// and fuzz the readers against decode. A field added to these records
// must be added to their hand codec (the tests fail until it is).

var (
	encMode cbor.EncMode
	decMode cbor.DecMode
)

func init() {
	eo := cbor.CoreDetEncOptions()
	eo.Time = cbor.TimeRFC3339NanoUTC
	eo.TimeTag = cbor.EncTagNone
	eo.String = cbor.StringToTextString
	eo.ByteSliceLaterFormat = cbor.ByteSliceLaterFormatNone
	eo.BinaryMarshaler = cbor.BinaryMarshalerNone // the record's fields, not a type's own format
	var err error
	if encMode, err = eo.EncMode(); err != nil {
		panic(fmt.Sprintf("fsm: cbor encoder options: %v", err))
	}
	do := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF, // a duplicated field is corruption, not "last wins"
		IndefLength:       cbor.IndefLengthForbidden, // never written
		TagsMd:            cbor.TagsForbidden,        // never written
		UTF8:              cbor.UTF8DecodeInvalid,    // strings round-trip as written
		MaxNestedLevels:   64,
		MaxArrayElements:  math.MaxInt32, // a batch is bounded by the data itself: every element is >= 1 byte
		MaxMapPairs:       math.MaxInt32,
		BinaryUnmarshaler: cbor.BinaryUnmarshalerNone,
	}
	if decMode, err = do.DecMode(); err != nil {
		panic(fmt.Sprintf("fsm: cbor decoder options: %v", err))
	}
}

func encode(v any) ([]byte, error) {
	b, err := encMode.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return b, nil
}

// encodeByHand is encode(v) by a record's hand-written writer (the
// records read and written on every transition: attempt_codec.go,
// jobrecord_codec.go), or by reflection for a record it does not write.
func encodeByHand[T any](v *T, size int, write func([]byte, *T) ([]byte, bool)) ([]byte, error) {
	if b, ok := write(make([]byte, 0, size), v); ok {
		return b, nil
	}
	return encode(v)
}

// decodeByHand is decode(b, v) by a record's hand-written reader, which
// takes exactly what its writer writes; anything else goes through
// decode, which also judges corruption.
func decodeByHand[T any](b []byte, v *T, read func([]byte, *T) bool) error {
	if readHand(b, v, read) {
		return nil
	}
	return decode(b, v)
}

// readHand runs read into a zero T and keeps the result only when read
// takes all of b.
func readHand[T any](b []byte, v *T, read func([]byte, *T) bool) bool {
	var out T
	if !read(b, &out) {
		return false
	}
	*v = out
	return true
}

// decode reads one record. Anything it cannot read, trailing bytes
// included, is ErrCorrupt; it never panics on garbage.
func decode(b []byte, v any) error {
	if err := decMode.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: decode %T: %v", ErrCorrupt, v, err)
	}
	return nil
}

// decoded is the record b holds, decoded into a new T.
func decoded[T any](b []byte) (*T, error) {
	var out T
	if err := decode(b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// record is the record b of the what named key holds (a bucket's
// value), or ErrNotFound naming it when b is nil (no such key).
func record[T any](b []byte, what, key string) (*T, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: %s %q", ErrNotFound, what, key)
	}
	return decoded[T](b)
}

// idemRecord is the value stored under an idempotency key.
type idemRecord struct {
	JobID      string    `json:"job_id"`
	RecordedAt time.Time `json:"recorded_at"`
}

// encodeIdemRecord is encode(idemRecord{jobID, at}) without reflection (a
// submit with keys writes one per job), where atText is the non-zero at as
// the codec writes it (rfc3339Text). TestEncodeIdemRecord compares both.
func encodeIdemRecord(jobID, atText string) []byte {
	b := make([]byte, 0, 1+7+9+len(jobID)+12+9+len(atText))
	b = append(b, 0xa2) // a map of 2; keys in length-first order
	b = appendCBORText(b, "job_id")
	b = appendCBORText(b, jobID)
	b = appendCBORText(b, "recorded_at")
	return appendCBORText(b, atText)
}

// rfc3339Text is how the codec writes a non-zero time (TimeRFC3339NanoUTC).
func rfc3339Text(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// appendCBORText appends s as a CBOR text string (major type 3, shortest
// length head).
func appendCBORText(b []byte, s string) []byte {
	return append(appendCBORHead(b, 3<<5, uint64(len(s))), s...)
}

// Queue is a named concurrency limit.
type Queue struct {
	Name       string `json:"name"`
	MaxRunning int    `json:"max_running"`
}
