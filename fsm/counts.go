package fsm

// ActiveStates are the non-terminal job states.
var ActiveStates = []JobState{JobWaiting, JobQueued, JobRunning, JobRetrying}

// AllStates are every job state, active first.
var AllStates = []JobState{JobWaiting, JobQueued, JobRunning, JobRetrying, JobSucceeded, JobFailed, JobCancelled, JobSkipped}

// QueueCount is how many jobs of one queue are in one state.
type QueueCount struct {
	Queue string
	State JobState
	Jobs  int
}

// CountActiveByQueue counts the non-terminal jobs per queue ("" is the
// default queue). It decodes each active job's spec, so it costs about a
// microsecond per active job (metrics scrapes).
func (t *Tx) CountActiveByQueue() ([]QueueCount, error) {
	var out []QueueCount
	err := t.countActive(func(s *JobSpec) string { return s.Queue }, func(q string, st JobState, n int) {
		out = append(out, QueueCount{Queue: q, State: st, Jobs: n})
	})
	return out, err
}

// NamespaceCount is how many jobs of one namespace are in one state.
type NamespaceCount struct {
	Namespace string // stored form: "" is the default namespace
	State     JobState
	Jobs      int
}

// CountActiveByNamespace counts the non-terminal jobs per namespace, at
// the cost of CountActiveByQueue.
func (t *Tx) CountActiveByNamespace() ([]NamespaceCount, error) {
	var out []NamespaceCount
	err := t.countActive(func(s *JobSpec) string { return s.Namespace }, func(ns string, st JobState, n int) {
		out = append(out, NamespaceCount{Namespace: ns, State: st, Jobs: n})
	})
	return out, err
}

// countActive counts the active jobs per state and key(spec), and calls
// emit for each count.
func (t *Tx) countActive(key func(*JobSpec) string, emit func(k string, st JobState, n int)) error {
	jobs := t.tx.Bucket(bucketJobs)
	for _, st := range ActiveStates {
		counts := map[string]int{}
		prefix := jobStatePrefix(st)
		c := t.tx.Bucket(bucketJobsByState).Cursor()
		for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
			v := jobs.Get(k[len(prefix):])
			if v == nil {
				continue
			}
			var j jobSpecView
			if err := decode(v, &j); err != nil {
				return err
			}
			counts[key(&j.Spec)]++
		}
		for k, n := range counts {
			emit(k, st, n)
		}
	}
	return nil
}

// AllocatedByNode sums the resources of the live attempts on each node.
func (t *Tx) AllocatedByNode() (map[string]Resources, error) {
	out := map[string]Resources{}
	err := t.LiveAttempts(func(a *Attempt) bool {
		r := out[a.Node]
		r.CPU += a.Resources.CPU
		r.MemoryMB += a.Resources.MemoryMB
		for k, v := range a.Resources.Named {
			if r.Named == nil {
				r.Named = map[string]int64{}
			}
			r.Named[k] += v
		}
		out[a.Node] = r
		return true
	})
	return out, err
}
