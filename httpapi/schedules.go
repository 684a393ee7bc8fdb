package httpapi

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// scheduleRoutes registers /v1/schedules.
func (s *server) scheduleRoutes(m *http.ServeMux) {
	s.handle(m, "POST /v1/schedules", s.write(s.createSchedule))
	s.handle(m, "GET /v1/schedules", s.read(s.listSchedules))
	s.handle(m, "GET /v1/schedules/{name}", s.read(s.scheduleScoped(PermRead, s.getSchedule)))
	s.handle(m, "PUT /v1/schedules/{name}", s.write(s.scheduleScoped(PermWrite, s.updateSchedule)))
	s.handle(m, "DELETE /v1/schedules/{name}", s.write(s.scheduleScoped(PermWrite, s.deleteSchedule)))
	s.handle(m, "POST /v1/schedules/{name}/trigger", s.write(s.scheduleScoped(PermWrite, s.triggerSchedule)))
	s.handle(m, "POST /v1/schedules/{name}/pause", s.write(s.scheduleScoped(PermWrite, s.pauseSchedule(true))))
	s.handle(m, "POST /v1/schedules/{name}/resume", s.write(s.scheduleScoped(PermWrite, s.pauseSchedule(false))))
}

// scheduleInput reads and normalises a schedule body; name (from the
// path, for PUT) must match the body's name if that is given.
func (s *server) scheduleInput(w http.ResponseWriter, r *http.Request, name string) (fsm.ScheduleSpec, error) {
	var in ScheduleInput
	err := s.decodeBody(w, r, &in)
	if err != nil {
		return fsm.ScheduleSpec{}, err
	}
	qns, err := queryNamespace(r, false)
	if err != nil {
		return fsm.ScheduleSpec{}, err
	}
	if in.Namespace != "" {
		if err := CheckNamespace("namespace", in.Namespace); err != nil {
			return fsm.ScheduleSpec{}, err
		}
		if q := r.URL.Query().Get("namespace"); q != "" && fsm.StoredNamespace(in.Namespace) != qns {
			return fsm.ScheduleSpec{}, invalid("namespace", "%q differs from ?namespace=%s; give one or make them agree", in.Namespace, q)
		}
		qns = fsm.StoredNamespace(in.Namespace)
	}
	if name != "" {
		_, short := splitScheduleKey(name)
		if in.Name != "" && in.Name != short {
			return fsm.ScheduleSpec{}, invalid("name", "%q differs from the name in the path %q", in.Name, short)
		}
		in.Name = short
	}
	if in.Job != nil && in.Job.Namespace != "" && fsm.StoredNamespace(in.Job.Namespace) != qns {
		return fsm.ScheduleSpec{}, invalid("job.namespace", "%q differs from the schedule's namespace %q", in.Job.Namespace, fsm.NamespaceOf(qns))
	}
	sp, err := in.Normalize()
	if err != nil {
		return sp, err
	}
	if err := s.allow(r, PermWrite, qns); err != nil {
		return sp, err
	}
	sp.Namespace, sp.Job.Namespace = qns, qns
	if wf := sp.Workflow; wf != nil {
		if wf.Namespace != "" && wf.Namespace != qns {
			return sp, invalid("workflow.namespace", "%q differs from the schedule's namespace %q", fsm.NamespaceOf(wf.Namespace), fsm.NamespaceOf(qns))
		}
		wf.Namespace = qns
		for i := range wf.Jobs {
			wf.Jobs[i].Namespace = qns
		}
	}
	sp.Name = scheduleKey(qns, sp.Name)
	// The template must pass what a submit checks against the nodes.
	limits, err := s.capacityLimits()
	if err != nil {
		return sp, err
	}
	if sp.Workflow != nil {
		jobs := make([]fsm.NewJob, len(sp.Workflow.Jobs))
		for i, j := range sp.Workflow.Jobs {
			jobs[i] = fsm.NewJob{Spec: j}
		}
		if err := limits.check(jobs, true); err != nil {
			return sp, prefixField("workflow", err)
		}
		return sp, nil
	}
	if err := limits.check([]fsm.NewJob{{Spec: sp.Job}}, false); err != nil {
		return sp, prefixField("job", err)
	}
	return sp, nil
}

// createSchedule handles POST /v1/schedules (leader only).
func (s *server) createSchedule(w http.ResponseWriter, r *http.Request) {
	sp, err := s.scheduleInput(w, r, "")
	if err == nil {
		_, err = s.apply(r.Context(), fsm.CmdPutSchedule, fsm.PutSchedule{Schedule: sp, Create: true})
	}
	s.replySchedule(w, r, sp.Name, http.StatusCreated, err)
}

// updateSchedule handles PUT /v1/schedules/{name} (leader only): the
// whole spec is replaced; ticks from before the change never fire.
func (s *server) updateSchedule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	sp, err := s.scheduleInput(w, r, name)
	if err == nil {
		_, err = s.apply(r.Context(), fsm.CmdPutSchedule, fsm.PutSchedule{Schedule: sp})
	}
	s.replySchedule(w, r, name, http.StatusOK, err)
}

// deleteSchedule handles DELETE /v1/schedules/{name} (leader only).
func (s *server) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	if _, err := s.apply(r.Context(), fsm.CmdDeleteSchedule, fsm.DeleteSchedule{Name: r.PathValue("name")}); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// pauseSchedule handles POST /v1/schedules/{name}/pause and /resume.
func (s *server) pauseSchedule(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		_, err := s.apply(r.Context(), fsm.CmdPauseSchedule, fsm.PauseSchedule{Name: name, Paused: paused})
		s.replySchedule(w, r, name, http.StatusOK, err)
	}
}

// triggerSchedule handles POST /v1/schedules/{name}/trigger (leader
// only): one extra run now, recorded as manual, subject to the overlap
// policy. The reply names the job (empty when the policy skipped it).
func (s *server) triggerSchedule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if _, err := s.scheduleInfo(name); err != nil {
		s.writeError(w, r, err)
		return
	}
	now := s.clock.Now().UTC()
	id := s.ids.NewID()
	res, err := s.apply(r.Context(), fsm.CmdFireSchedules, fsm.FireSchedules{Fires: []fsm.Fire{
		{Schedule: name, Tick: now, JobID: id, Manual: true}}})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if why := res.Skipped[fsm.FireKey(name, now)]; why != "" {
		s.writeError(w, r, fmt.Errorf("%w: %s", fsm.ErrNotFound, why))
		return
	}
	info, err := s.scheduleInfo(name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if n := len(info.Fires); n == 0 || info.Fires[n-1].JobID != id {
		writeJSON(w, http.StatusConflict, ErrorBody{Error: "trigger skipped: " + lastSkip(info), Code: CodeConflict})
		return
	}
	writeJSON(w, http.StatusCreated, TriggerResponse{JobID: id, Workflow: info.Fires[len(info.Fires)-1].Workflow})
}

func lastSkip(info *ScheduleInfo) string {
	if n := len(info.Fires); n > 0 {
		return info.Fires[n-1].Skipped
	}
	return "unknown"
}

func (s *server) replySchedule(w http.ResponseWriter, r *http.Request, name string, status int, err error) {
	var info *ScheduleInfo
	if err == nil {
		info, err = s.scheduleInfo(name)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, status, info)
}

// getSchedule handles GET /v1/schedules/{name}.
func (s *server) getSchedule(w http.ResponseWriter, r *http.Request) {
	s.replySchedule(w, r, r.PathValue("name"), http.StatusOK, nil)
}

// listSchedules handles GET /v1/schedules (name order).
func (s *server) listSchedules(w http.ResponseWriter, r *http.Request) {
	out := ScheduleList{Schedules: []ScheduleInfo{}}
	now := s.clock.Now()
	ns, err := queryNamespace(r, true)
	if err == nil {
		err = s.allow(r, PermRead, ns)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	err = s.state.View(func(tx *fsm.Tx) error {
		return tx.ForEachSchedule(func(sc *fsm.Schedule) bool {
			if ns != AllNamespaces && sc.Spec.Namespace != ns {
				return true
			}
			out.Schedules = append(out.Schedules, describeSchedule(tx, sc, now))
			return true
		})
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) scheduleInfo(name string) (*ScheduleInfo, error) {
	if _, short := splitScheduleKey(name); CheckScheduleName("name", short) != nil {
		return nil, fmt.Errorf("%w: schedule %q", fsm.ErrNotFound, name)
	}
	var info ScheduleInfo
	now := s.clock.Now()
	err := s.state.View(func(tx *fsm.Tx) error {
		sc, err := tx.Schedule(name)
		if err != nil {
			return err
		}
		info = describeSchedule(tx, sc, now)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &info, nil
}

// describeSchedule adds the next tick and the fired jobs' states.
func describeSchedule(tx *fsm.Tx, sc *fsm.Schedule, now time.Time) ScheduleInfo {
	info := ScheduleInfo{Schedule: *sc, Fires: make([]FireState, 0, len(sc.History))}
	_, info.Spec.Name = splitScheduleKey(sc.Spec.Name) // the name the user gave; Spec.Namespace says where
	redactSpec(&info.Schedule.Spec.Job)                // a copy of the template: state is not edited
	if wf := info.Spec.Workflow; wf != nil {           // a pointer into state: redact copies
		c := *wf
		c.Jobs = slices.Clone(wf.Jobs)
		for i := range c.Jobs {
			redactSpec(&c.Jobs[i])
		}
		info.Spec.Workflow = &c
	}
	if c, err := fsm.ParseCron(sc.Spec.Cron, sc.Spec.TimeZone); err == nil && !sc.Spec.Paused {
		from := sc.DecidedThrough()
		if now.After(from) {
			from = now
		}
		next := c.Next(from, sc.Anchor)
		if !next.IsZero() && (sc.Spec.EndAt == nil || !next.After(*sc.Spec.EndAt)) {
			info.NextFire = next.In(c.Location()).Format(time.RFC3339)
			info.NextFireUTC = next.UTC().Format(time.RFC3339)
		}
	}
	for _, f := range sc.History {
		fs := FireState{FireRecord: f}
		if f.JobID != "" {
			fs.Outcome = "gone"
			if f.Workflow {
				if w, err := tx.Workflow(f.JobID); err == nil {
					fs.Outcome = string(w.State)
				}
			} else if j, err := tx.Job(f.JobID); err == nil {
				fs.Outcome = string(j.State)
			}
		}
		info.Fires = append(info.Fires, fs)
	}
	info.History = nil // shown as Fires
	return info
}

// scheduleKey is the stored name of schedule name in namespace ns (stored
// form): the name itself in the default namespace, "ns:name" elsewhere.
func scheduleKey(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + ":" + name
}

// splitScheduleKey is the inverse of scheduleKey.
func splitScheduleKey(key string) (ns, name string) {
	if i := strings.LastIndexByte(key, ':'); i >= 0 {
		return key[:i], key[i+1:]
	}
	return "", key
}

// scheduleScoped turns {name} into the schedule's key in ?namespace= and
// checks perm there before h runs.
func (s *server) scheduleScoped(perm Permission, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ns, err := queryNamespace(r, false)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := s.allow(r, perm, ns); err != nil {
			s.acl.refuse(w, r, err)
			return
		}
		name := r.PathValue("name")
		if strings.Contains(name, ":") {
			s.writeError(w, r, invalid("name", "%q: use ?namespace= to name another namespace's schedule", name))
			return
		}
		r.SetPathValue("name", scheduleKey(ns, name))
		h(w, r)
	}
}
