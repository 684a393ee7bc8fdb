package fsm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// CmdReportBatch carries many executor reports in one raft entry, so a node
// that finishes many attempts at once pays for one entry (and one forward to
// the leader) instead of one each.
const CmdReportBatch CommandType = "report_batch" // ReportAttempts

// ReportAttempts applies each report exactly as CmdReport would, in order.
// A report that Apply refuses (stale token, not found, bad state) is skipped
// without touching the others: Result.Skipped[strconv.Itoa(i)] holds
// "<code>: <message>" for report i, and ReportBatchItemErr turns it back into
// an error wrapping the same sentinel a single CmdReport would return.
type ReportAttempts struct {
	Reports []ReportAttempt `json:"reports"`
}

// reportBatch applies the reports one by one. Every refusal of report()
// happens before it writes, so a refused item changed nothing; should one
// ever come after a write, the whole entry is refused instead (the batch
// is rolled back and the caller falls back to single reports).
func (a *applier) reportBatch(p *ReportAttempts, res *Result) error {
	wrote := a.wrote
	for i := range p.Reports {
		a.wrote = false
		err := a.report(&p.Reports[i], res)
		itemWrote := a.wrote
		wrote = wrote || itemWrote
		if err == nil {
			continue
		}
		if itemWrote || !isRefusal(err) {
			a.wrote = wrote
			return fmt.Errorf("report %d: %w", i, err)
		}
		skip(res, strconv.Itoa(i), batchErrCode(err)+": "+err.Error())
	}
	a.wrote = wrote
	return nil
}

// batchErrCodes map the refusals a report can meet to stable codes that
// survive the JSON a follower receives when it forwards the command.
var batchErrCodes = []struct {
	code string
	err  error
}{
	{"stale_token", ErrStaleToken},
	{"not_found", ErrNotFound},
	{"bad_command", ErrBadCommand},
	{"conflict", ErrConflict},
}

func batchErrCode(err error) string {
	for _, c := range batchErrCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return "refused"
}

// ReportBatchItemErr is report i's outcome in the Result of a
// CmdReportBatch entry: nil if it was applied, else an error wrapping the
// sentinel (ErrStaleToken, ErrNotFound, ErrBadCommand, ErrConflict) that the
// same report alone would have returned.
func ReportBatchItemErr(res *Result, i int) error {
	s, ok := res.Skipped[strconv.Itoa(i)]
	if !ok {
		return nil
	}
	code, msg, _ := strings.Cut(s, ": ")
	for _, c := range batchErrCodes {
		if c.code == code {
			return fmt.Errorf("%w: %s", c.err, msg)
		}
	}
	return fmt.Errorf("%w: %s", ErrConflict, s)
}
