package httpapi

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// WorkflowInput is the body of POST /v1/workflows (JSON, or YAML with a
// YAML content type or a body that does not start with '{').
type WorkflowInput struct {
	Name      string         `json:"name"`
	Namespace string         `json:"namespace,omitempty"`
	Jobs      []JobSpecInput `json:"jobs"` // depends_on holds names of jobs of this workflow
	// IdempotencyKey (or the Idempotency-Key header) makes a retried
	// submit answer with the first workflow.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// WorkflowSubmitResponse is the reply to POST /v1/workflows.
type WorkflowSubmitResponse = api.WorkflowSubmitResponse

// WorkflowJobRef names one job of a workflow.
type WorkflowJobRef = api.WorkflowJobRef

// WorkflowList is the reply to GET /v1/workflows.
type WorkflowList struct {
	Workflows  []fsm.Workflow `json:"workflows"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

// WorkflowDetail is the reply to GET /v1/workflows/{id}: the workflow and
// one page of its jobs in submit order (?from=N&limit=M; next_from is the
// next page's from, absent at the end).
type WorkflowDetail struct {
	fsm.Workflow
	JobList  []WorkflowJobStatus `json:"job_list"`
	NextFrom int                 `json:"next_from,omitempty"`
}

// WorkflowJobStatus is one job of a workflow with the edge that decided
// it: decision released or skipped, by the parent named decided_by.
type WorkflowJobStatus struct {
	Name      string        `json:"name"`
	ID        string        `json:"id"`
	State     fsm.JobState  `json:"state"`
	Reason    string        `json:"reason,omitempty"`
	DependsOn []string      `json:"depends_on,omitempty"` // names
	Condition fsm.Condition `json:"condition,omitempty"`
	Decision  string        `json:"decision,omitempty"`
	DecidedBy string        `json:"decided_by,omitempty"` // a name
	Attempts  int           `json:"attempts"`
	ExitCode  *int          `json:"exit_code,omitempty"`
	// Array follows the tasks of an array job (fsm/array.go).
	Array *fsm.ArrayStatus `json:"array,omitempty"`
}

// submitWorkflow handles POST /v1/workflows (leader only: the leader
// mints the workflow's and the jobs' IDs).
func (s *server) submitWorkflow(w http.ResponseWriter, r *http.Request) {
	body, err := s.readBody(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	qns, err := queryNamespace(r, false)
	var p *fsm.SubmitWorkflow
	if err == nil {
		p, err = s.parseWorkflow(body, r.Header.Get("Content-Type"), r.URL.Query().Get("namespace"), qns)
	}
	if err == nil {
		err = settleKey(&p.IdempotencyKey, r.Header.Get(HeaderIdempotencyKey))
	}
	if err == nil {
		err = s.allow(r, PermWrite, p.Namespace)
	}
	if err == nil && p.Namespace != "" && p.IdempotencyKey != "" {
		p.IdempotencyKey = p.Namespace + "/" + p.IdempotencyKey // scoped like job keys
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limits, err := s.capacityLimits()
	if err == nil {
		err = limits.check(p.Jobs, true)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.apply(r.Context(), fsm.CmdSubmitWorkflow, p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := WorkflowSubmitResponse{ID: res.Workflow, Jobs: make([]WorkflowJobRef, len(p.Jobs))}
	status := http.StatusCreated
	if res.Workflow != p.ID { // an earlier submit with the same key
		out.Duplicate, status = true, http.StatusOK
		d, err := s.workflowDetail(res.Workflow, 0, fsm.MaxWorkflowJobs)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		out.Jobs = out.Jobs[:0]
		for _, j := range d.JobList {
			out.Jobs = append(out.Jobs, WorkflowJobRef{Name: j.Name, ID: j.ID})
		}
	} else {
		for i, j := range p.Jobs {
			out.Jobs[i] = WorkflowJobRef{Name: j.Spec.Name, ID: j.ID}
		}
	}
	w.Header().Set("Location", "/v1/workflows/"+out.ID)
	writeJSON(w, status, out)
}

// settleKey merges the body's idempotency key with the header's.
func settleKey(key *string, header string) error {
	if header != "" {
		if *key != "" && *key != header {
			return invalid("idempotency_key", "differs from the %s header; send one or the other", HeaderIdempotencyKey)
		}
		*key = header
	}
	if len(*key) > MaxIdemKeyLen || hasControl(*key) {
		return invalid("idempotency_key", "must be at most %d printable characters", MaxIdemKeyLen)
	}
	return nil
}

// parseWorkflow decodes, validates and resolves a workflow body into the
// command: IDs minted, depends_on names turned into IDs.
// q and qns are ?namespace= as given and in stored form.
func (s *server) parseWorkflow(body []byte, contentType, q, qns string) (*fsm.SubmitWorkflow, error) {
	if isYAML(body, contentType) {
		var err error
		if body, err = YAMLToJSON(body); err != nil {
			return nil, invalid("body", "%v", err)
		}
	}
	var in WorkflowInput
	// encoding/json appends to the slice it is given: sized from the body,
	// the jobs array is not grown (and its large elements copied) by
	// reflection again and again (~40 ms of a 10,000-job accept).
	in.Jobs = make([]JobSpecInput, 0, min(bytes.Count(body, []byte(`"name"`)), fsm.MaxWorkflowJobs+1))
	if err := decodeStrict(body, &in); err != nil {
		return nil, err
	}
	if err := checkWorkflowName(in.Name); err != nil {
		return nil, err
	}
	if in.Namespace != "" {
		if err := CheckNamespace("namespace", in.Namespace); err != nil {
			return nil, err
		}
		in.Namespace = fsm.StoredNamespace(in.Namespace)
		if q != "" && in.Namespace != qns {
			return nil, invalid("namespace", "%q differs from ?namespace=%s; give one or make them agree", fsm.NamespaceOf(in.Namespace), q)
		}
	} else {
		in.Namespace = qns
	}
	switch n := len(in.Jobs); {
	case n == 0:
		return nil, invalid("jobs", "a workflow needs at least one job")
	case n > fsm.MaxWorkflowJobs:
		return nil, invalid("jobs", "at most %d jobs per workflow (got %d)", fsm.MaxWorkflowJobs, n)
	}
	p := &fsm.SubmitWorkflow{ID: s.ids.NewID(), Name: in.Name, Namespace: in.Namespace, IdempotencyKey: in.IdempotencyKey}
	var err error
	if p.Jobs, err = normalizeWorkflowJobs(in.Jobs, "", in.Namespace, func(int) string { return s.ids.NewID() }); err != nil {
		return nil, err
	}
	return p, nil
}

// normalizeWorkflowJobs validates a workflow's jobs (fields prefixed with
// prefix), puts them in namespace ns (stored form), and resolves depends_on names to the IDs id gives each job (a
// schedule's template keeps the names: its id returns them).
func normalizeWorkflowJobs(jobs []JobSpecInput, prefix, ns string, id func(i int) string) ([]fsm.NewJob, error) {
	out := make([]fsm.NewJob, len(jobs))
	byName := make(map[string]int, len(jobs))
	// The field name is formatted only for an error, and each spec is
	// normalized straight into out: a JobSpec is large, and formatting and
	// copying it twice per job was ~6 ms of a 10,000-job accept.
	field := func(i int) string { return fmt.Sprintf("%sjobs[%d]", prefix, i) }
	for i := range jobs {
		if err := fsm.ValidJobName(jobs[i].Name); err != nil {
			return nil, invalid(field(i)+".name", "%v", err)
		}
		if j, dup := byName[jobs[i].Name]; dup {
			return nil, invalid(field(i)+".name", "%q is also the name of jobs[%d]; names are unique within a workflow", jobs[i].Name, j)
		}
		byName[jobs[i].Name] = i
		if jobs[i].IdempotencyKey != "" {
			return nil, invalid(field(i)+".idempotency_key", "not supported inside a workflow")
		}
		if jobs[i].Singleton {
			return nil, invalid(field(i)+".singleton", "not supported inside a workflow")
		}
		if len(jobs[i].After) > 0 {
			return nil, invalid(field(i)+".after", "not supported inside a workflow: its jobs name their parents in depends_on, under one condition")
		}
		var err error
		o := &out[i]
		if o.Spec, err = jobs[i].Normalize(); err != nil {
			return nil, prefixField(field(i), err)
		}
		if o.Spec.Namespace != "" && o.Spec.Namespace != ns {
			return nil, invalid(field(i)+".namespace", "%q differs from the workflow's namespace %q; a workflow's jobs share its namespace", fsm.NamespaceOf(o.Spec.Namespace), fsm.NamespaceOf(ns))
		}
		o.Spec.Namespace = ns
		o.ID = id(i)
	}
	for i := range out {
		deps := out[i].Spec.DependsOn
		ids := make([]string, len(deps))
		for k, name := range deps {
			j, ok := byName[name]
			switch {
			case !ok:
				return nil, invalid(fmt.Sprintf("%sjobs[%d].depends_on[%d]", prefix, i, k), "no job named %q in this workflow", name)
			case j == i:
				return nil, invalid(fmt.Sprintf("%sjobs[%d].depends_on[%d]", prefix, i, k), "%q depends on itself", name)
			}
			ids[k] = out[j].ID
		}
		if len(ids) > 0 {
			out[i].Spec.DependsOn = ids
		}
	}
	if cyc := fsm.FindCycle(out); cyc != nil {
		names := make([]string, len(cyc))
		for k, i := range cyc {
			names[k] = out[i].Spec.Name
		}
		return nil, invalid(fmt.Sprintf("%sjobs[%d].depends_on", prefix, cyc[0]), "cycle %s", strings.Join(names, " -> "))
	}
	return out, nil
}

func checkWorkflowName(name string) error {
	switch {
	case name == "":
		return invalid("name", "must not be empty")
	case len(name) > MaxNameLen || hasControl(name):
		return invalid("name", "must be at most %d printable characters", MaxNameLen)
	}
	return nil
}

// isYAML decides how to read a workflow body: by content type, else by
// its first character (JSON bodies are objects).
func isYAML(body []byte, contentType string) bool {
	if strings.Contains(contentType, "yaml") {
		return true
	}
	if strings.Contains(contentType, "json") {
		return false
	}
	b := bytes.TrimSpace(body)
	return len(b) > 0 && b[0] != '{'
}

// listWorkflows handles GET /v1/workflows (newest first, paged).
func (s *server) listWorkflows(w http.ResponseWriter, r *http.Request) {
	limit, err := s.limitParam(r)
	var ns string
	if err == nil {
		ns, err = queryNamespace(r, true)
	}
	if err == nil {
		err = s.allow(r, PermRead, ns)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var out WorkflowList
	err = s.state.View(func(tx *fsm.Tx) error {
		cursor := r.URL.Query().Get("cursor")
		for {
			page, next, err := tx.ListWorkflows(cursor, limit)
			if err != nil {
				return err
			}
			for _, wf := range page {
				if ns == AllNamespaces || wf.Namespace == ns {
					out.Workflows = append(out.Workflows, wf)
				}
			}
			out.NextCursor, cursor = next, next
			if next == "" || len(out.Workflows) >= limit {
				return nil
			}
		}
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if out.Workflows == nil {
		out.Workflows = []fsm.Workflow{}
	}
	writeJSON(w, http.StatusOK, out)
}

// limitParam reads ?limit (default DefaultListLimit, at most MaxListLimit).
func (s *server) limitParam(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return s.cfg.DefaultListLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > s.cfg.MaxListLimit {
		return 0, invalid("limit", "must be between 1 and %d (got %q)", s.cfg.MaxListLimit, v)
	}
	return n, nil
}

// getWorkflow handles GET /v1/workflows/{id}[?from=N&limit=M].
func (s *server) getWorkflow(w http.ResponseWriter, r *http.Request) {
	from := 0
	if v := r.URL.Query().Get("from"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			s.writeError(w, r, invalid("from", "must be a job position >= 0 (got %q)", v))
			return
		}
		from = n
	}
	limit := s.cfg.MaxListLimit
	if r.URL.Query().Get("limit") != "" {
		var err error
		if limit, err = s.limitParam(r); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	d, err := s.workflowDetail(r.PathValue("id"), from, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *server) workflowDetail(id string, from, limit int) (*WorkflowDetail, error) {
	d := &WorkflowDetail{JobList: []WorkflowJobStatus{}}
	err := s.state.View(func(tx *fsm.Tx) error {
		wf, err := tx.Workflow(id)
		if err != nil {
			return err
		}
		d.Workflow = *wf
		jobs, next, err := tx.WorkflowJobs(id, from, limit)
		if err != nil {
			return err
		}
		d.NextFrom = next
		var ids []string
		for _, wj := range jobs {
			if wj.Job != nil {
				ids = append(ids, wj.Job.Spec.DependsOn...)
			}
		}
		names := tx.JobNames(ids)
		for _, wj := range jobs {
			st := WorkflowJobStatus{ID: wj.ID, State: "gone"}
			if j := wj.Job; j != nil {
				st.Name, st.State, st.Reason = j.Spec.Name, j.State, j.Reason
				st.Condition, st.Attempts, st.ExitCode, st.Array = j.Spec.Condition, j.Attempts, j.ExitCode, j.Array
				for _, p := range j.Spec.DependsOn {
					st.DependsOn = append(st.DependsOn, nameOr(names, p))
				}
				if j.Deps != nil {
					st.Decision = j.Deps.Decision
					if j.Deps.DecidedBy != "" {
						st.DecidedBy = nameOr(names, j.Deps.DecidedBy)
					}
				}
			}
			d.JobList = append(d.JobList, st)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

func nameOr(names map[string]string, id string) string {
	if n := names[id]; n != "" {
		return n
	}
	return id
}

// cancelWorkflow handles DELETE /v1/workflows/{id} (leader only).
func (s *server) cancelWorkflow(w http.ResponseWriter, r *http.Request) {
	req, ok := s.cancelRequest(w, r)
	switch {
	case !ok:
	case req.Indexes != "":
		s.writeError(w, r, invalid("indexes", "a workflow has no indexes (cancel its array job instead)"))
	default:
		s.workflowChange(w, r, fsm.CmdCancelWorkflow, fsm.CancelWorkflow{ID: r.PathValue("id"), Reason: req.Reason})
	}
}

// retryWorkflow handles POST /v1/workflows/{id}/retry (leader only).
func (s *server) retryWorkflow(w http.ResponseWriter, r *http.Request) {
	s.workflowChange(w, r, fsm.CmdRetryWorkflow, fsm.RetryWorkflow{ID: r.PathValue("id")})
}

// workflowChange applies a command about one workflow and replies with
// the workflow's first page. An unknown workflow is 404 before anything
// is proposed.
func (s *server) workflowChange(w http.ResponseWriter, r *http.Request, t fsm.CommandType, payload any) {
	id := r.PathValue("id")
	s.change(w, r, t, payload,
		func() (any, error) { return s.workflowDetail(id, 0, 1) },
		func() (any, error) { return s.workflowDetail(id, 0, s.cfg.DefaultListLimit) })
}
