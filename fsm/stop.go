package fsm

// CmdStopAttempts asks nodes to stop live attempts without cancelling their
// jobs. The scheduler issues it when a draining node passes its drain
// deadline (Reason drained); preemption will use it with Reason preempted.
const CmdStopAttempts CommandType = "stop_attempts" // StopAttempts

// StopAttempts sets CancelRequested = Reason on each named attempt that is
// still live and whose FencingToken is the job's current one; others are
// ignored (reported in Result.Skipped). The job stays running. When the node
// then reports the attempt killed with reason drained or preempted, the
// attempt is not counted (Counted = false) and the job goes back to queued
// (or to cancelled if a user cancel arrived meanwhile), like a lost attempt.
// If the node dies first, MarkLost re-queues it as usual.
type StopAttempts struct {
	Attempts []AttemptRef `json:"attempts"`
	Reason   string       `json:"reason"`
	// By names the job whose placement needs the room (preemption); it is
	// recorded in each victim's timeline.
	By string `json:"by,omitempty"`
}
