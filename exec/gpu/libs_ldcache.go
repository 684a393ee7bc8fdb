package gpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
)

// The dynamic loader's cache, /etc/ld.so.cache, in glibc's "new" format
// (glibc-ld.so.cache1.1, the only one written since glibc 2.32; an old-format
// prefix is skipped). Read to find the driver's libraries the way the loader
// would (libnvidia-container reads it too, src/ldcache.c), and written to
// give a container a cache that also lists them (toolkit: update-ldcache).
const (
	ldcacheMagic   = "glibc-ld.so.cache1.1"
	ldcacheHeader  = 48 // magic+version 20, nlibs, len_strings, flags+3, extension_offset, 3 unused
	ldcacheEntry   = 24 // int32 flags; uint32 key, value, osversion; uint64 hwcap
	ldcacheLittle  = 2  // header flags: cache_file_new_flags_endian_little
	hwcapExtension = 1 << 62
)

// LDEntry is one library the cache lists.
type LDEntry struct {
	Name  string // the name looked up: "libcuda.so.1"
	Path  string // the file: "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
	Flags int32  // type and architecture (0x0303: libc6, x86-64)
	HWCap uint64
}

// ParseLDCache returns the entries of an ld.so.cache in file order (the
// loader's search order for equal names).
func ParseLDCache(b []byte) ([]LDEntry, error) {
	i := bytes.Index(b, []byte(ldcacheMagic))
	if i < 0 {
		return nil, fmt.Errorf("%w: ld.so.cache: no %q header", ErrBadRoot, ldcacheMagic)
	}
	b = b[i:] // offsets are relative to the new-format header
	if len(b) < ldcacheHeader {
		return nil, fmt.Errorf("%w: ld.so.cache: truncated header", ErrBadRoot)
	}
	le := binary.LittleEndian
	n := le.Uint32(b[20:])
	if uint64(n) > uint64(len(b)-ldcacheHeader)/ldcacheEntry {
		return nil, fmt.Errorf("%w: ld.so.cache: %d entries do not fit in %d bytes", ErrBadRoot, n, len(b))
	}
	str := func(off uint32) (string, bool) {
		if uint64(off) >= uint64(len(b)) {
			return "", false
		}
		s, _, ok := bytes.Cut(b[off:], []byte{0})
		return string(s), ok
	}
	out := make([]LDEntry, 0, n)
	for k := range int(n) {
		e := b[ldcacheHeader+k*ldcacheEntry:]
		name, ok1 := str(le.Uint32(e[4:]))
		path, ok2 := str(le.Uint32(e[8:]))
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%w: ld.so.cache: entry %d points outside the file", ErrBadRoot, k)
		}
		out = append(out, LDEntry{Name: name, Path: path, Flags: int32(le.Uint32(e[0:])), HWCap: le.Uint64(e[16:])})
	}
	return out, nil
}

// EncodeLDCache writes entries as an ld.so.cache the loader can search: it
// binary-searches, so they are sorted as ldconfig sorts them. Entries of
// glibc-hwcaps subdirectories are dropped (they point into an extension
// section this writer does not produce).
func EncodeLDCache(entries []LDEntry) []byte {
	es := slices.DeleteFunc(slices.Clone(entries), func(e LDEntry) bool { return e.HWCap&hwcapExtension != 0 })
	slices.SortStableFunc(es, func(a, b LDEntry) int {
		if c := libcmp(b.Name, a.Name); c != 0 {
			return c
		}
		return int(b.Flags) - int(a.Flags)
	})
	le := binary.LittleEndian
	strStart := ldcacheHeader + len(es)*ldcacheEntry
	var strs bytes.Buffer
	offsets := map[string]uint32{}
	intern := func(s string) uint32 {
		if off, ok := offsets[s]; ok {
			return off
		}
		off := uint32(strStart + strs.Len())
		strs.WriteString(s)
		strs.WriteByte(0)
		offsets[s] = off
		return off
	}
	out := make([]byte, strStart)
	copy(out, ldcacheMagic)
	le.PutUint32(out[20:], uint32(len(es)))
	out[28] = ldcacheLittle
	for k, e := range es {
		p := out[ldcacheHeader+k*ldcacheEntry:]
		le.PutUint32(p[0:], uint32(e.Flags))
		le.PutUint32(p[4:], intern(e.Name))
		le.PutUint32(p[8:], intern(e.Path))
		le.PutUint64(p[16:], e.HWCap)
	}
	le.PutUint32(out[24:], uint32(strs.Len()))
	return append(out, strs.Bytes()...)
}

// libcmp is glibc's _dl_cache_libcmp: runs of digits compare as numbers,
// so libfoo.so.10 sorts after libfoo.so.9.
func libcmp(p1, p2 string) int {
	i, j := 0, 0
	digit := func(s string, k int) bool { return k < len(s) && s[k] >= '0' && s[k] <= '9' }
	at := func(s string, k int) int {
		if k < len(s) {
			return int(s[k])
		}
		return 0
	}
	for i < len(p1) {
		switch {
		case digit(p1, i) && digit(p2, j):
			v1, v2 := 0, 0
			for ; digit(p1, i); i++ {
				v1 = v1*10 + int(p1[i]-'0')
			}
			for ; digit(p2, j); j++ {
				v2 = v2*10 + int(p2[j]-'0')
			}
			if v1 != v2 {
				return v1 - v2
			}
		case digit(p1, i):
			return 1
		case digit(p2, j):
			return -1
		case int(p1[i]) != at(p2, j):
			return int(p1[i]) - at(p2, j)
		default:
			i++
			j++
		}
	}
	return -at(p2, j)
}
