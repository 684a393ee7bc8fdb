package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// A client's attempt reports (started, finished) go up through a server:
//
//	POST /v1/internal/reports/{node}?index=I   body: fsm.ReportAttempts
//
// The server checks that every report is the node's own (the report names
// the node and the attempt is assigned there: a client cannot report for
// another's attempts), then commits them through the leader in an entry
// it shares with the other clients' reports waiting at that moment
// (reportgroup.go).
// index is the client's work index: the server first catches up to it, so
// it knows every attempt the client was given. The answer is the apply's
// (applyResponse): one error per refused report in Result.Skipped.

// maxClientReports bounds one request (exec batches at most 256).
const maxClientReports = 1024

func (n *Node) handleClientReports(w http.ResponseWriter, r *http.Request) {
	node := r.PathValue("node")
	if err := certBindsNode(r, node); err != nil {
		workError(w, http.StatusForbidden, "forbidden", err.Error())
		return
	}
	index, err := queryIndex(r)
	if err != nil {
		workError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	var body fsm.ReportAttempts
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(&body); err != nil {
		workError(w, http.StatusBadRequest, "bad_request", "body: "+err.Error())
		return
	}
	if len(body.Reports) == 0 || len(body.Reports) > maxClientReports {
		workError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("reports: %d (want 1..%d)", len(body.Reports), maxClientReports))
		return
	}
	if err := n.waitApplied(r.Context(), index, n.cfg.WorkStreams.CatchUp); err != nil {
		workError(w, http.StatusConflict, "index_ahead", err.Error())
		return
	}
	if err := n.fsm.View(func(tx *fsm.Tx) error {
		for i, rep := range body.Reports {
			if rep.Node != node {
				return fmt.Errorf("reports[%d].node: %q, but this is %q's stream", i, rep.Node, node)
			}
			a, err := tx.Attempt(rep.JobID, rep.Attempt)
			if errors.Is(err, fsm.ErrNotFound) {
				continue // gone (job deleted): the apply refuses it by itself
			}
			if err != nil {
				return err
			}
			if a.Node != node {
				return fmt.Errorf("reports[%d]: attempt %d of job %s is assigned to %s, not %s", i, rep.Attempt, rep.JobID, a.Node, node)
			}
		}
		return nil
	}); err != nil {
		workError(w, http.StatusForbidden, "forbidden", err.Error())
		return
	}
	res, err := n.reports.commit(r.Context(), body.Reports)
	switch {
	case err == nil:
		writeApply(w, http.StatusOK, applyResponse{Result: res})
	case res != nil:
		writeApply(w, http.StatusOK, applyResponse{Result: res, Error: err.Error(), Code: errorCode(err)})
	default:
		writeApply(w, http.StatusServiceUnavailable, applyResponse{Error: err.Error(), Code: errorCode(err)})
	}
}

// SendReports is the client's side of the reports endpoint: it posts reps
// to the server at base (e.g. "http://10.0.0.5:7070") and returns one error
// per report (nil: applied), or err when none was applied (errs is nil
// then). auth adds the cluster-internal credential (nil: none).
func SendReports(ctx context.Context, hc *http.Client, base, node string, index uint64, reps []fsm.ReportAttempt, auth func(http.Header)) (errs []error, err error) {
	body, err := json.Marshal(fsm.ReportAttempts{Reports: reps})
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("%s%sreports/%s?index=%d", base, InternalPrefix, node, index)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != nil {
		auth(req.Header)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: reports to %s: %w", ErrIndeterminate, base, err)
	}
	defer resp.Body.Close()
	var ar applyResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&ar); err != nil {
		return nil, fmt.Errorf("%w: reports to %s: status %d: %v", ErrIndeterminate, base, resp.StatusCode, err)
	}
	if ar.Result == nil {
		if ar.Error == "" {
			ar.Error = resp.Status
		}
		return nil, fmt.Errorf("reports to %s: %w", base, decodeError(ar.Code, ar.Error))
	}
	errs = make([]error, len(reps))
	if len(reps) == 1 {
		if ar.Error != "" {
			errs[0] = decodeError(ar.Code, ar.Error)
		}
		return errs, nil
	}
	if ar.Error != "" {
		// The entry as a whole was refused (single reports' refusals never
		// do that): send them one by one so each gets its answer.
		for i := range reps {
			one, err := SendReports(ctx, hc, base, node, index, reps[i:i+1], auth)
			if err != nil {
				return nil, err
			}
			errs[i] = one[0]
		}
		return errs, nil
	}
	for i := range reps {
		errs[i] = fsm.ReportBatchItemErr(ar.Result, i)
	}
	return errs, nil
}
