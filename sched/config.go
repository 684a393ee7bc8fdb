package sched

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// ErrInvalidConfig wraps every Config.Validate failure.
var ErrInvalidConfig = errors.New("sched: invalid config")

// Config holds the scheduler's policy (used by Plan) and the leader loop's
// timings. CLI flags map onto it in main.
type Config struct {
	// LeaseDuration is L, the attempt lease the supervisor enforces (exec's
	// default is 6s). Attempts on a dead node are declared lost only after
	// L + SafetyMargin since the leader last heard from the node.
	LeaseDuration time.Duration
	// SafetyMargin covers what L does not: the follower keeps renewing for
	// up to cluster's LeaderContactTimeout (2s) after its last contact, the
	// kill itself, and clock rate drift between machines.
	SafetyMargin time.Duration
	// ClientSafetyMargin is SafetyMargin for a client (and a node with no
	// record, which may have been one): a client keeps renewing for up to
	// cluster.ClientContactWindow after the send time of its last
	// confirmed beat (5 s), so its margin is that window and a second.
	ClientSafetyMargin time.Duration

	// AgingInterval adds one to a queued job's effective priority per
	// interval waited, so low priorities are not starved (0 disables).
	AgingInterval time.Duration
	// AgingCap bounds the effective priority reached by aging.
	AgingCap int
	// MinCandidates is how many feasible nodes a placement compares before
	// choosing (more with large clusters: max(MinCandidates, log2 nodes)).
	MinCandidates int
	// DefaultRequest is what a job that requests no cpu (or no memory) is
	// placed as, so that a node's capacity bounds how many such jobs it
	// runs at once: without it they "fit" anywhere in any number (Nomad
	// defaults to 100 MHz / 300 MB, Kubernetes schedules them as 100m /
	// 200 MiB). It is a placement figure only: the job gets no cgroup
	// limit from it. Zero fields leave such jobs unbounded.
	DefaultRequest fsm.Resources
	// MaxSyncLag is how many log entries a node's gossiped applied index
	// may trail the leader's commit index before Plan places nothing on it
	// (cluster.NodesBehind; a node that says it is not in sync is skipped
	// whatever its index).
	MaxSyncLag uint64
	// BatchSize caps the items in one raft command (placements, releases,
	// reasons, failures), keeping entries small.
	BatchSize int

	// Coalesce caps the coalescing window: after a plan that took c, the
	// next starts no sooner than min(Coalesce, 5c) after it, so a burst of
	// changes gives few plans while a cheap plan adds almost no latency
	// (0 = plan on every change).
	Coalesce time.Duration
	// PlansInFlight is how many plans of placements may be committing at
	// once: the loop plans the next change without waiting for the last
	// plan's placements to commit (1 = wait for each plan).
	PlansInFlight int
	// RetryDelay is how long the loop waits after a failed barrier or apply.
	RetryDelay time.Duration
	// GCInterval is how often the leader issues fsm.GC.
	GCInterval time.Duration
	// Retention is how long terminal jobs are kept.
	Retention time.Duration
	// IdempotencyWindow is how long idempotency keys are remembered.
	IdempotencyWindow time.Duration
	// UsageLabels are the job label keys usage accounting splits its
	// records by (at most fsm.MaxUsageLabels; the leader proposes
	// fsm.StartUsage with them).
	UsageLabels []string
	// CronGrace is how late a schedule's latest tick may be found and
	// still count as on time rather than missed (catch_up skip fires an
	// on-time tick only; cronplan.go).
	CronGrace time.Duration

	// Preemption lets a queued job that fits nowhere evict preemptible
	// attempts whose priority is at least PreemptionMargin (and at least 1)
	// below its own (preempt.go).
	Preemption       bool
	PreemptionMargin int

	// FairShareHalfLife is the half-life of the recent usage that fair
	// share weighs (fairshare.go): usage that ended one half-life ago
	// counts half as much as usage now.
	FairShareHalfLife time.Duration

	// DeliveryConcurrency is how many webhook deliveries the leader tries
	// at once (deliver.go); 0 turns the deliverer off.
	DeliveryConcurrency int
	// DeliveryTimeout bounds one try of a webhook delivery, from connect
	// to the end of the receiver's answer.
	DeliveryTimeout time.Duration
}

// DefaultConfig returns the production defaults; DESIGN.md explains them.
func DefaultConfig() Config {
	return Config{
		LeaseDuration:      6 * time.Second,
		SafetyMargin:       3 * time.Second,
		ClientSafetyMargin: 6 * time.Second,
		AgingInterval:      time.Minute,
		AgingCap:           MaxPriority,
		MinCandidates:      16,
		DefaultRequest:     fsm.Resources{CPU: 100, MemoryMB: 64},
		MaxSyncLag:         5000,
		BatchSize:          1000,
		Coalesce:           20 * time.Millisecond,
		PlansInFlight:      4,
		RetryDelay:         time.Second,
		GCInterval:         time.Minute,
		Retention:          7 * 24 * time.Hour,
		IdempotencyWindow:  24 * time.Hour,
		CronGrace:          5 * time.Second,
		Preemption:         true,
		PreemptionMargin:   DefaultPreemptionMargin,
		FairShareHalfLife:  DefaultFairShareHalfLife,

		DeliveryConcurrency: 16,
		DeliveryTimeout:     10 * time.Second,
	}
}

// DefaultFairShareHalfLife is the default half-life of fair share's
// recent usage: a day, so yesterday's heavy user yields to today's others
// without a week of penalty.
const DefaultFairShareHalfLife = 24 * time.Hour

// DefaultPreemptionMargin is the smallest priority difference that lets a
// job preempt another by default.
const DefaultPreemptionMargin = 10

// MaxPriority is the highest priority a user may submit.
const MaxPriority = 100

// Validate reports the first field with an unusable value.
func (c Config) Validate() error {
	bad := func(field, why string) error { return fmt.Errorf("%w: %s %s", ErrInvalidConfig, field, why) }
	switch {
	case c.LeaseDuration <= 0:
		return bad("LeaseDuration", "must be positive")
	case c.SafetyMargin < 0:
		return bad("SafetyMargin", "must not be negative")
	case c.ClientSafetyMargin < 0:
		return bad("ClientSafetyMargin", "must not be negative")
	case c.AgingInterval < 0:
		return bad("AgingInterval", "must not be negative")
	case c.AgingCap < 0:
		return bad("AgingCap", "must not be negative")
	case c.MinCandidates < 1:
		return bad("MinCandidates", "must be at least 1")
	case c.DefaultRequest.CPU < 0 || c.DefaultRequest.MemoryMB < 0:
		return bad("DefaultRequest", "must not be negative")
	case c.BatchSize < 1:
		return bad("BatchSize", "must be at least 1")
	case c.Coalesce < 0:
		return bad("Coalesce", "must not be negative")
	case c.PlansInFlight < 1:
		return bad("PlansInFlight", "must be at least 1")
	case c.RetryDelay <= 0:
		return bad("RetryDelay", "must be positive")
	case c.GCInterval <= 0:
		return bad("GCInterval", "must be positive")
	case c.Retention <= 0:
		return bad("Retention", "must be positive")
	case c.IdempotencyWindow <= 0:
		return bad("IdempotencyWindow", "must be positive")
	case len(fsm.NormalizeUsageLabels(c.UsageLabels)) > fsm.MaxUsageLabels:
		return bad("UsageLabels", fmt.Sprintf("at most %d label keys (got %d)", fsm.MaxUsageLabels, len(c.UsageLabels)))
	case slices.ContainsFunc(c.UsageLabels, func(l string) bool { return l == "" || strings.ContainsAny(l, ",=/\x00") }):
		return bad("UsageLabels", fmt.Sprintf("%q: a label key must be non-empty without ',', '=', '/' or NUL", c.UsageLabels))
	case c.CronGrace < 0:
		return bad("CronGrace", "must not be negative")
	case c.PreemptionMargin < 0 || c.PreemptionMargin > MaxPriority:
		return bad("PreemptionMargin", fmt.Sprintf("must be between 0 and %d (got %d)", MaxPriority, c.PreemptionMargin))
	case c.FairShareHalfLife <= 0:
		return bad("FairShareHalfLife", "must be positive")
	case c.DeliveryConcurrency < 0:
		return bad("DeliveryConcurrency", "must not be negative")
	case c.DeliveryConcurrency > 0 && c.DeliveryTimeout <= 0:
		return bad("DeliveryTimeout", "must be positive")
	}
	return nil
}

// lostAfter is how long after the last contact the attempts of dead node n
// (nil: no record) are known to have stopped.
func (c Config) lostAfter(n *fsm.Node) time.Duration {
	if n == nil || n.Role == fsm.RoleClient {
		return c.LeaseDuration + max(c.SafetyMargin, c.ClientSafetyMargin)
	}
	return c.LeaseDuration + c.SafetyMargin
}

// request is what a job is placed as: its own request, with
// DefaultRequest standing in for cpu and memory it left at zero.
func (c Config) request(r *fsm.Resources) fsm.Resources {
	out := *r
	if out.CPU == 0 {
		out.CPU = c.DefaultRequest.CPU
	}
	if out.MemoryMB == 0 {
		out.MemoryMB = c.DefaultRequest.MemoryMB
	}
	return out
}
