package fsm

import "fmt"

// Every `foreman exec` is an event naming who ran what (issue 36): the API
// node that takes the exec proposes this command before it starts the
// command, so the exec is in the job's timeline and in every node's event
// stream, with the same ID everywhere, like any change. It changes no
// record: it only emits the event (which the timeline keeps).

// CmdExecAudit records one exec into a job's attempt.
const CmdExecAudit CommandType = "exec_audit" // ExecAudit

// NameExec is the attempt event of an exec.
const NameExec = "exec"

// ExecAudit is one exec: into which attempt, by whom (the token's name or
// accessor, "anonymous" without ACL), and the command's name with its
// number of arguments (not the arguments: they may hold secrets).
type ExecAudit struct {
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	By      string `json:"by"`
	Command string `json:"command"`
	Args    int    `json:"args,omitempty"`
	TTY     bool   `json:"tty,omitempty"`
}

// execAudit emits the exec's event, for a job that exists.
func (a *applier) execAudit(p *ExecAudit, res *Result) error {
	if err := validKey("job_id", p.JobID, maxIDLen); err != nil {
		return err
	}
	at, err := a.getAttempt(p.JobID, p.Attempt)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("%s ran %s", p.By, p.Command)
	if p.Args > 0 {
		what += fmt.Sprintf(" with %d argument(s)", p.Args)
	}
	if p.TTY {
		what += " on a terminal"
	}
	a.emit(Event{Type: EventAttempt, Name: NameExec, JobID: p.JobID, Attempt: p.Attempt, Node: at.Node,
		State: string(at.State), Reason: what, Namespace: a.namespaceOf(p.JobID)})
	return nil
}
