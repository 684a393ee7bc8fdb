package httpapi

import (
	"net/http"
	"strconv"

	"github.com/foreman-sched/foreman/fsm"
)

// HeaderAttempt names the attempt whose result GET /v1/jobs/{id}/result
// returned.
const HeaderAttempt = "X-Foreman-Attempt"

// jobResult handles GET /v1/jobs/{id}/result: the bytes the job's last
// finished attempt wrote to its result file (404 before one finished).
func (s *server) jobResult(w http.ResponseWriter, r *http.Request) {
	var res []byte
	var num int
	err := s.state.View(func(tx *fsm.Tx) error {
		var err error
		res, num, err = tx.JobResult(r.PathValue("id"))
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set(HeaderAttempt, strconv.Itoa(num))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(res) // the client went away; nothing useful to do
}
