package rig

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/foreman-sched/foreman/wallclock"
)

// ClockEnv is the variable that hands an agent its offset file.
const ClockEnv = wallclock.EnvFile

// clockAckTimeout bounds the wait for an agent to apply an offset; it only
// has to read a file, but a loaded 2-core machine can be slow.
const clockAckTimeout = 10 * time.Second

// SetClock shifts the agent's wall clock by d (0 = true time): it writes
// "<seq> <ns>" to ClockFile, sends SIGUSR2 and waits until the agent
// echoes the line into ClockFile.ack. An agent without the hook (a binary
// built without -tags jepsenclock) never wrote an ack at start, and is not
// signalled: SIGUSR2 would kill it.
func (n *Node) SetClock(d time.Duration) error {
	ack := n.ClockFile + ".ack"
	if _, err := os.Stat(ack); err != nil {
		return fmt.Errorf("%s has no clock hook (build foreman with -tags jepsenclock): %v", n.Name, err)
	}
	n.mu.Lock()
	n.clock++
	line := fmt.Sprintf("%d %d", n.clock, int64(d))
	n.mu.Unlock()
	tmp := n.ClockFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(line+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, n.ClockFile); err != nil {
		return err
	}
	if err := n.signal(syscall.SIGUSR2); err != nil {
		return err
	}
	deadline := time.Now().Add(clockAckTimeout)
	for {
		b, _ := os.ReadFile(ack)
		if strings.TrimSpace(string(b)) == line {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not apply clock offset %v within %v (ack %q)", n.Name, d, clockAckTimeout, strings.TrimSpace(string(b)))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
