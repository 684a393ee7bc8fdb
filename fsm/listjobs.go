package fsm

import (
	"encoding/base64"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// DefaultListLimit is the page size when JobQuery.Limit is 0.
const DefaultListLimit = 100

// JobQuery filters and pages ListJobs. Zero fields do not filter.
type JobQuery struct {
	State      JobState
	Labels     map[string]string // every pair must match the job's labels
	NamePrefix string
	Queue      string // the job's spec.queue; "" does not filter
	// Namespace keeps jobs of one namespace (stored form: "" is the
	// default one) unless AnyNamespace.
	Namespace    string
	AnyNamespace bool
	// Preempted keeps only jobs that had an attempt preempted (the
	// pseudo-state "preempted" of the API: such jobs are queued again).
	Preempted bool
	// Array lists the tasks of that array job, by index; without it,
	// tasks are left out (an array is listed as its one job).
	Array  string
	Cursor string // from the previous page's next; "" = newest
	Limit  int    // 0 = DefaultListLimit
}

// ParseLabelSelector turns "k=v,k2=v2" into a map for JobQuery.Labels.
func ParseLabelSelector(s string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("label selector %q: want key=value[,key=value]", part)
		}
		out[k] = v
	}
	return out, nil
}

func (q *JobQuery) match(j *Job) bool {
	if q.Array != "" && (j.ArrayTask == nil || j.ArrayTask.Array != q.Array) {
		return false
	}
	if !q.AnyNamespace && j.Spec.Namespace != q.Namespace {
		return false
	}
	if q.Preempted && j.Preemptions == 0 {
		return false
	}
	if q.NamePrefix != "" && !strings.HasPrefix(j.Spec.Name, q.NamePrefix) {
		return false
	}
	if q.Queue != "" && j.Spec.Queue != q.Queue {
		return false
	}
	for k, v := range q.Labels {
		if got, ok := j.Spec.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// ListJobs returns one page of jobs, newest first (job IDs are ULIDs), and
// the cursor of the next page ("" at the end).
func (f *FSM) ListJobs(q JobQuery) (jobs []Job, next string, err error) {
	err = f.View(func(tx *Tx) error {
		jobs, next, err = tx.ListJobs(q)
		return err
	})
	return jobs, next, err
}

// ListJobs is FSM.ListJobs inside an existing view.
func (t *Tx) ListJobs(q JobQuery) ([]Job, string, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	var after []byte // exclusive upper bound: the last ID of the previous page
	if q.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(q.Cursor)
		if err != nil || len(b) == 0 {
			return nil, "", fmt.Errorf("%w: cursor %q is not one ListJobs returned", ErrBadCommand, q.Cursor)
		}
		after = b
	}
	jobsB := t.tx.Bucket(bucketJobs)
	var prefix []byte
	var c *bolt.Cursor
	if q.State != "" {
		prefix = jobStatePrefix(q.State)
		c = t.tx.Bucket(bucketJobsByState).Cursor()
	} else {
		c = jobsB.Cursor()
	}
	if q.Array != "" {
		return t.listTasks(q, limit, after)
	}
	k := seekBefore(c, prefix, after)
	page := jobPage{q: &q, limit: limit}
	for ; k != nil && hasPrefix(k, prefix); k, _ = c.Prev() {
		j, err := readListedJob(jobsB, k[len(prefix):])
		if err != nil {
			return nil, "", err
		}
		if j == nil {
			continue
		}
		if t := j.ArrayTask; t != nil {
			// Its array's tasks sort together right after the array:
			// go on from the array itself.
			k = seekBefore(c, prefix, []byte(t.Array+"\x00"))
			if k == nil || !hasPrefix(k, prefix) {
				break
			}
			c.Next() // so that the loop's Prev lands on the key seekBefore found
			continue
		}
		if page.offer(j) {
			break
		}
	}
	return page.jobs, page.next, nil
}

// jobPage collects one page of ListJobs.
type jobPage struct {
	q     *JobQuery
	limit int
	jobs  []Job
	next  string // the cursor of the next page, once one more job matched
}

// offer keeps j if it matches; true once the page is full and another
// job matched (so there is a next page).
func (p *jobPage) offer(j *Job) bool {
	if !p.q.match(j) {
		return false
	}
	if len(p.jobs) == p.limit {
		p.next = base64.RawURLEncoding.EncodeToString([]byte(p.jobs[len(p.jobs)-1].ID))
		return true
	}
	p.jobs = append(p.jobs, *j)
	return false
}

// readListedJob decodes job id of the jobs bucket (nil when it is not there).
func readListedJob(jobs *bolt.Bucket, id []byte) (*Job, error) {
	v := jobs.Get(id)
	if v == nil {
		return nil, nil
	}
	var j Job
	if err := decode(v, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// seekBefore positions c on the last key with prefix that sorts before
// prefix+after (or the last key with prefix when after is nil).
func seekBefore(c *bolt.Cursor, prefix, after []byte) []byte {
	var target []byte
	if after != nil {
		target = append(append([]byte(nil), prefix...), after...)
	} else if prefix != nil {
		// The first key after every key with this prefix.
		target = append(append([]byte(nil), prefix[:len(prefix)-1]...), prefix[len(prefix)-1]+1)
	}
	if target == nil {
		k, _ := c.Last()
		return k
	}
	k, _ := c.Seek(target)
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	for k != nil && string(k) >= string(target) {
		k, _ = c.Prev()
	}
	return k
}

// listTasks is ListJobs for the tasks of array q.Array: by index,
// ascending, after the task whose ID is after. The keys are read (from
// the state index with a state), sorted, and only the page's tasks decoded.
func (t *Tx) listTasks(q JobQuery, limit int, after []byte) ([]Job, string, error) {
	from := -1
	if after != nil {
		i, err := strconv.Atoi(strings.TrimPrefix(string(after), TaskPrefix(q.Array)))
		if err != nil {
			return nil, "", fmt.Errorf("%w: cursor %q is not one ListJobs returned", ErrBadCommand, q.Cursor)
		}
		from = i
	}
	var idx []int
	if q.State != "" {
		idx = t.ArrayIndexes(q.Array, q.State)
	} else {
		prefix := []byte(TaskPrefix(q.Array))
		c := t.tx.Bucket(bucketJobs).Cursor()
		for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
			if i, err := strconv.Atoi(string(k[len(prefix):])); err == nil {
				idx = append(idx, i)
			}
		}
		slices.Sort(idx)
	}
	jobsB := t.tx.Bucket(bucketJobs)
	page := jobPage{q: &q, limit: limit}
	for _, i := range idx[sort.SearchInts(idx, from+1):] {
		j, err := readListedJob(jobsB, []byte(TaskID(q.Array, i)))
		if err != nil {
			return nil, "", err
		}
		if j != nil && page.offer(j) {
			break
		}
	}
	return page.jobs, page.next, nil
}
