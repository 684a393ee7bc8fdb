package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/fsm"
)

// raftDumpCommand prints a stopped agent's raft log, each command with its
// payload decoded: the log's entries are CBOR, which no operator reads.
func raftDumpCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "raft",
		Usage: "read a stopped agent's raft log",
		Subcommands: []*ucli.Command{{
			Name: "dump",
			Usage: "print the raft log in --data-dir, one entry a line, commands with their payload decoded " +
				"(no agent needed; the agent of that dir must be stopped)",
			Flags: []ucli.Flag{
				&ucli.StringFlag{Name: "data-dir", Usage: "the agent's data dir", Required: true},
				&ucli.Uint64Flag{Name: "from", Usage: "first index to print (default: the log's first)"},
				&ucli.Uint64Flag{Name: "to", Usage: "last index to print (default: the log's last)"},
				JSONFlag,
			},
			Action: func(c *ucli.Context) error { return Error(raftDump(c)) },
		}},
	}
}

// raftEntryView is one entry of the dump (--json: one object a line).
type raftEntryView struct {
	Index   uint64    `json:"index"`
	Term    uint64    `json:"term"`
	Type    string    `json:"type"` // raft's: command, noop, barrier, configuration...
	Command string    `json:"command,omitempty"`
	At      time.Time `json:"at,omitzero"`
	Payload any       `json:"payload,omitempty"`
	Bytes   int       `json:"bytes"`
	Error   string    `json:"error,omitempty"` // an entry this build cannot decode
}

func raftDump(c *ucli.Context) error {
	if c.NArg() > 0 {
		return Exitf(2, "raft dump takes no arguments (got %q); name the dir with --data-dir", c.Args().Slice())
	}
	from, to := c.Uint64("from"), c.Uint64("to")
	if to != 0 && to < from {
		return Exitf(2, "--to %d is below --from %d", to, from)
	}
	out := Stdout(c)
	enc := json.NewEncoder(out)
	err := cluster.ReadLog(c.String("data-dir"), from, to, func(l *raft.Log) error {
		v := describeEntry(l)
		if c.Bool("json") {
			return enc.Encode(v)
		}
		line := fmt.Sprintf("%d\tt%d\t%s", v.Index, v.Term, v.Type)
		if v.Command != "" {
			line += "\t" + v.Command + "\t" + v.At.Format(time.RFC3339Nano)
		}
		if v.Payload != nil {
			b, err := json.Marshal(v.Payload)
			if err != nil {
				return err
			}
			line += "\t" + string(b)
		}
		if v.Error != "" {
			line += "\terror: " + v.Error
		}
		_, err := fmt.Fprintln(out, line)
		return err
	})
	return err
}

// describeEntry decodes what this build can of l.
func describeEntry(l *raft.Log) raftEntryView {
	v := raftEntryView{Index: l.Index, Term: l.Term, Type: raftLogType(l.Type), Bytes: len(l.Data)}
	if l.Type != raft.LogCommand {
		return v
	}
	cmd, payload, err := fsm.DescribeCommand(l.Data)
	if cmd != nil {
		v.Command, v.At = string(cmd.Type), cmd.At
	}
	v.Payload = payload
	if err != nil {
		v.Error = err.Error()
	}
	return v
}

func raftLogType(t raft.LogType) string {
	switch t {
	case raft.LogCommand:
		return "command"
	case raft.LogNoop:
		return "noop"
	case raft.LogBarrier:
		return "barrier"
	case raft.LogConfiguration:
		return "configuration"
	default:
		return t.String()
	}
}
