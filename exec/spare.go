package exec

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Spare and recycled supervisors. Starting `foreman supervise` costs a
// fork/exec of this (large, static) binary and the Go runtime's start-up
// with every package's init: ~8 ms of CPU and, on a busy node, tens of
// milliseconds of wall time — most of a job's start latency and nearly all
// of a no-op job's CPU. So supervisors are started as `supervise --standby`
// and serve attempts one after another: each blocks on its control
// socket (fd 3, one end of a socketpair whose other end only the worker
// holds). To start an attempt the worker prepares the directory exactly as
// for a cold start and sends a standby supervisor the directory's path with
// the pre-listened lease socket attached (SCM_RIGHTS); it acknowledges, is
// that attempt's supervisor (detached like any other: its own session since
// it was started), and when the attempt is over says idle and goes back to
// the worker's pool (recycle.go has its side and what "over" means).
//
// The pool holds at most MaxIdleSupervisors; a supervisor recycled into a
// full pool replaces the one idle longest. keepSpares keeps WarmSupervisors in it by starting new ones,
// and lets supervisors idle for longer than idleTrim beyond that number go.
// A supervisor in the pool holds no job and no lease: if the worker goes
// away its socketpair reads EOF and it exits. One attempt at a time per
// supervisor holds because only an idle supervisor is in the pool, and it
// leaves the pool when handed an attempt. With MaxIdleSupervisors 0 nothing
// is recycled: a spare serves one attempt, as before recycling existed.

// spare is one standby supervisor as the worker sees it.
type spare struct {
	conn   *net.UnixConn
	exited chan struct{}
	pid    int
	served int       // attempts handed to it so far
	idle   time.Time // since when it waits in the pool
	handed time.Time // when it was handed its current attempt
}

// spawnSpare starts one standby supervisor.
func (w *Worker) spawnSpare() (*spare, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "standby-control")
	theirs := os.NewFile(uintptr(fds[1]), "standby-control")
	defer theirs.Close()
	defer ours.Close()
	args := append(append([]string{}, w.cfg.SupervisorArgs...), "--standby")
	cmd := osexec.Command(w.cfg.SupervisorPath, args...)
	// stdin, stdout and stderr are /dev/null except during an attempt,
	// when the supervisor points stdout/stderr at its supervisor.log.
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.Env = w.supervisorEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := WithHostSlack(cmd.Start); err != nil {
		return nil, err
	}
	s := &spare{exited: make(chan struct{}), pid: cmd.Process.Pid}
	go func() { // reap it while we live, spare or supervisor; init does after we die
		cmd.Wait()
		close(s.exited)
	}()
	c, err := net.FileConn(ours)
	if err != nil {
		cmd.Process.Kill()
		return nil, err
	}
	s.conn = c.(*net.UnixConn)
	w.spawned.Add(1)
	return s, nil
}

// handoffAckTimeout bounds the wait for a spare's acknowledgement.
const handoffAckTimeout = 10 * time.Second

// handoff makes the spare the supervisor of the attempt in dir. On error
// the spare is let go (it must not be used again). The spare acknowledges
// before it acts, so an error here means it never touched the attempt and
// another start is safe. A sent message alone proves nothing: a killed Go
// process keeps its sockets open until its last thread is gone, so the
// write to a dying spare can succeed.
func (s *spare) handoff(dir string, ln *os.File) (err error) {
	defer func() {
		if err != nil {
			s.conn.Close()
		}
	}()
	s.served++
	s.handed = time.Now()
	s.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, _, err := s.conn.WriteMsgUnix([]byte(dir), unix.UnixRights(int(ln.Fd())), nil); err != nil {
		return err
	}
	ack := make([]byte, 1)
	s.conn.SetReadDeadline(time.Now().Add(handoffAckTimeout))
	defer s.conn.SetReadDeadline(time.Time{})
	if n, err := s.conn.Read(ack); n == 1 && ack[0] == ctlAck {
		return nil
	} else if !errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("spare did not take the attempt: %v", err)
	}
	// This agent may have been stopped (SIGSTOP) past the deadline while
	// the ack sat in the buffer: look once more before calling it stuck.
	s.conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, _ := s.conn.Read(ack); n == 1 && ack[0] == ctlAck {
		return nil
	}
	// Stuck: make sure it is gone, then trust only an ack sent before that.
	syscall.Kill(s.pid, syscall.SIGKILL)
	<-s.exited
	if ackBuffered(s.conn) {
		return nil // it took the attempt, then died: reported as such
	}
	return errors.New("spare did not acknowledge the attempt in time")
}

// ackBuffered reads an ack the (now dead) peer sent before it died. Its
// end is closed, so the read returns the ack or EOF at once; the deadline
// must lie ahead, because a deadline already past fails a read before it
// looks at the buffer (the double start the pause-leader jepsen scenario
// caught: the spare ran the job, the worker saw no ack and started it again).
func ackBuffered(c *net.UnixConn) bool {
	c.SetReadDeadline(time.Now().Add(time.Second))
	ack := make([]byte, 1)
	n, _ := c.Read(ack)
	return n == 1 && ack[0] == ctlAck
}

// awaitIdle follows a supervisor through its attempt: done closes when the
// attempt is over (it said idle, or it exited); an idle one goes back to
// the pool. Called in its own goroutine after a successful handoff.
func (w *Worker) awaitIdle(s *spare, done chan struct{}) {
	msg := make([]byte, 1)
	n, err := s.conn.Read(msg)
	close(done)
	defer w.busy.Add(-1) // after the put: a waiting start finds it there
	if err != nil || n != 1 || msg[0] != ctlIdle || w.cfg.MaxIdleSupervisors == 0 {
		s.conn.Close() // exited (or misbehaved, or recycling is off): let it go
		return
	}
	w.recycled.Add(1)
	if !w.pool.put(s, true) {
		s.conn.Close()
	}
}

// supervisorPool holds the idle supervisors, most recently used last.
type supervisorPool struct {
	mu     sync.Mutex
	idle   []*spare
	max    int
	closed bool
	taken  chan struct{} // a supervisor left the pool: keepSpares may top it up
	// added is closed (and replaced) when a supervisor joins the pool:
	// every start waiting for one looks again (claimSupervisor).
	added   chan struct{}
	addedAt time.Time // when a supervisor last joined
	// turn is how long the last supervisor back from an attempt was away:
	// how long a busy one takes to come back (claimSupervisor).
	turn time.Duration
}

func newSupervisorPool(max int) *supervisorPool {
	return &supervisorPool{max: max, taken: make(chan struct{}, 1), added: make(chan struct{})}
}

// joined returns a channel closed when the next supervisor joins the pool.
func (p *supervisorPool) joined() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.added
}

// take returns a live idle supervisor (the most recently used: its pages
// are warm), or nil if none is.
func (p *supervisorPool) take() *spare {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.idle) > 0 {
		s := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		select {
		case p.taken <- struct{}{}:
		default:
		}
		select {
		case <-s.exited: // died idle (killed by hand?): try the next
			s.conn.Close()
			continue
		default:
		}
		return s
	}
	return nil
}

// put adds an idle supervisor. When the pool is full, a recycled one
// replaces the one idle longest, a new one (evict false) is refused. False:
// the caller lets s go.
func (p *supervisorPool) put(s *spare, evict bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.max == 0 || (!evict && len(p.idle) >= p.max) {
		return false
	}
	if len(p.idle) >= p.max {
		p.idle[0].conn.Close()
		p.idle = p.idle[1:]
	}
	s.idle = time.Now()
	p.idle = append(p.idle, s)
	close(p.added) // every start waiting for one looks again
	p.added = make(chan struct{})
	p.addedAt = s.idle
	if !s.handed.IsZero() { // back from an attempt: its time away
		p.turn = s.idle.Sub(s.handed)
		s.handed = time.Time{}
	}
	return true
}

// lastTurn is how long the last supervisor back from an attempt was away.
func (p *supervisorPool) lastTurn() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.turn
}

// sinceJoined is how long ago a supervisor last joined the pool (forever:
// never).
func (p *supervisorPool) sinceJoined() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.addedAt.IsZero() {
		return time.Duration(math.MaxInt64)
	}
	return time.Since(p.addedAt)
}

func (p *supervisorPool) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// trim lets go the supervisors idle since before cutoff, keeping at least keep.
func (p *supervisorPool) trim(keep int, cutoff time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.idle) > keep && p.idle[0].idle.Before(cutoff) {
		p.idle[0].conn.Close()
		p.idle = p.idle[1:]
	}
}

// close lets every idle supervisor go and refuses new ones.
func (p *supervisorPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, s := range p.idle {
		s.conn.Close()
	}
	p.idle = nil
}

// idleTrim is how long a supervisor beyond WarmSupervisors may stay idle.
const idleTrim = time.Minute

// keepSpares keeps WarmSupervisors idle supervisors ready until ctx ends,
// trims the pool back to that many after a burst, then lets all go.
func (w *Worker) keepSpares(ctx context.Context) {
	defer w.pool.close()
	backoff := 100 * time.Millisecond
	trim := time.NewTicker(idleTrim / 2)
	defer trim.Stop()
	for ctx.Err() == nil {
		if w.pool.len() < w.cfg.WarmSupervisors && w.busy.Load() > 0 && w.saturated() {
			// A saturated host: the busy ones coming back are the spares.
			select {
			case <-ctx.Done():
				return
			case <-w.pool.joined():
			case <-time.After(RecycleWait):
			}
			continue
		}
		if w.pool.len() < w.cfg.WarmSupervisors {
			s, err := w.spawnSpare()
			if err == nil {
				if !w.pool.put(s, false) {
					s.conn.Close() // filled by recycled ones meanwhile
				}
				backoff = 100 * time.Millisecond
				continue
			}
			w.log.Warn("cannot start a spare supervisor", "err", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-w.pool.taken:
		case <-trim.C:
			w.pool.trim(w.cfg.WarmSupervisors, time.Now().Add(-idleTrim))
		}
	}
}

// startSupervisor starts the supervisor of the attempt in dir, handing it
// the listening lease socket ln, as claim c says (claim.go): the idle one
// it holds, or a new standby supervisor; and if either fails, a one-shot
// `supervise --dir` process. done closes when the attempt is over: the
// supervisor said idle, or exited. The claim is spent either way.
func (w *Worker) startSupervisor(dir string, ln *os.File, c supervisorClaim) (done <-chan struct{}, err error) {
	s := c.s
	if c.spawn {
		s, _ = w.spawnSpare() // on error: try the one-shot start below
	}
	if s != nil {
		err := s.handoff(dir, ln)
		if c.spawn {
			<-w.spawnSlots // acknowledged (or gone): no longer starting
		}
		if err == nil {
			w.sparesUsed.Add(1)
			ch := make(chan struct{})
			go w.awaitIdle(s, ch) // ends the claim when it is over
			return ch, nil
		}
		// It died between the check and the handoff: start one cold.
	} else if c.spawn {
		<-w.spawnSlots
	}
	w.busy.Add(-1) // a one-shot supervisor never comes back
	logf, err := os.OpenFile(filepath.Join(dir, SupervisorLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args := append(append([]string{}, w.cfg.SupervisorArgs...), "--dir", dir)
	cmd := osexec.Command(w.cfg.SupervisorPath, args...)
	cmd.Stdout, cmd.Stderr = logf, logf // stdin stays /dev/null
	cmd.ExtraFiles = []*os.File{ln}
	cmd.Env = w.supervisorEnv()
	// Its own session: no signal aimed at the agent's group or terminal
	// reaches it, so it outlives the agent.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := WithHostSlack(cmd.Start); err != nil {
		return nil, err
	}
	w.spawned.Add(1)
	ch := make(chan struct{})
	go func() { // reap it while we live; init does after we die
		cmd.Wait()
		close(ch)
	}()
	return ch, nil
}

// awaitHandoff is the standby supervisor's side: it blocks on the control
// connection until the worker sends an attempt dir with its lease socket,
// or goes away (ok false). It returns the dir and the lease socket's
// descriptor, and has acknowledged both.
func awaitHandoff(uc *net.UnixConn) (dir string, lnFD int, ok bool) {
	uc.SetReadDeadline(time.Time{})
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil || n == 0 || oobn == 0 {
		return "", -1, false
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return "", -1, false
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return "", -1, false
	}
	// The acknowledgement comes before anything is done for the attempt:
	// without it the worker starts the attempt elsewhere (see handoff).
	uc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := uc.Write([]byte{ctlAck}); err != nil {
		unix.Close(fds[0])
		return "", -1, false
	}
	return string(buf[:n]), fds[0], true
}
