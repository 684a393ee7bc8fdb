package checker

// UsageReading is what the cluster's usage report said at the end of a
// run (GET /v1/usage?step=total&by=namespace over the whole run, read
// through the leader).
type UsageReading struct {
	// Enabled: accounting was on before the first submit (the workload
	// waits for it; attempts ending before the marker are not counted).
	Enabled bool
	// Attempts is the report's attempts summed over its rows.
	Attempts int64
	// Err is why the report could not be read ("": it was).
	Err string
}

// Usage checks that usage accounting counted every attempt that ended
// exactly once (issue 39): the report's attempts equal the ended attempts
// of the final view's jobs, summed. Faults may lose or repeat an attempt's
// end only if the FSM applied it twice or not in the same transaction as
// the attempt's end; either shows here as usage_mismatch. A view with
// attempts still live gives no verdict (they may end between the two
// reads), nor does one the report could not be read for.
func Usage(final []FinalJob, u UsageReading) Result {
	r := Result{Name: "usage", Valid: true, Stats: map[string]int{}}
	var ended, live int64
	for _, j := range final {
		for _, a := range j.Attempts {
			if a.State == "assigned" || a.State == "running" {
				live++
			} else {
				ended++
			}
		}
	}
	r.Stats["jobs"] = len(final)
	r.Stats["ended_attempts"] = int(ended)
	r.Stats["usage_attempts"] = int(u.Attempts)
	r.Stats["usage_mismatch"] = 0
	r.Stats["accounting_off"] = 0
	switch {
	case u.Err != "":
		r.errorf("usage report: %s", u.Err)
	case !u.Enabled:
		r.Stats["accounting_off"] = 1
		r.errorf("usage accounting was not on when traffic started: %d ended attempts not checked", ended)
	case live > 0:
		r.notef("%d attempts still live in the final view: no verdict on the usage count", live)
	case u.Attempts != ended:
		r.Stats["usage_mismatch"] = int(u.Attempts - ended)
		r.errorf("usage counts %d attempts, the jobs show %d ended (%+d)", u.Attempts, ended, u.Attempts-ended)
	}
	return r
}
