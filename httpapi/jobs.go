package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/foreman-sched/foreman/fsm"
)

// JobList is the reply to GET /v1/jobs.
type JobList struct {
	Jobs       []fsm.Job `json:"jobs"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// JobCounts is the reply to GET /v1/jobs/counts.
type JobCounts struct {
	Counts map[fsm.JobState]int `json:"counts"` // every state, zeros included
	Total  int                  `json:"total"`
}

// JobDetail is the reply to GET /v1/jobs/{id} (and to cancel and retry).
type JobDetail struct {
	Job      fsm.Job       `json:"job"`
	Attempts []fsm.Attempt `json:"attempts"`
	// Deliveries are the job's webhook deliveries, oldest event first.
	Deliveries []fsm.Delivery `json:"deliveries,omitempty"`
	// Array lists an array job's tasks by state (fsm/array.go).
	Array *ArrayDetail `json:"array,omitempty"`
}

// ArrayDetail is where an array's made tasks are, as index lists such as
// "3,7-9" (tasks not made yet are in job.array's counts only).
type ArrayDetail struct {
	Failed    string `json:"failed,omitempty"`
	Cancelled string `json:"cancelled,omitempty"`
	Running   string `json:"running,omitempty"`
	Retrying  string `json:"retrying,omitempty"`
}

// CancelRequest is the optional body of POST /v1/jobs/{id}/cancel.
type CancelRequest struct {
	Reason string `json:"reason,omitempty"`
	// Indexes cancels only these tasks of an array: "3,7-9".
	Indexes string `json:"indexes,omitempty"`
}

// RetryRequest is the optional body of POST /v1/jobs/{id}/retry.
type RetryRequest struct {
	// Indexes retries only these tasks of an array: "3,7-9".
	Indexes string `json:"indexes,omitempty"`
}

// listJobs handles GET /v1/jobs?state=&label=k=v&name=&limit=&cursor=.
func (s *server) listJobs(w http.ResponseWriter, r *http.Request) {
	q, err := s.jobQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var out JobList
	err = s.state.View(func(tx *fsm.Tx) error {
		var err error
		out.Jobs, out.NextCursor, err = tx.ListJobs(q)
		return err
	})
	if errors.Is(err, fsm.ErrBadCommand) {
		err = invalid("cursor", "is not a cursor this API returned")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if out.Jobs == nil {
		out.Jobs = []fsm.Job{}
	}
	for i := range out.Jobs {
		redactJob(&out.Jobs[i])
	}
	writeJSON(w, http.StatusOK, out)
}

// jobCounts handles GET /v1/jobs/counts: jobs per state from the state
// index, without decoding a job (a few ms for 100,000 jobs).
func (s *server) jobCounts(w http.ResponseWriter, r *http.Request) {
	out := JobCounts{Counts: map[fsm.JobState]int{}}
	_ = s.state.View(func(tx *fsm.Tx) error {
		for _, st := range fsm.AllStates {
			n := tx.CountJobsInState(st)
			out.Counts[st] = n
			out.Total += n
		}
		return nil
	})
	writeJSON(w, http.StatusOK, out)
}

// jobQuery reads the list filters from the URL.
func (s *server) jobQuery(r *http.Request) (fsm.JobQuery, error) {
	v := r.URL.Query()
	q := fsm.JobQuery{
		State:      fsm.JobState(v.Get("state")),
		NamePrefix: v.Get("name"),
		Queue:      v.Get("queue"),
		Array:      v.Get("array"),
		Cursor:     v.Get("cursor"),
		Limit:      s.cfg.DefaultListLimit,
	}
	ns, err := queryNamespace(r, true)
	if err != nil {
		return q, err
	}
	if err := s.allow(r, PermRead, ns); err != nil {
		return q, err
	}
	q.Namespace, q.AnyNamespace = ns, ns == AllNamespaces
	if q.State == "preempted" {
		// Not a state: preempted jobs are queued again. It lists the jobs
		// that had an attempt preempted, whatever their state now.
		q.State, q.Preempted = "", true
	}
	if q.State != "" && !q.State.Valid() {
		return q, invalid("state", "unknown job state %q (want waiting, queued, running, retrying, succeeded, failed, cancelled, skipped or preempted)", q.State)
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > s.cfg.MaxListLimit {
			return q, invalid("limit", "must be a whole number between 1 and %d (got %q)", s.cfg.MaxListLimit, l)
		}
		q.Limit = n
	}
	for _, sel := range v["label"] {
		for _, part := range strings.Split(sel, ",") {
			k, val, ok := strings.Cut(part, "=")
			if !ok || k == "" {
				return q, invalid("label", "want key=value (got %q)", part)
			}
			if q.Labels == nil {
				q.Labels = map[string]string{}
			}
			q.Labels[k] = val
		}
	}
	return q, nil
}

func (s *server) jobDetail(id string) (*JobDetail, error) {
	var d JobDetail
	err := s.state.View(func(tx *fsm.Tx) error {
		j, err := tx.Job(id)
		if err != nil {
			return err
		}
		d.Job = *j
		redactJob(&d.Job)
		if j.Array != nil {
			d.Array = &ArrayDetail{
				Failed:    fsm.FormatIndexes(tx.ArrayIndexes(id, fsm.JobFailed)),
				Cancelled: fsm.FormatIndexes(tx.ArrayIndexes(id, fsm.JobCancelled)),
				Running:   fsm.FormatIndexes(tx.ArrayIndexes(id, fsm.JobRunning)),
				Retrying:  fsm.FormatIndexes(tx.ArrayIndexes(id, fsm.JobRetrying)),
			}
		}
		if d.Attempts, err = tx.Attempts(id); err != nil {
			return err
		}
		d.Deliveries, err = tx.Deliveries(id)
		return err
	})
	if err != nil {
		return nil, err
	}
	if d.Attempts == nil {
		d.Attempts = []fsm.Attempt{}
	}
	return &d, nil
}

// cancelJob handles POST /v1/jobs/{id}/cancel (leader only). A job with a
// live attempt is cancelled once its node has killed it; the reply shows
// the state right after the command applied.
func (s *server) cancelJob(w http.ResponseWriter, r *http.Request) {
	req, ok := s.cancelRequest(w, r)
	if !ok {
		return
	}
	indexes, err := s.parseIndexes(r.PathValue("id"), req.Indexes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.jobChange(w, r, fsm.CmdCancelJob, fsm.CancelJob{JobID: r.PathValue("id"), Reason: req.Reason, Indexes: indexes})
}

// cancelRequest reads the optional body of a cancel ({"reason": ...}); ok
// is false when it has answered with the error instead.
func (s *server) cancelRequest(w http.ResponseWriter, r *http.Request) (req CancelRequest, ok bool) {
	if err := s.decodeOptional(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return req, false
	}
	if len(req.Reason) > MaxNameLen || hasControl(req.Reason) {
		s.writeError(w, r, invalid("reason", "must be at most %d printable characters", MaxNameLen))
		return req, false
	}
	return req, true
}

// parseIndexes reads the indexes field of a cancel or retry of job id
// ("" is none): each must be one of the array's.
func (s *server) parseIndexes(id, list string) ([]int, error) {
	if list == "" {
		return nil, nil
	}
	idx, err := fsm.ParseIndexes(list)
	if err != nil {
		return nil, invalid("indexes", "%v", err)
	}
	return idx, s.state.View(func(tx *fsm.Tx) error {
		j, err := tx.Job(id)
		switch {
		case err != nil:
			return err
		case j.Spec.Array == nil || j.ArrayTask != nil:
			return invalid("indexes", "job %s is not an array job", id)
		}
		for _, i := range idx {
			if j.Spec.Array.Position(i) < 0 {
				return invalid("indexes", "%d is not an index of %s (%s)", i, id, j.Spec.Array)
			}
		}
		return nil
	})
}

// retryJob handles POST /v1/jobs/{id}/retry (leader only).
func (s *server) retryJob(w http.ResponseWriter, r *http.Request) {
	var req RetryRequest
	if err := s.decodeOptional(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	indexes, err := s.parseIndexes(r.PathValue("id"), req.Indexes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.jobChange(w, r, fsm.CmdRetryJob, fsm.RetryJob{JobID: r.PathValue("id"), Indexes: indexes})
}

// jobChange applies a command about one job and replies with the job. An
// unknown job is 404 before anything is proposed.
func (s *server) jobChange(w http.ResponseWriter, r *http.Request, t fsm.CommandType, payload any) {
	id := r.PathValue("id")
	read := func() (any, error) { return s.jobDetail(id) }
	s.change(w, r, t, payload, read, read)
}

// change applies a command about one object (a job, a workflow) and
// replies with what read answers after it; before reads the object first,
// so an unknown one is 404 before anything is proposed.
func (s *server) change(w http.ResponseWriter, r *http.Request, t fsm.CommandType, payload any, before, read func() (any, error)) {
	if _, err := before(); err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, err := s.apply(r.Context(), t, payload); err != nil {
		s.writeError(w, r, err)
		return
	}
	d, err := read()
	s.reply(w, r, d, err)
}

// TaskList is the reply to GET /v1/jobs/{id}/tasks: a gang's tasks, each
// with its own attempts (oldest first).
type TaskList struct {
	JobID string `json:"job_id"`
	Size  int    `json:"size"`
	// Token is the fencing token the tasks of the current (or last)
	// placement share.
	Token uint64       `json:"token,omitempty"`
	Tasks []TaskStatus `json:"tasks"`
}

// TaskStatus is one task of a gang.
type TaskStatus struct {
	Index int `json:"index"`
	// Latest is the task's latest attempt (nil before the first placement).
	Latest *fsm.Attempt `json:"latest,omitempty"`
	// Counted is how many of the task's attempts used up max_attempts.
	Counted  int           `json:"counted"`
	Attempts []fsm.Attempt `json:"attempts"`
}

// jobTasks handles GET /v1/jobs/{id}/tasks. A job that is not a gang is a
// 409: it has no tasks.
func (s *server) jobTasks(w http.ResponseWriter, r *http.Request) {
	d, err := s.jobDetail(r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	g := d.Job.Spec.Gang
	if g == nil {
		s.writeError(w, r, fmt.Errorf("%w: job %s is not a gang (it has no tasks)", fsm.ErrConflict, d.Job.ID))
		return
	}
	out := TaskList{JobID: d.Job.ID, Size: g.Size, Tasks: make([]TaskStatus, g.Size)}
	if st := d.Job.Gang; st != nil {
		out.Token = st.Token
	}
	for i := range out.Tasks {
		out.Tasks[i] = TaskStatus{Index: i, Attempts: []fsm.Attempt{}}
		if st := d.Job.Gang; st != nil && i < len(st.Counted) {
			out.Tasks[i].Counted = st.Counted[i]
		}
	}
	for _, a := range d.Attempts {
		if a.Task == nil || a.Task.Index < 0 || a.Task.Index >= g.Size {
			continue
		}
		t := &out.Tasks[a.Task.Index]
		t.Attempts = append(t.Attempts, a)
	}
	for i := range out.Tasks {
		if n := len(out.Tasks[i].Attempts); n > 0 {
			last := out.Tasks[i].Attempts[n-1]
			out.Tasks[i].Latest = &last
		}
	}
	writeJSON(w, http.StatusOK, out)
}
