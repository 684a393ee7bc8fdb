package cli

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

func nodeCommand() *ucli.Command {
	return commandGroup("node", "list nodes, drain them, change their eligibility",
		ClientCommand("ls", "list nodes with capacity and what is placed on them, and a count of all of them by role and state", "", nodeList, JSONFlag,
			&ucli.StringFlag{Name: "role", Usage: "only nodes of this role (server, replica, client)"},
			&ucli.StringFlag{Name: "state", Usage: "only nodes in this state (alive, suspect, silent, dead, left)"},
			&ucli.StringFlag{Name: "name", Usage: "only nodes whose name starts with this"},
			&ucli.IntFlag{Name: "limit", Usage: "at most this many (0: all); --cursor NAME goes on after NAME"},
			&ucli.StringFlag{Name: "cursor", Usage: "list the nodes after this name (the next_cursor of --json)"},
		),
		ClientCommand("show", "one node: addresses, capacity, what is allocated, its GPUs and its live attempts", "NAME", nodeShow, JSONFlag),
		&ucli.Command{
			Name:      "drain",
			Usage:     "stop placing attempts on a node; running ones get --deadline to finish. With --label instead of NAME: every matching node, in one raft entry",
			ArgsUsage: "NAME | --label k=v [--role R] [--yes] [--dry-run]",
			Flags: WithClientFlags(append([]ucli.Flag{
				&ucli.DurationFlag{Name: "deadline", Usage: "stop attempts still running after this long (0 = let them finish)"},
				JSONFlag,
			}, bulkFlags...)...),
			Action: func(c *ucli.Context) error {
				if bulkNodes(c) {
					return Error(nodesDrain(c))
				}
				return Error(nodeChange(c, func(cl *api.Client, name string) (*api.NodeDetail, error) {
					return cl.DrainNode(c.Context, name, c.Duration("deadline"))
				}, eligibilityLine))
			},
		},
		&ucli.Command{
			Name:      "down",
			Usage:     "declare a client dead now (when the leader holds the deaths of many silent clients); its jobs rerun once their lease is out. With --silent or --label instead of NAME: every matching client, in one raft entry",
			ArgsUsage: "NAME | --silent [--since D] [--label k=v] [--yes] [--dry-run]",
			Flags: WithClientFlags(JSONFlag,
				&ucli.BoolFlag{Name: "silent", Usage: "every client shown silent (the leader holds its death)"},
				&ucli.DurationFlag{Name: "since", Usage: "with --silent: silent at least this long"},
				&ucli.StringFlag{Name: "role", Usage: "only client (servers are gossip's)"},
				&ucli.StringSliceFlag{Name: "label", Usage: "clients with this label k=v (repeatable; all must match)"},
				&ucli.BoolFlag{Name: "yes", Usage: "do not ask before declaring them dead"},
				&ucli.BoolFlag{Name: "dry-run", Usage: "list the clients and change nothing"},
			),
			Action: func(c *ucli.Context) error {
				if c.Bool("silent") || c.IsSet("label") || c.IsSet("since") || c.IsSet("role") || c.Bool("dry-run") {
					return Error(nodesDown(c))
				}
				return Error(nodeChange(c, func(cl *api.Client, name string) (*api.NodeDetail, error) {
					return cl.MarkDown(c.Context, name)
				}, func(d *httpapi.NodeDetail) string {
					return fmt.Sprintf("node %s is %s, with %d live attempt(s) to be declared lost once their lease is out", d.Name, d.Gossip, d.Running)
				}))
			},
		},
		ClientCommand("gpu-reset", "forget the XID faults of a node's GPUs (all its unhealthy ones, or those named): its agent detects again and they are placeable at once",
			"NAME [UUID...]", nodeGPUReset, JSONFlag),
		ClientCommand("usage", "what a node's jobs use now (CPU seconds so far, memory), measured by that node from its jobs cgroup", "NAME", nodeUsage, JSONFlag),
		&ucli.Command{
			Name:      "eligibility",
			Usage:     "mark a node eligible or ineligible for new attempts. With --enable|--disable --label instead: every matching node, in one raft entry",
			ArgsUsage: "NAME eligible|ineligible | --enable|--disable --label k=v [--role R] [--yes] [--dry-run]",
			Flags: WithClientFlags(append([]ucli.Flag{JSONFlag,
				&ucli.BoolFlag{Name: "enable", Usage: "with --label: mark them eligible"},
				&ucli.BoolFlag{Name: "disable", Usage: "with --label: mark them ineligible"},
			}, bulkFlags...)...),
			Action: func(c *ucli.Context) error {
				if bulkNodes(c) || c.Bool("enable") || c.Bool("disable") {
					return Error(nodesEligibility(c))
				}
				if c.NArg() != 2 {
					return Exitf(2, "node eligibility takes NAME and eligible|ineligible")
				}
				e := c.Args().Get(1)
				return Error(nodeChange(c, func(cl *api.Client, name string) (*api.NodeDetail, error) {
					switch e {
					case string(fsm.Eligible), string(fsm.Ineligible):
						return cl.SetEligibility(c.Context, name, e == string(fsm.Eligible))
					}
					// Anything else goes as written: the server's answer names it.
					var out api.NodeDetail
					err := cl.Do(c.Context, api.Request{Method: http.MethodPost, Path: "/v1/nodes/" + url.PathEscape(name) + "/eligibility",
						Body: map[string]string{"eligibility": e}}, &out)
					return &out, err
				}, eligibilityLine))
			},
		},
	)
}

func nodeList(c *ucli.Context) error {
	q := api.NodeQuery{Role: c.String("role"), State: c.String("state"), Name: c.String("name"), Limit: c.Int("limit"), Cursor: c.String("cursor")}
	return call(c, func(cl *api.Client) (*api.NodeList, error) {
		if q.Limit < 0 {
			return nil, Exitf(2, "--limit: must be 0 (all) or more")
		}
		return cl.ListNodes(c.Context, q)
	}, func(reply *api.NodeList) error {
		list, err := AsServer[httpapi.NodeList](reply, nil)
		if err != nil {
			return err
		}
		return printNodes(c, list)
	})
}

// printNodes is node ls's table and its summary line.
func printNodes(c *ucli.Context, list *httpapi.NodeList) error {
	nodes := list.Nodes
	t := NewTable(Stdout(c), "NAME", "ROLE", "ADDRESS", "GOSSIP", "ELIGIBILITY", "CPU", "MEMORY", "GPUS", "RUNNING", "DRIVERS", "LABELS")
	for _, n := range nodes {
		elig := string(n.Eligibility)
		if n.Eligibility == fsm.Draining && !n.DrainDeadline.IsZero() {
			elig += " (deadline " + ago(n.DrainDeadline, time.Now()) + ")"
		}
		role := n.Role
		if role == "" {
			role = "server"
		}
		t.Row(n.Name, role, orDash(n.HTTPAddr), n.Gossip, elig,
			httpapi.FormatCPU(n.Allocated.CPU)+"/"+httpapi.FormatCPU(n.Capacity.CPU),
			httpapi.FormatMemory(n.Allocated.MemoryMB)+"/"+httpapi.FormatMemory(n.Capacity.MemoryMB),
			gpuColumn(n.Allocated, n.Capacity, n.GPUs), n.Running, orDash(strings.Join(n.Drivers, ",")), labels(n.Labels))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(Stdout(c), nodeSummaryLine(list))
	return nil
}

// nodeSummaryLine reads "5003 nodes: 3 servers, 5000 clients; 4998 alive,
// 5 dead (showing 100; more after --cursor n0100)".
func nodeSummaryLine(l *httpapi.NodeList) string {
	s := l.Summary
	line := fmt.Sprintf("%d nodes: %d servers, %d clients;", s.Total, s.ByRole["server"], s.ByRole["client"])
	if r := s.ByRole["replica"]; r > 0 {
		line = fmt.Sprintf("%d nodes: %d servers, %d replica(s), %d clients;", s.Total, s.ByRole["server"], r, s.ByRole["client"])
	}
	var states []string
	for _, st := range []fsm.GossipState{fsm.NodeAlive, fsm.NodeSuspect, fsm.NodeSilent, fsm.NodeDead, fsm.NodeLeft} {
		if n := s.ByState[string(st)]; n > 0 {
			states = append(states, fmt.Sprintf("%d %s", n, st))
		}
	}
	line += " " + orDash(strings.Join(states, ", "))
	if len(l.Nodes) != s.Total {
		line += fmt.Sprintf(" (showing %d", len(l.Nodes))
		if l.NextCursor != "" {
			line += "; more after --cursor " + l.NextCursor
		}
		line += ")"
	}
	return line
}

func nodeChange(c *ucli.Context, fn func(*api.Client, string) (*api.NodeDetail, error), say func(*httpapi.NodeDetail) string) error {
	if c.NArg() < 1 {
		return Exitf(2, "%s needs a node NAME", c.Command.FullName())
	}
	return call(c, func(cl *api.Client) (*api.NodeDetail, error) { return fn(cl, c.Args().First()) }, func(reply *api.NodeDetail) error {
		d, err := AsServer[httpapi.NodeDetail](reply, nil)
		if err == nil {
			fmt.Fprintln(Stdout(c), say(d))
		}
		return err
	})
}

// eligibilityLine is what node drain and node eligibility print.
func eligibilityLine(d *httpapi.NodeDetail) string {
	msg := fmt.Sprintf("node %s is %s", d.Name, d.Eligibility)
	if d.Eligibility == fsm.Draining {
		msg += fmt.Sprintf(" with %d running attempt(s)", d.Running)
		if !d.DrainDeadline.IsZero() {
			msg += " until " + d.DrainDeadline.Local().Format(time.RFC3339)
		}
	}
	return msg
}

func queueCommand() *ucli.Command {
	return commandGroup("queue", "set and list queue concurrency limits",
		ClientCommand("set", "limit how many of a queue's jobs run at once", "NAME", func(c *ucli.Context) error {
			name, err := oneArg(c, "queue NAME")
			if err != nil {
				return err
			}
			return call(c, func(cl *api.Client) (*api.Queue, error) { return cl.SetQueue(c.Context, name, c.Int("max-running")) }, func(q *api.Queue) error {
				_, err := fmt.Fprintf(Stdout(c), "queue %s: max_running %d\n", q.Name, q.MaxRunning)
				return err
			})
		}, &ucli.IntFlag{Name: "max-running", Required: true, Usage: "the limit (0 = unlimited)"}, JSONFlag),
		ClientCommand("ls", "list queues with limits or running work", "", queueList, JSONFlag),
	)
}

func queueList(c *ucli.Context) error {
	return list(c, "queues", func(cl *api.Client) ([]api.Queue, error) { return cl.ListQueues(c.Context) }, []string{"QUEUE", "RUNNING", "MAX"}, func(q api.Queue) []any {
		max := "unlimited"
		if q.MaxRunning > 0 {
			max = fmt.Sprint(q.MaxRunning)
		}
		return []any{orDash(q.Name), q.Running, max}
	})
}

func nodeUsage(c *ucli.Context) error {
	if c.NArg() != 1 {
		return Exitf(2, "node usage takes one NAME")
	}
	return call(c, func(cl *api.Client) (*api.NodeUsage, error) { return cl.NodeUsage(c.Context, c.Args().First()) }, func(u *api.NodeUsage) error {
		return printNodeUsage(c, u)
	})
}

// printNodeUsage is node usage's text.
func printNodeUsage(c *ucli.Context, u *api.NodeUsage) error {
	cpu, mem := "not measured (no jobs cgroup)", "not measured (no jobs cgroup)"
	if u.CPUSecondsTotal != nil {
		cpu = fmt.Sprintf("%.1f s used so far", *u.CPUSecondsTotal)
	}
	if u.MemoryBytes != nil {
		mem = httpapi.FormatMemory(*u.MemoryBytes / (1 << 20))
	}
	fmt.Fprintf(Stdout(c), "Node:   %s\nCPU:    %s\nMemory: %s\n", u.Node, cpu, mem)
	return nil
}
