package httpapi

import (
	"errors"
	"fmt"
	"time"
)

// Config tunes the API handler. Start from DefaultConfig.
type Config struct {
	// MaxBodyBytes bounds every request body; larger bodies get 413. It must
	// hold a batch of MaxBatchJobs ordinary jobs.
	MaxBodyBytes int64
	// MaxBatchJobs bounds the jobs in one POST /v1/jobs batch.
	MaxBatchJobs int
	// ApplyTimeout bounds one raft apply made by a handler.
	ApplyTimeout time.Duration
	// DefaultListLimit is the page size of GET /v1/jobs without ?limit.
	DefaultListLimit int
	// MaxListLimit caps ?limit.
	MaxListLimit int
	// ProxyDialTimeout bounds connecting to the leader or a log holder.
	ProxyDialTimeout time.Duration
	// SubmitGroupJobs bounds the jobs that concurrent submits merge into
	// one raft entry (group commit); a larger batch goes alone. 1 turns
	// merging off.
	SubmitGroupJobs int
	// SubmitGroupInflight is how many submit entries may be in raft at
	// once; submits arriving while all are busy queue and go together in
	// the next one. 1 gives the largest groups and the least CPU per job
	// (measured: 2 and 4 cost 5-20% more CPU per job, 8 over 40%), which
	// is what bounds the rate when the agents share a few cores.
	SubmitGroupInflight int

	// MaxPendingJobs and MaxQueuedJobs bound what a submit may add to
	// (overload.go): with this many jobs accepted by this node and not yet
	// committed, or this many queued jobs in the state, submits get 429
	// with Retry-After instead of waiting or timing out.
	MaxPendingJobs int
	MaxQueuedJobs  int
	// RetryAfter is what a 429 asks the client to wait (whole seconds).
	RetryAfter time.Duration
	// EventHeartbeat is how often an idle event stream gets a comment line
	// (keeps proxies from closing it, and finds dead clients).
	EventHeartbeat time.Duration
	// EventWriteTimeout drops a stream whose client stops reading: a
	// write that blocks this long ends it.
	EventWriteTimeout time.Duration
	// EventDelayPerStream and EventMaxDelay coalesce the streams' wake-ups
	// under load: with N streams open, they are woken at most once per
	// min(N × EventDelayPerStream, EventMaxDelay), and at once after a
	// quiet spell that long (events_wake.go). Zero: woken by every batch.
	EventDelayPerStream time.Duration
	EventMaxDelay       time.Duration
	// ACL requires a token on every route but the open ones (used only
	// when Deps.ACL is nil; docs/security.md).
	ACL bool
}

// DefaultConfig returns the settings an agent uses unless told otherwise.
func DefaultConfig() Config {
	return Config{
		MaxBodyBytes:     8 << 20, // 1000 jobs of ~2 KiB fit with room to spare
		MaxBatchJobs:     5000,
		ApplyTimeout:     10 * time.Second,
		DefaultListLimit: 100,
		MaxListLimit:     1000,
		ProxyDialTimeout: 3 * time.Second,

		SubmitGroupJobs:     5000,
		SubmitGroupInflight: 1,

		MaxPendingJobs:    20000,  // four full batches in flight, or 20,000 single submits
		MaxQueuedJobs:     100000, // a backlog of minutes for a small cluster
		RetryAfter:        time.Second,
		EventHeartbeat:    15 * time.Second,
		EventWriteTimeout: 10 * time.Second,

		EventDelayPerStream: time.Millisecond,
		EventMaxDelay:       100 * time.Millisecond,
	}
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, fmt.Errorf("MaxBodyBytes (%d) must be at least 1024", c.MaxBodyBytes))
	}
	if c.MaxBatchJobs < 1 {
		errs = append(errs, fmt.Errorf("MaxBatchJobs (%d) must be at least 1", c.MaxBatchJobs))
	}
	if c.ApplyTimeout <= 0 {
		errs = append(errs, fmt.Errorf("ApplyTimeout (%s) must be positive", c.ApplyTimeout))
	}
	if c.DefaultListLimit < 1 || c.DefaultListLimit > c.MaxListLimit {
		errs = append(errs, fmt.Errorf("DefaultListLimit (%d) must be between 1 and MaxListLimit (%d)", c.DefaultListLimit, c.MaxListLimit))
	}
	if c.ProxyDialTimeout <= 0 {
		errs = append(errs, fmt.Errorf("ProxyDialTimeout (%s) must be positive", c.ProxyDialTimeout))
	}
	if c.SubmitGroupJobs < 1 {
		errs = append(errs, fmt.Errorf("SubmitGroupJobs (%d) must be at least 1", c.SubmitGroupJobs))
	}
	if c.SubmitGroupInflight < 1 {
		errs = append(errs, fmt.Errorf("SubmitGroupInflight (%d) must be at least 1", c.SubmitGroupInflight))
	}
	if c.MaxPendingJobs < c.MaxBatchJobs {
		errs = append(errs, fmt.Errorf("MaxPendingJobs (%d) must be at least MaxBatchJobs (%d)", c.MaxPendingJobs, c.MaxBatchJobs))
	}
	if c.MaxQueuedJobs < 1 {
		errs = append(errs, fmt.Errorf("MaxQueuedJobs (%d) must be at least 1", c.MaxQueuedJobs))
	}
	if c.RetryAfter < time.Second {
		errs = append(errs, fmt.Errorf("RetryAfter (%s) must be at least 1s", c.RetryAfter))
	}
	if c.EventHeartbeat <= 0 {
		errs = append(errs, fmt.Errorf("EventHeartbeat (%s) must be positive", c.EventHeartbeat))
	}
	if c.EventDelayPerStream < 0 || c.EventMaxDelay < 0 {
		errs = append(errs, fmt.Errorf("EventDelayPerStream (%s) and EventMaxDelay (%s) must not be negative", c.EventDelayPerStream, c.EventMaxDelay))
	}
	if c.EventWriteTimeout <= 0 {
		errs = append(errs, fmt.Errorf("EventWriteTimeout (%s) must be positive", c.EventWriteTimeout))
	}
	return errors.Join(errs...)
}
