package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/foreman-sched/foreman/exec/gpu"
)

// xidQuiet is how many detections (gpuRedetect apart: 5 minutes) a device
// must go without a critical XID before it is healthy again.
const xidQuiet = 10

// watchXIDs follows <root>/dev/kmsg from its end until ctx ends. Each XID
// is logged with the job of the faulting process; a critical one marks its
// device unhealthy in h and kicks a detection, so the node record (and the
// leader, which stops placing there) has it within a publish, not 30 s.
// Running jobs on that device are left alone (they fail or not on their
// own). An agent that cannot read the kernel log (not root) says so once.
func watchXIDs(ctx context.Context, root string, h *gpu.XIDHealth, kick chan<- struct{}, logger *slog.Logger) {
	if root == "" {
		root = "/"
	}
	path := filepath.Join(root, "dev/kmsg")
	f, err := os.Open(path)
	if err != nil {
		logger.Warn("no XID watch: cannot read the kernel log", "component", "gpu", "path", path, "err", err)
		return
	}
	// Only faults from now on: one that lasts shows in detection anyway.
	// (A FIFO standing in for /dev/kmsg in tests cannot seek.)
	f.Seek(0, io.SeekEnd)
	go func() {
		<-ctx.Done()
		f.Close()
	}()
	err = gpu.WatchXIDs(kmsgReader{f}, func(x gpu.XID) {
		job := gpu.JobOfPID(root, x.PID)
		reason := x.Reason(job)
		logger.Warn("gpu xid", "component", "gpu", "bus", x.Bus, "xid", x.Code, "critical", x.Critical(), "job", job, "reason", reason)
		if x.Critical() {
			h.Record(x, reason)
			select {
			case kick <- struct{}{}:
			default:
			}
		}
	})
	if err != nil && ctx.Err() == nil {
		logger.Warn("XID watch stopped", "component", "gpu", "err", err)
	}
}

// kmsgReader reads /dev/kmsg, which answers EPIPE once when records were
// overwritten before they were read; reading on continues after the gap.
type kmsgReader struct{ f *os.File }

func (r kmsgReader) Read(p []byte) (int, error) {
	for {
		n, err := r.f.Read(p)
		if errors.Is(err, syscall.EPIPE) {
			continue
		}
		return n, err
	}
}

// withXIDs marks the devices XIDs made unhealthy in a detection and, when
// the agent advertises the detected count, counts only healthy ones.
func (s *gpuState) withXIDs(h *gpu.XIDHealth) {
	h.Apply(s.GPUs)
	if s.Capacity == nil {
		return
	}
	healthy := int64(0)
	for _, g := range s.GPUs {
		if g.Healthy() {
			healthy++
		}
	}
	s.Capacity = &healthy
}
