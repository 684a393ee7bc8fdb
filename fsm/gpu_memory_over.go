package fsm

import "fmt"

// A node's GPU-memory watchdog (issue 24, exec/gpu_watchdog.go) tells the
// cluster that a job stayed over its VRAM share: a report with State
// ReportGPUMemoryOver, fenced like every report, that changes no record
// and emits an attempt.gpu_memory_over event (in the job's timeline). A
// kill, when the node runs with --gpu-memory-over kill, follows as the
// attempt's ordinary killed report.

// ReportGPUMemoryOver is the State of a watchdog's report.
const ReportGPUMemoryOver AttemptState = "gpu_memory_over"

// NameGPUMemoryOver is the attempt event of a job over its share.
const NameGPUMemoryOver = "gpu_memory_over"

// GPUMemoryOver is what the watchdog saw.
type GPUMemoryOver struct {
	UUID     string `json:"uuid"`
	UsedMiB  int64  `json:"used_mib"`
	ShareMiB int64  `json:"share_mib"`
	// Action is what the node does about it: "report" or "kill".
	Action string `json:"action"`
}

// String is the event's reason and, with a kill, the attempt's.
func (o *GPUMemoryOver) String() string {
	return fmt.Sprintf("gpu_memory: %d MiB used of a %d MiB share on %s", o.UsedMiB, o.ShareMiB, o.UUID)
}

func (a *applier) reportGPUMemoryOver(p *ReportAttempt) error {
	o := p.GPUMemoryOver
	if o == nil {
		return fmt.Errorf("%w: gpu_memory_over: missing in a gpu_memory_over report", ErrBadCommand)
	}
	if err := validKey("gpu_memory_over.uuid", o.UUID, maxIDLen); err != nil {
		return err
	}
	if o.Action != "report" && o.Action != "kill" {
		return fmt.Errorf("%w: gpu_memory_over.action: %q (want report or kill)", ErrBadCommand, o.Action)
	}
	j, at, err := a.reportedAttempt(p)
	if err != nil {
		return err
	}
	if at.GPUShare == nil || at.GPUShare.GPU.UUID != o.UUID {
		return fmt.Errorf("%w: gpu_memory_over.uuid: job %s attempt %d holds no share of %s", ErrBadCommand, p.JobID, p.Attempt, o.UUID)
	}
	a.emit(Event{Type: EventAttempt, Name: NameGPUMemoryOver, JobID: at.JobID, Attempt: at.Num, Node: at.Node,
		State: string(at.State), Reason: o.String() + " (" + o.Action + ")", Namespace: j.Spec.Namespace})
	return nil
}
