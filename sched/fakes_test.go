package sched

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
	"github.com/hashicorp/raft"
)

// fakeClock is a manual clock; Advance fires the timers that fall due.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at      time.Time
	ch      chan time.Time
	stopped bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }
func (t *fakeTimer) Stop() bool {
	was := !t.stopped
	t.stopped = true
	return was
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{now: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

// waitTimer waits until a timer is set to fire at exactly at: the
// scheduler has planned and chose to wake then.
func (c *fakeClock) waitTimer(t testing.TB, at time.Time) {
	t.Helper()
	eventually(t, fmt.Sprintf("a timer at %v", at), func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, tm := range c.timers {
			if tm.at.Equal(at) {
				return true
			}
		}
		return false
	})
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	keep := c.timers[:0]
	for _, t := range c.timers {
		if !t.at.After(c.now) {
			select {
			case t.ch <- c.now:
			default:
			}
			continue
		}
		keep = append(keep, t)
	}
	c.timers = keep
}

// fakeRaft applies commands straight to a real FSM with increasing
// indexes, like a single-node raft would.
type fakeRaft struct {
	mu          sync.Mutex
	t           testing.TB
	f           *fsm.FSM
	index       uint64
	leaderSince time.Time
	heard       map[string]time.Time
	log         []*fsm.Command
}

func (r *fakeRaft) Apply(_ context.Context, cmd *fsm.Command) (*fsm.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := cmd.Encode()
	if err != nil {
		return nil, err
	}
	r.index++
	r.log = append(r.log, cmd)
	res := r.f.ApplyBatch([]*raft.Log{{Index: r.index, Term: 1, Type: raft.LogCommand, Data: b}})[0]
	return res.(*fsm.Result), nil
}

func (r *fakeRaft) Barrier(context.Context) error { return nil }

func (r *fakeRaft) LastHeardFrom(n string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.heard[n]
	return t, ok
}

func (r *fakeRaft) LeaderSince() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leaderSince
}

// commands returns the applied commands of type typ.
func (r *fakeRaft) commands(typ fsm.CommandType) []*fsm.Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*fsm.Command
	for _, c := range r.log {
		if c.Type == typ {
			out = append(out, c)
		}
	}
	return out
}
