package fsm

import (
	"math/rand/v2"
	"testing"
	"time"
)

// randomReport is a report with edgeValues; fallback sets a field
// readReportFrom leaves to decode.
func randomReport(rng *rand.Rand, fallback bool) ReportAttempt {
	e := edgeValues{rng}
	states := []AttemptState{AttemptAssigned, AttemptRunning, AttemptSucceeded, AttemptFailed, AttemptLost, "odd", ""}
	r := ReportAttempt{JobID: e.str(), Attempt: int(e.i64()), FencingToken: e.u64(), Node: e.str(),
		State: states[rng.IntN(len(states))]}
	if rng.IntN(2) == 0 {
		r.Reason, r.Signal, r.StderrTail, r.ArtifactsWarning = e.str(), e.str(), e.str(), e.str()
		r.StartedAt, r.FinishedAt = e.tm(), e.tm()
		r.OOM, r.ResultTruncated = rng.IntN(2) == 0, rng.IntN(2) == 0
		r.PeakMemoryB, r.CPUTimeNs = e.i64(), e.i64()
		if s := e.str(); s != "" {
			r.Result = []byte(s)
		}
	}
	if rng.IntN(2) == 0 {
		code := int(e.i64())
		r.ExitCode = &code
	}
	if fallback {
		switch rng.IntN(3) {
		case 0:
			r.Artifacts = []Artifact{{Path: "a", Size: 1}}
		case 1:
			r.Outputs = &Outputs{}
		default:
			r.GPUMemoryOver = &GPUMemoryOver{}
		}
	}
	return r
}

func randomPlace(rng *rand.Rand, fallback bool) Place {
	e := edgeValues{rng}
	var p Place
	for range rng.IntN(4) {
		pl := Placement{JobID: e.str(), Node: e.str(), Resources: Resources{CPU: e.i64(), MemoryMB: e.i64(), GPUMemoryMiB: e.i64()}}
		if fallback {
			switch rng.IntN(4) {
			case 0:
				pl.GPUs = []string{"GPU-1"}
			case 1:
				pl.GPUShare = "GPU-2"
			case 2:
				pl.Tasks = []TaskSlot{{Node: "n"}}
			default:
				pl.Resources.Named = map[string]int64{"gpu": 1}
			}
		}
		p.Placements = append(p.Placements, pl)
	}
	return p
}

// checkPayloadReader: what read takes of b decode reads the same, and
// the reader takes the payload the codec wrote exactly when plain.
func checkPayloadReader[T any](t *testing.T, rng *rand.Rand, v *T, plain bool, read func([]byte, *T) bool) {
	t.Helper()
	b, err := encode(v)
	if err != nil {
		t.Fatal(err)
	}
	var got T
	if ok := read(b, &got); ok != plain {
		t.Fatalf("%+v: the hand reader took it: %v (%x)", v, ok, b)
	}
	dec := func(b []byte, p *T) error { return decodeByHand(b, p, read) }
	checkFastRead(t, b, read, dec)
	for range 4 {
		checkFastRead(t, damaged(rng, b), read, dec)
	}
}

// TestPayloadReadersMatchDecode: the place and report payloads the codec
// writes are read by hand exactly when plain, and what the readers take
// (of those and of damaged ones) decode reads the same.
func TestPayloadReadersMatchDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for i := range 3000 {
		fallback := i%4 == 3
		p := randomPlace(rng, fallback)
		checkPayloadReader(t, rng, &p, !fallback && len(p.Placements) > 0, readPlace) // none: null, left to decode
		one := randomReport(rng, fallback)
		checkPayloadReader(t, rng, &one, !fallback, readReport)
		var batch ReportAttempts
		for range rng.IntN(4) {
			batch.Reports = append(batch.Reports, randomReport(rng, false))
		}
		if fallback {
			batch.Reports = append(batch.Reports, randomReport(rng, true))
		}
		checkPayloadReader(t, rng, &batch, !fallback && len(batch.Reports) > 0, readReports)
	}
}

// The applier reads entries through decodePayload: a plain placement and
// report apply exactly as before, and one with a field the readers leave
// to decode too.
func TestPayloadReadersApply(t *testing.T) {
	h := newHarness(t)
	h.addNode("n1")
	h.submit(jobID(1), jobID(2))
	h.must(CmdPlace, Place{Placements: []Placement{{JobID: jobID(1), Node: "n1", Resources: Resources{CPU: 100}}}})
	at := h.attempt(jobID(1), 1)
	h.must(CmdReportBatch, ReportAttempts{Reports: []ReportAttempt{{JobID: jobID(1), Attempt: 1, FencingToken: at.FencingToken, Node: "n1",
		State: AttemptRunning, StartedAt: t0.Add(time.Second)}}})
	h.must(CmdReport, ReportAttempt{JobID: jobID(1), Attempt: 1, FencingToken: at.FencingToken, Node: "n1",
		State: AttemptSucceeded, ExitCode: intp(0), FinishedAt: t0.Add(2 * time.Second), Artifacts: []Artifact{{Path: "out.txt", Size: 3}}})
	got := h.attempt(jobID(1), 1)
	if got.State != AttemptSucceeded || !got.StartedAt.Equal(t0.Add(time.Second)) || len(got.Artifacts) != 1 || got.Resources.CPU != 100 {
		t.Fatalf("attempt after the reports: %+v", got)
	}
}

// FuzzPayloadReaders: on any bytes the payload readers never panic, and
// what they take decode reads the same.
func FuzzPayloadReaders(f *testing.F) {
	rng := rand.New(rand.NewPCG(23, 24))
	for range 10 {
		p := randomPlace(rng, false)
		b, _ := encode(&p)
		f.Add(b)
		batch := ReportAttempts{Reports: []ReportAttempt{randomReport(rng, false), randomReport(rng, false)}}
		b, _ = encode(&batch)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkFastRead(t, b, readPlace, func(b []byte, p *Place) error { return decodeByHand(b, p, readPlace) })
		checkFastRead(t, b, readReports, func(b []byte, p *ReportAttempts) error { return decodeByHand(b, p, readReports) })
		checkFastRead(t, b, readReport, func(b []byte, p *ReportAttempt) error { return decodeByHand(b, p, readReport) })
	})
}
