package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// scheduleRoutes registers /v1/schedules.
func (s *server) scheduleRoutes(m *http.ServeMux) {
	m.HandleFunc("POST /v1/schedules", s.write(s.createSchedule))
	m.HandleFunc("GET /v1/schedules", s.read(s.listSchedules))
	m.HandleFunc("GET /v1/schedules/{name}", s.read(s.getSchedule))
	m.HandleFunc("PUT /v1/schedules/{name}", s.write(s.updateSchedule))
	m.HandleFunc("DELETE /v1/schedules/{name}", s.write(s.deleteSchedule))
	m.HandleFunc("POST /v1/schedules/{name}/trigger", s.write(s.triggerSchedule))
	m.HandleFunc("POST /v1/schedules/{name}/pause", s.write(s.pauseSchedule(true)))
	m.HandleFunc("POST /v1/schedules/{name}/resume", s.write(s.pauseSchedule(false)))
}

// scheduleInput reads and normalises a schedule body; name (from the
// path, for PUT) must match the body's name if that is given.
func (s *server) scheduleInput(w http.ResponseWriter, r *http.Request, name string) (fsm.ScheduleSpec, error) {
	var in ScheduleInput
	body, err := s.readBody(w, r)
	if err == nil {
		err = decodeStrict(body, &in)
	}
	if err != nil {
		return fsm.ScheduleSpec{}, err
	}
	if name != "" {
		if in.Name != "" && in.Name != name {
			return fsm.ScheduleSpec{}, invalid("name", "%q differs from the name in the path %q", in.Name, name)
		}
		in.Name = name
	}
	sp, err := in.Normalize()
	if err != nil {
		return sp, err
	}
	// The template must pass what a submit checks against the nodes.
	limits, err := s.capacityLimits()
	if err != nil {
		return sp, err
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
	writeJSON(w, http.StatusCreated, TriggerResponse{JobID: id})
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
	err := s.state.View(func(tx *fsm.Tx) error {
		return tx.ForEachSchedule(func(sc *fsm.Schedule) bool {
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
	if err := CheckScheduleName("name", name); err != nil {
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
	redactSpec(&info.Schedule.Spec.Job) // a copy of the template: state is not edited
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
			if j, err := tx.Job(f.JobID); err == nil {
				fs.Outcome = string(j.State)
			}
		}
		info.Fires = append(info.Fires, fs)
	}
	info.History = nil // shown as Fires
	return info
}
