package fsm

import (
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// liveSet is every live attempt, in the live index's order (node, then
// attempt key). The leader's scheduler reads all of them on every plan;
// with 5,000 clients that read (a lookup and a memo check per attempt)
// was a tenth of the leader's CPU, though between two plans only the few
// attempts placed or finished differ, and it grows with the fleet: at
// 32 slots on 5,000 hosts it would be 160,000 lookups a plan.
//
// So one set is kept as a versionedMemo (versioned.go): the applier
// records the key of every write to the attempts bucket and to the live
// index, and a view that is not the memo's own patches the memo with the
// attempts under those keys as its transaction holds them. Never changed
// once built: LiveAttempts gives each caller a copy of each attempt, and
// LiveAttemptsShared shares it read-only.
type liveSet struct {
	keys []string  // live index keys: node + "\x00" + attempt key, sorted
	atts []Attempt // atts[i] is the attempt keys[i] names
}

type liveSetMemo = versionedMemo[*liveSet]

// A memo patched with more keys than it holds plus liveSetPatchSlack is
// read from the index instead (a restore, a burst of placements).
const liveSetPatchSlack = 256

// noteLive records a write of key k when b is the attempts bucket (an
// attempt key) or the live index (a live key: it holds a 0 byte, which
// attempt keys never do).
func (a *applier) noteLive(b *bolt.Bucket, k []byte) {
	if b == a.attempts || b == a.live {
		a.liveKeys = append(a.liveKeys, string(k))
	}
}

// liveSetNow is every live attempt as this view holds it: the memo when it
// is this view's own, else the memo patched, else read from the index.
func (t *Tx) liveSetNow() (*liveSet, error) {
	version, exact := t.lives.version(t.livesDone, t.AppliedIndex)
	if exact {
		if set, ok := t.lives.get(version); ok {
			return set, nil
		}
	}
	var set *liveSet
	var err error
	if memo, keys, ok := t.lives.patchable(version, exact); ok && len(keys) <= len(memo.keys)+liveSetPatchSlack {
		t.lives.patched.Add(1)
		set, err = t.patchLiveSet(memo, keys)
	} else {
		set = &liveSet{}
		err = t.scanLive(nil, func(k []byte, at *Attempt) bool {
			set.keys = append(set.keys, string(k))
			set.atts = append(set.atts, *at)
			return true
		})
	}
	if err != nil {
		return nil, err
	}
	if exact {
		t.lives.put(version, set)
	}
	return set, nil
}

// patchLiveSet is memo with every live attempt that keys (written since
// the memo's version) may have added, changed or removed read again from
// this view. An attempt key names its attempt's live key through the
// record's node (the applier writes the live entry under it, and a node
// never changes); an attempt gone since had its live entry removed with
// it, and that live key is among keys too.
func (t *Tx) patchLiveSet(memo *liveSet, keys []string) (*liveSet, error) {
	attempts, index := t.tx.Bucket(bucketAttempts), t.tx.Bucket(bucketLiveByNode)
	var cs cursors
	read := map[string]*Attempt{} // attempt key → as this view holds it
	get := func(ak string) (*Attempt, error) {
		if at, ok := read[ak]; ok {
			return at, nil
		}
		var at *Attempt
		if v := cs.get(attempts, []byte(ak)); v != nil {
			at = new(Attempt)
			if err := decodeAttempt(v, at); err != nil {
				return nil, err
			}
		}
		read[ak] = at
		return at, nil
	}
	var touched []string // live keys to read again
	for _, k := range keys {
		if strings.IndexByte(k, 0) >= 0 {
			touched = append(touched, k)
			continue
		}
		at, err := get(k)
		if err != nil {
			return nil, err
		}
		if at != nil {
			touched = append(touched, at.Node+"\x00"+k)
		}
	}
	slices.Sort(touched)
	touched = slices.Compact(touched)

	out := &liveSet{keys: make([]string, 0, len(memo.keys)+len(touched)), atts: make([]Attempt, 0, len(memo.keys)+len(touched))}
	i := 0
	for _, lk := range touched {
		j := i
		for j < len(memo.keys) && memo.keys[j] < lk {
			j++
		}
		out.keys, out.atts = append(out.keys, memo.keys[i:j]...), append(out.atts, memo.atts[i:j]...)
		i = j
		if i < len(memo.keys) && memo.keys[i] == lk {
			i++ // replaced (or dropped) by what this view holds
		}
		if cs.get(index, []byte(lk)) == nil {
			continue
		}
		ak := lk[strings.IndexByte(lk, 0)+1:]
		at, err := get(ak)
		if err != nil {
			return nil, err
		}
		if at == nil {
			return nil, fmt.Errorf("%w: live index entry %q names no attempt", ErrCorrupt, lk)
		}
		out.keys, out.atts = append(out.keys, lk), append(out.atts, *at)
	}
	out.keys, out.atts = append(out.keys, memo.keys[i:]...), append(out.atts, memo.atts[i:]...)
	return out, nil
}
