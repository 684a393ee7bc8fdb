package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

func eventsCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "events",
		Usage: "show the cluster's events (GET /v1/events); --follow to keep streaming",
		Description: "Without --follow, prints the events the node still holds after --after (default: none\n" +
			"held yet, so use --follow or --after) and exits once the stream is quiet.\n" +
			"Event IDs (INDEX-SEQ) are the same on every node: resume anywhere with --after.",
		Flags: WithClientFlags(
			JSONFlag,
			&ucli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep streaming new events"},
			&ucli.StringSliceFlag{Name: "topic", Usage: "only these topics: " + strings.Join(fsm.Topics, ", ")},
			&ucli.StringFlag{Name: "job", Usage: "only this job's events"},
			&ucli.StringFlag{Name: "after", Usage: "start after this event ID (INDEX-SEQ) or raft index (INDEX)"},
		),
		Action: events,
	}
}

func events(c *ucli.Context) error {
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	var topics []string
	for _, t := range c.StringSlice("topic") {
		topics = append(topics, strings.Split(t, ",")...)
	}
	after := c.String("after")
	if !c.Bool("follow") && after == "" {
		after = "0" // what the node holds
	}
	ctx, cancel := contextWithCancel(c)
	defer cancel()
	q := api.EventQuery{Topics: topics, Job: c.String("job"), After: after}
	enc := json.NewEncoder(Stdout(c))
	var quiet *quietTimer
	if !c.Bool("follow") {
		quiet = newQuietTimer(cancel)
		q.Opened = quiet.kick
	}
	err = cl.StreamEvents(ctx, q, func(e api.Event) error {
		if quiet != nil {
			quiet.kick()
		}
		if c.Bool("json") {
			return enc.Encode(e)
		}
		if e.IsReset() {
			fmt.Fprintf(Stdout(c), "%-12s reset: %s\n", e.ID, e.Reason)
			return nil
		}
		fmt.Fprintf(Stdout(c), "%-12s %s  %-24s %s\n", e.ID, e.At.Local().Format("15:04:05.000"), e.Type, eventSubject(e))
		return nil
	})
	if ctx.Err() != nil && c.Context.Err() == nil {
		return nil // quiet (without --follow)
	}
	return err
}

// eventSubject is the rest of a human-readable event line.
func eventSubject(e api.Event) string {
	var parts []string
	if e.JobID != "" {
		s := "job " + e.JobID
		if e.Attempt > 0 {
			s += fmt.Sprintf(" attempt %d", e.Attempt)
		}
		parts = append(parts, s)
	}
	if e.Node != "" {
		parts = append(parts, "node "+e.Node)
	}
	if e.Term > 0 {
		parts = append(parts, fmt.Sprintf("term %d", e.Term))
	}
	if e.Reason != "" {
		parts = append(parts, "("+e.Reason+")")
	}
	return strings.Join(parts, " ")
}

func contextWithCancel(c *ucli.Context) (context.Context, context.CancelFunc) {
	return context.WithCancel(c.Context)
}

// quietTimer calls stop once no kick came for quietFor: without --follow,
// events ends when the node has sent what it holds.
type quietTimer struct{ t *time.Timer }

const quietFor = 300 * time.Millisecond

func newQuietTimer(stop func()) *quietTimer {
	t := time.AfterFunc(time.Hour, stop)
	t.Stop()
	return &quietTimer{t: t}
}

func (q *quietTimer) kick() { q.t.Reset(quietFor) }
