package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/exec"
	"github.com/foreman-sched/foreman/fsm"
)

// A simulated client (foreman bench nodes): the client protocol over real
// sockets (cluster/workstream.go: hello, beats, work and ping frames;
// cluster/clientreports.go: reports) with a fake executor that finishes
// each attempt after a sampled duration. Modelled on Kubernetes' KWOK and
// Nomad's nomad-nodesim: the servers cannot tell it from a real client,
// and thousands fit in one process.

// simFleet is every simulated client of one run.
type simFleet struct {
	run     string
	servers []string
	sims    []*sim
	// jobTime samples how long an attempt "runs"; long reports whether a
	// job is held until finishLong.
	jobTime func() time.Duration
	long    func(spec *fsm.JobSpec) bool

	finishLongCh chan struct{} // closed: long jobs finish too

	mu        sync.Mutex
	seen      map[string]time.Time // job/attempt → when a sim first got it
	firstSeen map[string]time.Time // job → when its first attempt was seen
	onSeen    func(jobID string, num int, node string, at time.Time)
	beatAcks  []time.Duration // beat sent → a ping confirmed it

	falseLost atomic.Int64 // attempts taken away from a live sim before it finished them
	moves     atomic.Int64 // streams a server handed to another (a move frame)
	finished  atomic.Int64 // finish reports applied
	reportErr atomic.Value // first report error (string)
}

// sim is one simulated client.
type sim struct {
	f      *simFleet
	name   string
	dialer *net.Dialer  // from the sim's own address
	hc     *http.Client // its reports
	killed atomic.Bool
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	index    uint64
	server   string
	attached bool
	acked    time.Time              // when a ping last confirmed a new beat
	held     map[string]*simAttempt // job/attempt → attempt it holds
	gotWork  bool                   // a work frame came (before it, it beats as busy)
	reporter *exec.BatchingReporter
	// busy gets a signal when attempts arrive while it held none: it beats
	// at once at the busy interval, as a real client (buffered).
	busy chan struct{}
}

type simAttempt struct {
	a         fsm.Attempt
	long      bool
	finishing bool
	started   time.Time
}

func attemptKey(jobID string, num int) string { return jobID + "/" + strconv.Itoa(num) }

// newSim makes a simulated client that dials from its own loopback
// address (127.77.x.y), so the servers' per-IP connection limit and the
// ephemeral ports of one address are no bound.
func newSim(f *simFleet, i int) *sim {
	ip := net.IPv4(127, 77, byte(i/250), byte(i%250+1))
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, LocalAddr: &net.TCPAddr{IP: ip}}
	s := &sim{f: f, name: fmt.Sprintf("sim-%s-%05d", f.run, i+1), held: map[string]*simAttempt{}, done: make(chan struct{}), busy: make(chan struct{}, 1),
		dialer: d, hc: &http.Client{Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute}}}
	s.reporter = exec.NewBatchingReporter(simReports{s})
	return s
}

// self is what the sim says it is: a 4-CPU, 8 GiB node with 16 slots,
// labelled sim=<run>, running the process driver.
func (s *sim) self() fsm.Node {
	return fsm.Node{Name: s.name, HTTPAddr: "127.0.0.1:1", Slots: 16, Drivers: []string{exec.ProcessDriverName},
		Capacity: fsm.Resources{CPU: 4000, MemoryMB: 8192}, Labels: map[string]string{"sim": s.f.run}, Version: "sim"}
}

// run keeps a stream to one server after another until ctx ends.
func (s *sim) run(ctx context.Context) {
	defer close(s.done)
	// A planned move (cluster/clientspread.go) is followed at once, to
	// the server named, as by a real client (cli/agent/workclient.go).
	_ = cluster.KeepStreaming(ctx, s.f.servers, s.stream, func(_ string, err error, _ time.Duration) {
		if errors.As(err, new(cluster.MovedTo)) {
			s.f.moves.Add(1)
		}
	})
}

// stream holds one server's stream until it ends. It writes the request
// by hand, as net/http's client would (a chunked body, one chunk per up
// frame), on a connection of its own: through http.Client each sim held
// four goroutines (the transport's two per connection, the request
// body's pipe, the reader), and the simulator shares the machine with
// the servers it measures.
func (s *sim) stream(ctx context.Context, server string) (healthy bool, retry time.Duration, err error) {
	s.mu.Lock()
	index := s.index
	busy := "" // as an agent's client: admitted first while it holds attempts
	if len(s.held) > 0 {
		busy = "&busy=1"
	}
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	u, err := url.Parse(server)
	if err != nil {
		return false, 0, err
	}
	conn, err := s.dialer.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return false, 0, err
	}
	defer conn.Close()
	defer context.AfterFunc(ctx, func() { conn.Close() })()
	var upMu sync.Mutex // the hello, then the beats: one chunk at a time
	up := func(f cluster.UpFrame) error {
		b, err := json.Marshal(f)
		if err != nil {
			return err
		}
		upMu.Lock()
		defer upMu.Unlock()
		_, err = fmt.Fprintf(conn, "%x\r\n%s\n\r\n", len(b)+1, b)
		return err
	}
	if _, err := fmt.Fprintf(conn, "POST %swork/%s?index=%d%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n",
		cluster.InternalPrefix, s.name, index, busy, u.Host); err != nil {
		return false, 0, err
	}
	self := s.self()
	if err := up(cluster.UpFrame{Type: cluster.UpFrameHello, Node: &self}); err != nil {
		return false, 0, err
	}
	var sentMu sync.Mutex
	sent := map[uint64]time.Time{}
	go func() {
		tick := time.NewTimer(0)
		defer tick.Stop()
		for seq := uint64(1); ; seq++ {
			every := s.beatEvery()
			sentMu.Lock()
			sent[seq] = time.Now()
			delete(sent, seq-32)
			sentMu.Unlock()
			if up(cluster.UpFrame{Type: cluster.UpFrameBeat, Seq: seq, EveryMS: every.Milliseconds()}) != nil {
				return
			}
			tick.Reset(every)
		wait:
			for {
				select {
				case <-ctx.Done():
					return
				case <-s.busy:
					if every > cluster.ClientBeatInterval {
						break wait
					}
				case <-tick.C:
					break wait
				}
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return false, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		if sec, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
			retry = time.Duration(sec) * time.Second
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return false, retry, errors.New(resp.Status)
	}
	s.mu.Lock()
	s.server = server
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.server, s.attached = "", false
		s.mu.Unlock()
	}()
	silence := func() time.Duration { return 3 * s.beatEvery() } // as a real client (cli/agent/workclient.go)
	watchdog := time.AfterFunc(silence(), cancel)
	defer watchdog.Stop()
	var lastAck uint64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		watchdog.Reset(silence())
		var fr cluster.WorkFrame
		if err := json.Unmarshal(sc.Bytes(), &fr); err != nil {
			return healthy, 0, err
		}
		healthy = true
		if fr.Acked > lastAck {
			sentMu.Lock()
			at, ok := sent[fr.Acked]
			sentMu.Unlock()
			if ok {
				s.f.mu.Lock()
				s.f.beatAcks = append(s.f.beatAcks, time.Since(at))
				s.f.mu.Unlock()
			}
			lastAck = fr.Acked
			s.mu.Lock()
			s.attached, s.acked = true, time.Now()
			s.mu.Unlock()
		}
		if fr.Type == cluster.WorkFrameMove && fr.Server != "" {
			return healthy, 0, cluster.MovedTo(fr.Server)
		}
		if fr.Type != cluster.WorkFrameWork {
			continue
		}
		var work []exec.Assignment
		if err := json.Unmarshal(fr.Work, &work); err != nil {
			return healthy, 0, err
		}
		s.take(fr.Index, work)
	}
	return healthy, 0, sc.Err()
}

// beatEvery is the interval of the sim's next beat, as a real client's
// (cli/agent/workclient.go): the busy one while it holds attempts or has
// had no work frame yet, the idle one otherwise.
func (s *sim) beatEvery() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gotWork && len(s.held) == 0 {
		return cluster.ClientIdleBeatInterval
	}
	return cluster.ClientBeatInterval
}

// take applies a work frame: new attempts start (their finish is
// scheduled), attempts gone before the sim finished them count as false
// "lost" (the bench cancels nothing; a killed sim takes nothing).
func (s *sim) take(index uint64, work []exec.Assignment) {
	now := time.Now()
	s.mu.Lock()
	if index < s.index || s.killed.Load() {
		s.mu.Unlock()
		return
	}
	s.index = index
	if len(work) > 0 && (!s.gotWork || len(s.held) == 0) {
		select {
		case s.busy <- struct{}{}:
		default:
		}
	}
	s.gotWork = true
	in := map[string]bool{}
	var started []*simAttempt
	for i := range work {
		a := work[i].Attempt
		k := attemptKey(a.JobID, a.Num)
		in[k] = true
		if _, ok := s.held[k]; ok || a.State != fsm.AttemptAssigned {
			continue
		}
		sa := &simAttempt{a: a, long: s.f.long(&work[i].Spec), started: now}
		s.held[k] = sa
		started = append(started, sa)
	}
	for k, sa := range s.held {
		if !in[k] {
			if !sa.finishing {
				s.f.falseLost.Add(1)
			}
			delete(s.held, k)
		}
	}
	s.mu.Unlock()
	for _, sa := range started {
		s.f.sawAttempt(sa.a.JobID, sa.a.Num, s.name, now)
		if sa.long {
			go s.finishWhenReleased(sa)
			continue
		}
		time.AfterFunc(s.f.jobTime(), func() { s.finish(sa) })
	}
}

func (s *sim) finishWhenReleased(sa *simAttempt) {
	select {
	case <-s.f.finishLongCh:
		s.finish(sa)
	case <-s.done:
	}
}

// finish reports sa succeeded (with its start: no separate start report).
func (s *sim) finish(sa *simAttempt) {
	if s.killed.Load() {
		return
	}
	s.mu.Lock()
	if sa.finishing {
		s.mu.Unlock()
		return
	}
	sa.finishing = true
	s.mu.Unlock()
	zero := 0
	rep := fsm.ReportAttempt{JobID: sa.a.JobID, Attempt: sa.a.Num, FencingToken: sa.a.FencingToken, Node: s.name,
		State: fsm.AttemptSucceeded, StartedAt: sa.started, FinishedAt: time.Now(), ExitCode: &zero}
	for try := 0; try < 20 && !s.killed.Load(); try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := s.reporter.Report(ctx, rep)
		cancel()
		if err == nil {
			s.f.finished.Add(1)
			return
		}
		if errors.Is(err, fsm.ErrStaleToken) || errors.Is(err, fsm.ErrConflict) || errors.Is(err, fsm.ErrNotFound) {
			s.f.reportErr.CompareAndSwap(nil, err.Error())
			return
		}
		time.Sleep(time.Duration(100*(try+1)) * time.Millisecond) // a server moving or the leader changing
	}
}

// kill stops the sim as kill -9 would: no more beats, reports or frames.
func (s *sim) kill() {
	s.killed.Store(true)
	s.cancel()
	<-s.done
}

// simReports sends a sim's reports through the server of its stream.
type simReports struct{ s *sim }

func (r simReports) ReportBatch(ctx context.Context, reps []fsm.ReportAttempt) ([]error, error) {
	r.s.mu.Lock()
	server, index := r.s.server, r.s.index
	r.s.mu.Unlock()
	if server == "" {
		server = r.s.f.servers[rand.IntN(len(r.s.f.servers))]
	}
	return cluster.SendReports(ctx, r.s.hc, server, r.s.name, index, reps, nil)
}

// sawAttempt records when an attempt was first seen by a sim.
func (f *simFleet) sawAttempt(jobID string, num int, node string, at time.Time) {
	f.mu.Lock()
	k := attemptKey(jobID, num)
	if _, ok := f.seen[k]; !ok {
		f.seen[k] = at
		if _, ok := f.firstSeen[jobID]; !ok {
			f.firstSeen[jobID] = at
		}
	}
	cb := f.onSeen
	f.mu.Unlock()
	if cb != nil {
		cb(jobID, num, node, at)
	}
}

// spread counts the attached sims per server (every server of the
// fleet, with 0 for one that holds none).
func (f *simFleet) spread() map[string]int {
	out := map[string]int{}
	for _, srv := range f.servers {
		out[srv] = 0
	}
	for _, s := range f.sims {
		s.mu.Lock()
		if s.server != "" && !s.killed.Load() {
			out[s.server]++
		}
		s.mu.Unlock()
	}
	return out
}

// attachedCount is how many sims have a stream whose beats the leader
// confirmed.
func (f *simFleet) attachedCount() int {
	n := 0
	for _, s := range f.sims {
		s.mu.Lock()
		if s.attached {
			n++
		}
		s.mu.Unlock()
	}
	return n
}

// confirmedSince counts the live sims that had a beat confirmed after t.
func (f *simFleet) confirmedSince(t time.Time) (n, live int) {
	for _, s := range f.sims {
		if s.killed.Load() {
			continue
		}
		live++
		s.mu.Lock()
		if s.attached && s.acked.After(t) {
			n++
		}
		s.mu.Unlock()
	}
	return n, live
}

// heldBy returns, per sim, the attempts of the given jobs it holds.
func (f *simFleet) holders(jobs map[string]bool) map[*sim][]string {
	out := map[*sim][]string{}
	for _, s := range f.sims {
		s.mu.Lock()
		for _, sa := range s.held {
			if jobs[sa.a.JobID] {
				out[s] = append(out[s], sa.a.JobID)
			}
		}
		s.mu.Unlock()
	}
	return out
}
