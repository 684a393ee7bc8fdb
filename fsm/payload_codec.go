package fsm

// Every job's placement and reports reach every server as the payloads of
// place, report and report_batch entries, so those are read by hand
// instead of by reflection (2–4% of each server's CPU with 5,000 clients).
// The readers take exactly what the codec writes for the common payloads
// (no GPUs, gang tasks, named resources, artifacts, outputs or GPU memory
// reports) and give up on anything else, which decodePayload then decodes
// as before; TestPayloadReadersMatchDecode and FuzzPayloadReaders compare
// them with decode.

// decodePayload is cmd.DecodePayload(p), by hand where a reader above
// takes the payload.
func decodePayload[P any](cmd *Command, p *P) error {
	if cmd.V != 1 {
		var ok bool
		switch v := any(p).(type) {
		case *Place:
			ok = readHand(cmd.Payload, v, readPlace)
		case *ReportAttempt:
			ok = readHand(cmd.Payload, v, readReport)
		case *ReportAttempts:
			ok = readHand(cmd.Payload, v, readReports)
		}
		if ok {
			return nil
		}
	}
	return cmd.DecodePayload(p)
}

// readPlace reads {"placements": [{"node", "job_id", "resources"}...]}.
func readPlace(b []byte, p *Place) bool {
	r, count, ok := listPayload(b, "placements")
	if !ok {
		return false
	}
	p.Placements = make([]Placement, count)
	for i := range p.Placements {
		pl := &p.Placements[i]
		major, n, rest, ok := cborHeadShortest(r.b)
		if !ok || major != 5 || n != 3 {
			return false
		}
		r.b, r.n = rest, 3
		if !r.key("node") || !r.text(&pl.Node) || !r.key("job_id") || !r.text(&pl.JobID) ||
			!r.key("resources") || !r.resources(&pl.Resources) || r.n != 0 {
			return false
		}
	}
	return len(r.b) == 0
}

// readReports reads {"reports": [report...]}.
func readReports(b []byte, p *ReportAttempts) bool {
	r, count, ok := listPayload(b, "reports")
	if !ok {
		return false
	}
	p.Reports = make([]ReportAttempt, count)
	for i := range p.Reports {
		rest, ok := readReportFrom(r.b, &p.Reports[i])
		if !ok {
			return false
		}
		r.b = rest
	}
	return len(r.b) == 0
}

// readReport reads one report as a whole payload.
func readReport(b []byte, rep *ReportAttempt) bool {
	rest, ok := readReportFrom(b, rep)
	return ok && len(rest) == 0
}

// The keys of a report in the codec's order (shorter first, then
// bytewise); the ones readReportFrom leaves to decode are not listed.
const (
	rpOOM              = "oom"
	rpNode             = "node"
	rpState            = "state"
	rpJobID            = "job_id"
	rpReason           = "reason"
	rpResult           = "result"
	rpSignal           = "signal"
	rpAttempt          = "attempt"
	rpExitCode         = "exit_code"
	rpStartedAt        = "started_at"
	rpCPUTimeNs        = "cpu_time_ns"
	rpFinishedAt       = "finished_at"
	rpStderrTail       = "stderr_tail"
	rpFencingToken     = "fencing_token"
	rpResultTruncated  = "result_truncated"
	rpArtifactsWarning = "artifacts_warning"
	rpPeakMemoryBytes  = "peak_memory_bytes"
)

// readReportFrom reads one report map at the start of b and returns what
// follows it.
func readReportFrom(b []byte, rep *ReportAttempt) ([]byte, bool) {
	major, n, b, ok := cborHeadShortest(b)
	if !ok || major != 5 || n > 17 {
		return nil, false
	}
	r := fieldReader{b: b, n: int(n)}
	if r.key(rpOOM) && (!r.boolean(&rep.OOM) || !rep.OOM) {
		return nil, false
	}
	if !r.key(rpNode) || !r.text(&rep.Node) || !r.key(rpState) || !r.state(&rep.State) ||
		!r.key(rpJobID) || !r.text(&rep.JobID) {
		return nil, false
	}
	if r.key(rpReason) && !r.nonEmptyText(&rep.Reason) {
		return nil, false
	}
	if r.key(rpResult) && !r.result(&rep.Result) {
		return nil, false
	}
	if r.key(rpSignal) && !r.nonEmptyText(&rep.Signal) {
		return nil, false
	}
	if !r.key(rpAttempt) || !r.goInt(&rep.Attempt) {
		return nil, false
	}
	if r.key(rpExitCode) {
		var code int
		if !r.goInt(&code) {
			return nil, false
		}
		rep.ExitCode = &code
	}
	if r.key(rpStartedAt) && !r.time(&rep.StartedAt, false) {
		return nil, false
	}
	if r.key(rpCPUTimeNs) && !r.nonZeroInt(&rep.CPUTimeNs) {
		return nil, false
	}
	if r.key(rpFinishedAt) && !r.time(&rep.FinishedAt, false) {
		return nil, false
	}
	if r.key(rpStderrTail) && !r.nonEmptyText(&rep.StderrTail) {
		return nil, false
	}
	if !r.key(rpFencingToken) || !r.uint(&rep.FencingToken) {
		return nil, false
	}
	if r.key(rpResultTruncated) && (!r.boolean(&rep.ResultTruncated) || !rep.ResultTruncated) {
		return nil, false
	}
	if r.key(rpArtifactsWarning) && !r.nonEmptyText(&rep.ArtifactsWarning) {
		return nil, false
	}
	if r.key(rpPeakMemoryBytes) && !r.nonZeroInt(&rep.PeakMemoryB) {
		return nil, false
	}
	return r.b, r.n == 0
}

// listPayload reads the head of a payload {key: [...]} and returns a
// reader at its first element and the element count.
func listPayload(b []byte, key string) (fieldReader, int, bool) {
	major, n, b, ok := cborHeadShortest(b)
	if !ok || major != 5 || n != 1 {
		return fieldReader{}, 0, false
	}
	r := fieldReader{b: b, n: 1}
	if !r.key(key) {
		return fieldReader{}, 0, false
	}
	count, ok := r.arrayHead()
	return r, count, ok
}

// arrayHead reads an array's head: its count, at most one element a byte
// of what is left.
func (r *fieldReader) arrayHead() (int, bool) {
	major, n, rest, ok := cborHeadShortest(r.b)
	if !ok || major != 4 || n > uint64(len(rest)) {
		return 0, false
	}
	r.b = rest
	return int(n), true
}
