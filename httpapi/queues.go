package httpapi

import (
	"net/http"
	"sort"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// Queue is one queue's limit and load.
type Queue = api.Queue

// QueueList is the reply to GET /v1/queues.
type QueueList struct {
	Queues []Queue `json:"queues"`
}

// SetQueueRequest is the body of PUT /v1/queues/{name}.
type SetQueueRequest struct {
	MaxRunning *int `json:"max_running"`
}

// MaxQueueLimit bounds max_running.
const MaxQueueLimit = 1_000_000

// listQueues handles GET /v1/queues: every queue with a limit, plus every
// queue that has running work.
func (s *server) listQueues(w http.ResponseWriter, r *http.Request) {
	byName := map[string]*Queue{}
	get := func(name string) *Queue {
		q := byName[name]
		if q == nil {
			q = &Queue{Name: name}
			byName[name] = q
		}
		return q
	}
	err := s.state.View(func(tx *fsm.Tx) error {
		limits, err := tx.Queues()
		if err != nil {
			return err
		}
		for name, max := range limits {
			get(name).MaxRunning = max
		}
		return tx.LiveAttemptSpecs(func(_ *fsm.Attempt, spec *fsm.JobSpec) bool {
			get(spec.Queue).Running++
			return true
		})
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := QueueList{Queues: make([]Queue, 0, len(byName))}
	for _, q := range byName {
		out.Queues = append(out.Queues, *q)
	}
	sort.Slice(out.Queues, func(i, j int) bool { return out.Queues[i].Name < out.Queues[j].Name })
	writeJSON(w, http.StatusOK, out)
}

// setQueue handles PUT /v1/queues/{name} (leader only).
func (s *server) setQueue(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	// Queues are shared by every namespace: changing one needs write on all.
	if err := s.allow(r, PermWrite, AllNamespaces); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := CheckQueueName("name", name); err != nil {
		s.writeError(w, r, err)
		return
	}
	var req SetQueueRequest
	err := s.decodeBody(w, r, &req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.MaxRunning == nil {
		s.writeError(w, r, invalid("max_running", "is required (0 = unlimited)"))
		return
	}
	if *req.MaxRunning < 0 || *req.MaxRunning > MaxQueueLimit {
		s.writeError(w, r, invalid("max_running", "must be between 0 (unlimited) and %d (got %d)", MaxQueueLimit, *req.MaxRunning))
		return
	}
	if _, err := s.apply(r.Context(), fsm.CmdSetQueue, fsm.SetQueue{Name: name, MaxRunning: *req.MaxRunning}); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, Queue{Name: name, MaxRunning: *req.MaxRunning})
}
