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
// default queue). It reads each active job's queue and namespace only
// (jobCountView), so it costs a fraction of a spec decode per active job
// (metrics scrapes); CountActive gives both counts for one pass.
func (t *Tx) CountActiveByQueue() ([]QueueCount, error) {
	c, err := t.CountActive()
	return c.ByQueue, err
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
	c, err := t.CountActive()
	return c.ByNamespace, err
}

// ActiveCounts are the non-terminal jobs per queue and per namespace.
type ActiveCounts struct {
	ByQueue     []QueueCount
	ByNamespace []NamespaceCount
}

// CountActive counts the non-terminal jobs per state by queue and by
// namespace, in one pass over the state index.
func (t *Tx) CountActive() (ActiveCounts, error) {
	var out ActiveCounts
	jobs := t.tx.Bucket(bucketJobs)
	for _, st := range ActiveStates {
		byQueue, byNS := map[string]int{}, map[string]int{}
		prefix := jobStatePrefix(st)
		c := t.tx.Bucket(bucketJobsByState).Cursor()
		for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
			v := jobs.Get(k[len(prefix):])
			if v == nil {
				continue
			}
			var j jobCountView
			if err := decode(v, &j); err != nil {
				return ActiveCounts{}, err
			}
			byQueue[j.Spec.Queue]++
			byNS[j.Spec.Namespace]++
		}
		for q, n := range byQueue {
			out.ByQueue = append(out.ByQueue, QueueCount{Queue: q, State: st, Jobs: n})
		}
		for ns, n := range byNS {
			out.ByNamespace = append(out.ByNamespace, NamespaceCount{Namespace: ns, State: st, Jobs: n})
		}
	}
	return out, nil
}

// AllocatedByNode sums the resources of the live attempts on each node.
func (t *Tx) AllocatedByNode() (map[string]Resources, error) {
	out := map[string]Resources{}
	err := t.LiveAttempts(func(a *Attempt) bool {
		r := out[a.Node]
		r.CPU += a.Resources.CPU
		r.MemoryMB += a.Resources.MemoryMB
		r.GPUMemoryMiB += a.Resources.GPUMemoryMiB
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
