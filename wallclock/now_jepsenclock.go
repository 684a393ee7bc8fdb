//go:build jepsenclock

package wallclock

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Hooked reports whether this binary carries the jepsen clock hook.
const Hooked = true

var offset atomic.Int64

// Now returns time.Now with its wall reading shifted by the offset.
func Now() time.Time { return Shift(time.Now(), time.Duration(offset.Load())) }

// Offset is the offset currently applied.
func Offset() time.Duration { return time.Duration(offset.Load()) }

func init() {
	path := os.Getenv(EnvFile)
	if path == "" {
		return
	}
	os.Unsetenv(EnvFile)
	// A restarted node keeps its offset. The first ack tells the nemesis
	// the hook is there (a binary without it would die of SIGUSR2).
	line, err := reload(path)
	if err != nil {
		line = "0 0"
	}
	_ = writeAck(path, line)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR2)
	go func() {
		for range ch {
			if line, err := reload(path); err == nil {
				_ = writeAck(path, line)
			} else {
				fmt.Fprintf(os.Stderr, "wallclock: %v\n", err)
			}
		}
	}()
}

// reload applies the offset in path and returns the line it read.
func reload(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	line := strings.TrimSpace(string(b))
	f := strings.Fields(line)
	if len(f) != 2 {
		return "", fmt.Errorf("offset file %s: want \"<seq> <offset-ns>\", got %q", path, line)
	}
	ns, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return "", fmt.Errorf("offset file %s: %v", path, err)
	}
	offset.Store(ns)
	return line, nil
}

func writeAck(path, line string) error {
	tmp := fmt.Sprintf("%s.ack.%d", path, os.Getpid())
	if err := os.WriteFile(tmp, []byte(line+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path+".ack")
}
