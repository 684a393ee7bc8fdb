package fsm

import (
	"encoding/binary"
	"math"
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
	major, v := byte(0), uint64(n)
	if n < 0 {
		major, v = 1<<5, uint64(-1-n)
	}
	switch {
	case v < 24:
		return append(b, major|byte(v))
	case v <= math.MaxUint8:
		return append(b, major|24, byte(v))
	case v <= math.MaxUint16:
		return append(b, major|25, byte(v>>8), byte(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, major|26), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(b, major|27), v)
	}
}

// decodeUsage reads a record into u. What appendUsage writes is read
// directly; anything else goes through decode, which also judges
// corruption.
func decodeUsage(b []byte, u *Usage) error {
	var out Usage
	if readUsage(b, &out) {
		*u = out
		return nil
	}
	return decode(b, u)
}

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
	if len(b) == 0 {
		return 0, nil, false
	}
	major, info := b[0]>>5, b[0]&0x1f
	if major > 1 {
		return 0, nil, false
	}
	var v uint64
	switch {
	case info < 24:
		v, b = uint64(info), b[1:]
	case info == 24 && len(b) >= 2 && b[1] >= 24:
		v, b = uint64(b[1]), b[2:]
	case info == 25 && len(b) >= 3:
		v, b = uint64(binary.BigEndian.Uint16(b[1:])), b[3:]
		if v <= math.MaxUint8 {
			return 0, nil, false
		}
	case info == 26 && len(b) >= 5:
		v, b = uint64(binary.BigEndian.Uint32(b[1:])), b[5:]
		if v <= math.MaxUint16 {
			return 0, nil, false
		}
	case info == 27 && len(b) >= 9:
		v, b = binary.BigEndian.Uint64(b[1:]), b[9:]
		if v <= math.MaxUint32 {
			return 0, nil, false
		}
	default:
		return 0, nil, false
	}
	if v > math.MaxInt64 {
		return 0, nil, false
	}
	if major == 1 {
		return -1 - int64(v), b, true
	}
	return int64(v), b, true
}
