package exec

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Spare supervisors. Starting `foreman supervise` costs a fork/exec of this
// (large, static) binary and the Go runtime's start-up with every package's
// init: ~8 ms of CPU and, on a busy node, tens of milliseconds of wall time —
// most of a job's start latency. So the worker keeps WarmSupervisors
// processes started ahead of time with `supervise --standby`: each has
// paid its start-up and blocks reading its control socket (fd 3, one end of
// a socketpair whose other end only the worker holds). To start an attempt
// the worker prepares the directory exactly as for a cold start and sends the
// spare the directory's path with the pre-listened lease socket attached
// (SCM_RIGHTS); from then on the spare is that attempt's supervisor, detached
// like any other (its own session since it was started). A spare holds no
// job and no lease: if the worker goes away its socketpair reads EOF and it
// exits. One process per attempt still holds: a spare serves exactly one.

// spare is one standby supervisor as the worker sees it.
type spare struct {
	conn   *net.UnixConn
	exited chan struct{}
	pid    int
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
	// stdin, stdout and stderr are /dev/null until the handoff, when the
	// spare points stdout/stderr at the attempt's supervisor.log.
	cmd.ExtraFiles = []*os.File{theirs}
	if len(w.cfg.SupervisorEnv) > 0 {
		cmd.Env = append(os.Environ(), w.cfg.SupervisorEnv...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
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
	return s, nil
}

// handoffAckTimeout bounds the wait for a spare's acknowledgement.
const handoffAckTimeout = 10 * time.Second

// handoff makes the spare the supervisor of the attempt in dir. The spare
// must not be used again, whatever the outcome. The spare acknowledges
// before it acts, so an error here means it never touched the attempt and a
// cold start is safe. A sent message alone proves nothing: a killed Go
// process keeps its sockets open until its last thread is gone, so the
// write to a dying spare can succeed.
func (s *spare) handoff(dir string, ln *os.File) error {
	defer s.conn.Close()
	s.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, _, err := s.conn.WriteMsgUnix([]byte(dir), unix.UnixRights(int(ln.Fd())), nil); err != nil {
		return err
	}
	ack := make([]byte, 1)
	s.conn.SetReadDeadline(time.Now().Add(handoffAckTimeout))
	if n, err := s.conn.Read(ack); n == 1 {
		return nil
	} else if !errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("spare did not take the attempt: %v", err)
	}
	// Stuck: make sure it is gone, then trust only an ack sent before that.
	syscall.Kill(s.pid, syscall.SIGKILL)
	<-s.exited
	s.conn.SetReadDeadline(time.Now())
	if n, _ := s.conn.Read(ack); n == 1 {
		return nil // it took the attempt, then died: reported as such
	}
	return errors.New("spare did not acknowledge the attempt in time")
}

// discard lets an unused spare go: it reads EOF and exits.
func (s *spare) discard() { s.conn.Close() }

// takeSpare returns a ready spare, or nil if none is.
func (w *Worker) takeSpare() *spare {
	for {
		select {
		case s := <-w.spares:
			select {
			case w.spareTaken <- struct{}{}:
			default:
			}
			select {
			case <-s.exited: // died idle (killed by hand?): try the next
				s.discard()
				continue
			default:
			}
			return s
		default:
			return nil
		}
	}
}

// keepSpares keeps WarmSupervisors spares ready until ctx ends, then lets
// them go.
func (w *Worker) keepSpares(ctx context.Context) {
	defer func() {
		for {
			select {
			case s := <-w.spares:
				s.discard()
			default:
				return
			}
		}
	}()
	backoff := 100 * time.Millisecond
	for {
		if len(w.spares) < cap(w.spares) {
			s, err := w.spawnSpare()
			if err == nil {
				w.spares <- s
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
		case <-w.spareTaken:
		}
	}
}

// startSupervisor starts the supervisor of the attempt in dir, handing it
// the listening lease socket ln: through a spare if one is ready, else a
// fresh `supervise --dir` process. exited closes when it exits.
func (w *Worker) startSupervisor(dir string, ln *os.File) (exited <-chan struct{}, err error) {
	if s := w.takeSpare(); s != nil {
		if err := s.handoff(dir, ln); err == nil {
			w.sparesUsed.Add(1)
			return s.exited, nil
		}
		// It died between the check and the handoff: start one cold.
	}
	logf, err := os.OpenFile(filepath.Join(dir, SupervisorLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args := append(append([]string{}, w.cfg.SupervisorArgs...), "--dir", dir)
	cmd := osexec.Command(w.cfg.SupervisorPath, args...)
	cmd.Stdout, cmd.Stderr = logf, logf // stdin stays /dev/null
	cmd.ExtraFiles = []*os.File{ln}
	if len(w.cfg.SupervisorEnv) > 0 {
		cmd.Env = append(os.Environ(), w.cfg.SupervisorEnv...)
	}
	// Its own session: no signal aimed at the agent's group or terminal
	// reaches it, so it outlives the agent.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() { // reap it while we live; init does after we die
		cmd.Wait()
		close(done)
	}()
	return done, nil
}

// awaitHandoff is the spare's side: it blocks on the control socket at fd
// until the worker sends an attempt dir with its lease socket, or goes away
// (ok false). It returns the dir and the lease socket's descriptor.
func awaitHandoff(fd int) (dir string, lnFD int, ok bool) {
	f := os.NewFile(uintptr(fd), "standby-control")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return "", -1, false
	}
	defer c.Close()
	uc, isUnix := c.(*net.UnixConn)
	if !isUnix {
		return "", -1, false
	}
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
		return "", -1, false
	}
	// The acknowledgement comes before anything is done for the attempt:
	// without it the worker starts the attempt cold (see handoff).
	uc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := uc.Write([]byte{1}); err != nil {
		unix.Close(fds[0])
		return "", -1, false
	}
	return string(buf[:n]), fds[0], true
}
