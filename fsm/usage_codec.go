package fsm

import (
	"bytes"
	"encoding/binary"
	"math"
	"time"
)

// A usage record is written on every attempt's end, so it is encoded and
// decoded by hand rather than by reflection: the bytes are exactly what
// encode(&Usage{...}) writes (TestUsageCodecMatchesEncode), so the state
// and its hash do not depend on which wrote it.

// usageFields are Usage's keys in the order the codec writes them:
// Core Deterministic, shorter first, then bytewise.
var usageFields = [...]string{
	"gpu_ms", "wall_ms", "attempts", "cpu_used_ms", "cpu_requested_ms",
	"gpu_memory_mib_ms", "peak_memory_bytes", "memory_used_mib_ms", "memory_requested_mib_ms",
}

// usageRecordMax bounds an encoded record: the map head, the keys and
// nine 9-byte integers.
const usageRecordMax = 1 + 9*(1+24+9)

func usageValues(u *Usage) [len(usageFields)]*int64 {
	return [...]*int64{&u.GPUMs, &u.WallMs, &u.Attempts, &u.CPUUsedMs, &u.CPUReqMs,
		&u.GPUMemMiBMs, &u.PeakMemoryB, &u.MemUsedMiBMs, &u.MemReqMiBMs}
}

// appendUsage appends the record of u to b.
func appendUsage(b []byte, u *Usage) []byte {
	b = append(b, 0xa0|byte(len(usageFields))) // a map of 9
	for i, p := range usageValues(u) {
		b = appendCBORText(b, usageFields[i])
		b = appendCBORInt(b, *p)
	}
	return b
}

// appendCBORInt appends n as a CBOR integer (major type 0 or 1, shortest
// head).
func appendCBORInt(b []byte, n int64) []byte {
	if n < 0 {
		return appendCBORHead(b, 1<<5, uint64(-1-n))
	}
	return appendCBORHead(b, 0, uint64(n))
}

// appendCBORHead appends an item's head in its shortest form: major is
// the major type shifted into place (3<<5 for a text string), v the
// argument.
func appendCBORHead(b []byte, major byte, v uint64) []byte {
	switch {
	case v < 24:
		return append(b, major|byte(v))
	case v <= math.MaxUint8:
		return append(b, major|24, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, major|25), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, major|26), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(b, major|27), v)
	}
}

// The simple values the codec writes for false, true (and null).
const (
	cborFalse = 0xf4
	cborTrue  = 0xf5
)

func appendCBORBool(b []byte, v bool) []byte {
	if v {
		return append(b, cborTrue)
	}
	return append(b, cborFalse)
}

// appendCBORTime appends a non-zero t as the codec writes it (rfc3339Text),
// or null for the zero time.
func appendCBORTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, cborNull)
	}
	var buf [64]byte
	s := t.UTC().AppendFormat(buf[:0], time.RFC3339Nano)
	return append(appendCBORHead(b, 3<<5, uint64(len(s))), s...)
}

// decodeUsage is decode(b, u).
func decodeUsage(b []byte, u *Usage) error { return decodeByHand(b, u, readUsage) }

// readUsage reads exactly what appendUsage writes (false: anything else).
func readUsage(b []byte, u *Usage) bool {
	if len(b) == 0 || b[0] != 0xa0|byte(len(usageFields)) {
		return false
	}
	b = b[1:]
	for i, p := range usageValues(u) {
		f := usageFields[i]
		if len(b) < 1+len(f) || b[0] != 0x60|byte(len(f)) || string(b[1:1+len(f)]) != f {
			return false
		}
		b = b[1+len(f):]
		n, rest, ok := readCBORInt(b)
		if !ok {
			return false
		}
		*p, b = n, rest
	}
	return len(b) == 0
}

// readCBORInt reads one integer in its shortest form (the only form the
// codec writes) that fits an int64.
func readCBORInt(b []byte) (int64, []byte, bool) {
	major, v, b, ok := cborHeadShortest(b)
	if !ok || major > 1 || v > math.MaxInt64 {
		return 0, nil, false
	}
	if major == 1 {
		return -1 - int64(v), b, true
	}
	return int64(v), b, true
}

// cborHeadShortest is cborHead for a head in its shortest form only (the
// only form the codec writes).
func cborHeadShortest(b []byte) (major byte, arg uint64, rest []byte, ok bool) {
	if len(b) == 0 {
		return 0, 0, nil, false
	}
	major, arg, rest, ok = cborHead(b)
	if !ok {
		return 0, 0, nil, false
	}
	switch b[0] & 0x1f {
	case 24:
		ok = arg >= 24
	case 25:
		ok = arg > math.MaxUint8
	case 26:
		ok = arg > math.MaxUint16
	case 27:
		ok = arg > math.MaxUint32
	}
	return major, arg, rest, ok
}

// cborHead reads an item's head: major type, argument, the rest. Only
// definite lengths (the codec never writes indefinite ones).
func cborHead(b []byte) (major byte, arg uint64, rest []byte, ok bool) {
	if len(b) == 0 {
		return 0, 0, nil, false
	}
	major, info := b[0]>>5, b[0]&0x1f
	switch {
	case info < 24:
		return major, uint64(info), b[1:], true
	case info == 24 && len(b) >= 2:
		return major, uint64(b[1]), b[2:], true
	case info == 25 && len(b) >= 3:
		return major, uint64(binary.BigEndian.Uint16(b[1:])), b[3:], true
	case info == 26 && len(b) >= 5:
		return major, uint64(binary.BigEndian.Uint32(b[1:])), b[5:], true
	case info == 27 && len(b) >= 9:
		return major, binary.BigEndian.Uint64(b[1:]), b[9:], true
	}
	return 0, 0, nil, false
}

// cborSkip returns what follows one well-formed item (no tags, no
// indefinite lengths, at most depth levels of nesting).
func cborSkip(b []byte, depth int) ([]byte, bool) {
	major, arg, b, ok := cborHead(b)
	if !ok || depth <= 0 {
		return nil, false
	}
	switch major {
	case 0, 1, 7: // integers; simple values and floats carry their value in the head
		return b, true
	case 2, 3:
		if arg > uint64(len(b)) {
			return nil, false
		}
		return b[arg:], true
	case 4, 5:
		n := arg
		if major == 5 {
			if n > uint64(len(b)) {
				return nil, false
			}
			n *= 2
		}
		if n > uint64(len(b)) { // every item is at least a byte
			return nil, false
		}
		for range n {
			if b, ok = cborSkip(b, depth-1); !ok {
				return nil, false
			}
		}
		return b, true
	}
	return nil, false // tags: never written
}

// cborText reads a text string (its bytes, not copied).
func cborText(b []byte) ([]byte, []byte, bool) {
	major, n, b, ok := cborHead(b)
	if !ok || major != 3 || n > uint64(len(b)) {
		return nil, nil, false
	}
	return b[:n], b[n:], true
}

// canonicalLess is the codec's map key order: shorter first, then bytes.
func canonicalLess(a, b []byte) bool {
	return len(a) < len(b) || (len(a) == len(b) && bytes.Compare(a, b) < 0)
}

// labelValues are the values of the label keys accounting splits by:
// v[i] of the i-th key, ok[i] whether the job has it.
type labelValues struct {
	v  [MaxUsageLabels]string
	ok [MaxUsageLabels]bool
}

// specLabels reads the values of the label keys want from a stored spec.
// The labels are found by walking the spec's top-level keys, without
// decoding the rest; a spec the codec would not have written that way
// (keys out of order or repeated, tags, indefinite lengths) is decoded
// instead. TestSpecLabelsMatchesDecode compares both.
func specLabels(spec []byte, want []string) (labelValues, error) {
	if lv, ok := scanSpecLabels(spec, want); ok {
		return lv, nil
	}
	var s usageSpecLabels
	if err := decode(spec, &s); err != nil {
		return labelValues{}, err
	}
	return pickLabels(s.Labels, want), nil
}

func pickLabels(labels map[string]string, want []string) labelValues {
	var lv labelValues
	for i, k := range want {
		lv.v[i], lv.ok[i] = labels[k]
	}
	return lv
}

// scanSpecLabels is specLabels' walk (false: decode instead).
func scanSpecLabels(b []byte, want []string) (labelValues, bool) {
	var lv labelValues
	major, n, b, ok := cborHead(b)
	if !ok || major != 5 || n > uint64(len(b)) {
		return lv, false
	}
	var prev []byte
	for i := range n {
		k, rest, ok := cborText(b)
		if !ok || (i > 0 && !canonicalLess(prev, k)) {
			return lv, false
		}
		prev, b = k, rest
		if string(k) != "labels" {
			// The decoder allows 64 levels, the spec's map being the first.
			if b, ok = cborSkip(b, 62); !ok {
				return lv, false
			}
			continue
		}
		if len(b) > 0 && b[0] == cborNull {
			b = b[1:]
			continue
		}
		lmajor, m, rest, ok := cborHead(b)
		if !ok || lmajor != 5 || m > uint64(len(rest)) {
			return lv, false
		}
		b = rest
		var lprev []byte
		for j := range m {
			lk, rest, ok := cborText(b)
			if !ok || (j > 0 && !canonicalLess(lprev, lk)) {
				return lv, false
			}
			v, rest, ok := cborText(rest)
			if !ok {
				return lv, false
			}
			lprev, b = lk, rest
			for w, key := range want {
				if key == string(lk) {
					lv.v[w], lv.ok[w] = string(v), true
				}
			}
		}
	}
	return lv, len(b) == 0
}
