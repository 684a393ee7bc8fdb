package sched

import (
	"math"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// UsageHours reads the hourly usage totals of finished attempts that
// start in [from, to): fn gets each record's hour, its namespace (display
// name, as the records key it) and its allocation totals in resource ×
// milliseconds (millicore-ms, MiB-ms, GPU-ms). Several records may share
// an hour and a namespace (they differ by user or labels).
type UsageHours func(from, to time.Time, fn func(hour time.Time, namespace string, total Alloc) error) error

// recentWindow is how many half-lives back the recent average reads:
// older hours weigh less than 2^-10 of a fresh one.
const recentWindow = 10

// recentCache keeps, across the leader loop's plans, the decayed sums of
// the completed hours, so a plan reads only the current hour's records.
// Decay is exponential, so a sum taken at the start of the hour T0 is
// carried to any later now by one factor 2^-((now−T0)/H); it is read
// again when the hour (or the half-life) changes. Only the loop's
// goroutine uses it.
type recentCache struct {
	hour     time.Time // start of the hour the sums were taken at; zero: none
	halfLife time.Duration
	sums     map[string]Alloc // stored namespace → decayed average at hour
}

// get returns each namespace's recent average allocation at now.
func (c *recentCache) get(read UsageHours, now time.Time, h time.Duration) (map[string]Alloc, error) {
	if h <= 0 || read == nil {
		return nil, nil
	}
	hour := now.Truncate(time.Hour)
	if !hour.Equal(c.hour) || h != c.halfLife {
		sums := map[string]Alloc{}
		from := hour.Add(-time.Duration(recentWindow) * h).Truncate(time.Hour)
		err := read(from, hour, func(at time.Time, ns string, total Alloc) error {
			addDecayed(sums, fsm.StoredNamespace(ns), total, at, hour, h)
			return nil
		})
		if err != nil {
			return nil, err
		}
		c.hour, c.halfLife, c.sums = hour, h, sums
	}
	f := math.Exp2(-now.Sub(hour).Seconds() / h.Seconds())
	out := make(map[string]Alloc, len(c.sums))
	for ns, a := range c.sums {
		out[ns] = Alloc{CPU: a.CPU * f, MemoryMB: a.MemoryMB * f, GPUs: a.GPUs * f}
	}
	err := read(hour, hour.Add(time.Hour), func(at time.Time, ns string, total Alloc) error {
		addDecayed(out, fsm.StoredNamespace(ns), total, at, now, h)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RecentUsage is the recent average allocation of every namespace at now
// with half-life h, read in full (no cache): what `foreman namespace
// shares` shows.
func RecentUsage(read UsageHours, now time.Time, h time.Duration) (map[string]Alloc, error) {
	var c recentCache
	return c.get(read, now, h)
}

func addDecayed(m map[string]Alloc, ns string, total Alloc, hour, now time.Time, h time.Duration) {
	a := m[ns]
	a.CPU += DecayedAverage(total.CPU, hour, now, h)
	a.MemoryMB += DecayedAverage(total.MemoryMB, hour, now, h)
	a.GPUs += DecayedAverage(total.GPUs, hour, now, h)
	m[ns] = a
}

// UsageHoursOf is the hourly usage reader of a state transaction
// (fsm/usage.go): each record's requested cpu, memory and whole GPUs
// held, in resource-milliseconds. Usage is recorded only while
// accounting is on; without records fair share weighs live allocation
// only.
func UsageHoursOf(tx *fsm.Tx) UsageHours {
	return func(from, to time.Time, fn func(time.Time, string, Alloc) error) error {
		return tx.UsageRange(from, to, func(hour time.Time, ns, _, _ string, u *fsm.Usage) error {
			// CPUReqMs is core-ms: millicore-ms is a thousand times it.
			return fn(hour, ns, Alloc{CPU: float64(u.CPUReqMs) * 1000, MemoryMB: float64(u.MemReqMiBMs), GPUs: float64(u.GPUMs)})
		})
	}
}
