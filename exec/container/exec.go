package container

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"

	"github.com/foreman-sched/foreman/exec"
)

var _ exec.Execer = (*Driver)(nil)

// Exec implements exec.Execer as `runc exec` does: the command joins the
// attempt's running container (its namespaces, cgroup, rootfs,
// capabilities and limits), in /task, with the job's environment and user
// (read from the container's init, so an image's env and user are the
// ones the job got). runc's init makes it a session leader, so Kill ends
// it and its children and nothing else; it dies with the container's pid
// namespace when the attempt ends.
func (d *Driver) Exec(t *exec.ExecTask) (exec.ExecProcess, error) {
	c, err := libcontainer.Load(d.cfg.containersDir(), t.ID)
	if err != nil {
		return nil, fmt.Errorf("%w: container %s: %v", exec.ErrAttemptEnded, t.ID, err)
	}
	if st, err := c.Status(); err != nil || st != libcontainer.Running {
		return nil, fmt.Errorf("%w: container %s is %v", exec.ErrAttemptEnded, t.ID, st)
	}
	state, err := c.State()
	if err != nil {
		return nil, fmt.Errorf("%w: container %s: %v", exec.ErrAttemptEnded, t.ID, err)
	}
	pid := state.InitProcessPid
	env, err := readEnviron(pid)
	if err != nil {
		return nil, fmt.Errorf("%w: the job's environment: %v", exec.ErrExecStart, err)
	}
	uid, gid, groups, err := readIDs(pid)
	if err != nil {
		return nil, fmt.Errorf("%w: the job's user: %v", exec.ErrExecStart, err)
	}
	p := &libcontainer.Process{
		Args: t.Command, Env: env, Cwd: TaskDir,
		UID: uid, GID: gid, AdditionalGroups: groups,
		LogLevel: initLogLevel,
	}
	var parent *os.File
	if t.TTY {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("%w: console socket: %v", exec.ErrExecStart, err)
		}
		parent = os.NewFile(uintptr(fds[0]), "console-parent")
		child := os.NewFile(uintptr(fds[1]), "console-child")
		defer parent.Close()
		defer child.Close()
		p.ConsoleSocket, p.ConsoleWidth, p.ConsoleHeight = child, t.Width, t.Height
	} else {
		// Interfaces, not typed nils: a nil stdin means /dev/null.
		if t.Stdin != nil {
			p.Stdin = t.Stdin
		}
		p.Stdout, p.Stderr = t.Stdout, t.Stderr
	}
	if err := exec.WithHostSlack(func() error { return c.Run(p) }); err != nil {
		msg := err.Error()
		if strings.Contains(msg, "executable file not found") || strings.Contains(msg, "no such file or directory") {
			return nil, fmt.Errorf("%w: %q in container %s: %v", exec.ErrCommandNotFound, t.Command[0], t.ID, err)
		}
		return nil, fmt.Errorf("%w: in container %s: %v", exec.ErrExecStart, t.ID, err)
	}
	ce := &containerExec{p: p}
	if parent != nil {
		master, err := recvFile(parent)
		if err == nil {
			ce.console, err = exec.PollableFile(master.Fd(), "pty")
			master.Close()
		}
		if err != nil {
			_ = ce.Kill()
			_, _ = p.Wait()
			return nil, fmt.Errorf("%w: the terminal: %v", exec.ErrExecStart, err)
		}
	}
	return ce, nil
}

type containerExec struct {
	p       *libcontainer.Process
	console *os.File
}

func (e *containerExec) Console() *os.File { return e.console }

func (e *containerExec) Wait() (int, error) {
	ps, err := e.p.Wait()
	if ps == nil {
		return -1, err
	}
	return exec.ExecExitCode(ps), nil
}

// Kill ends the command's process group (runc's init made it a session
// leader, so the group is the command's and its children's, never the
// container's init).
func (e *containerExec) Kill() error {
	pid, err := e.p.Pid()
	if err != nil || pid <= 1 {
		return e.p.Signal(unix.SIGKILL)
	}
	if err := unix.Kill(-pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	return nil
}

// readEnviron is the environment process pid started with.
func readEnviron(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return nil, err
	}
	var env []string
	for _, kv := range bytes.Split(b, []byte{0}) {
		if len(kv) > 0 {
			env = append(env, string(kv))
		}
	}
	return env, nil
}

// readIDs is process pid's uid, gid and supplementary groups, as the
// container sees them (the job's user; no user namespace).
func readIDs(pid int) (uid, gid int, groups []int, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, nil, err
	}
	found := 0
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		switch k {
		case "Uid", "Gid":
			if len(f) < 2 {
				return 0, 0, nil, fmt.Errorf("status %s: %q", k, v)
			}
			n, err := strconv.Atoi(f[1]) // effective
			if err != nil {
				return 0, 0, nil, err
			}
			if k == "Uid" {
				uid = n
			} else {
				gid = n
			}
			found++
		case "Groups":
			for _, g := range f {
				if n, err := strconv.Atoi(g); err == nil {
					groups = append(groups, n)
				}
			}
		}
	}
	if found != 2 {
		return 0, 0, nil, fmt.Errorf("no Uid/Gid in /proc/%d/status", pid)
	}
	return uid, gid, groups, nil
}

// recvFile receives one file descriptor sent over a unix socket (runc's
// init sends the terminal's master this way).
func recvFile(sock *os.File) (*os.File, error) {
	name := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), name, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("receive the terminal: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("receive the terminal: %d control messages: %v", len(msgs), err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("receive the terminal: %d descriptors: %v", len(fds), err)
	}
	return os.NewFile(uintptr(fds[0]), string(name[:n])), nil
}
