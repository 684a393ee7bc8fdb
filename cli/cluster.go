package cli

import (
	"fmt"
	"strconv"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
)

func clusterCommand() *ucli.Command {
	return commandGroup("cluster", "inspect and change cluster membership",
		ClientCommand("members", "list gossip members with their raft roles", "", clusterMembers, JSONFlag),
		&ucli.Command{
			Name:        "raft",
			Usage:       "show the agent's raft state; remove a peer or transfer leadership",
			Flags:       WithClientFlags(JSONFlag),
			Action:      func(c *ucli.Context) error { return Error(clusterRaft(c)) },
			Subcommands: raftCommands(),
		},
		ClientCommand("join", "make the agent at --addr join the cluster at ADDR", "ADDR...", clusterJoin),
		ClientCommand("leave", "make the agent at --addr leave the cluster gracefully", "", func(c *ucli.Context) error {
			return act(c, func(cl *api.Client) (string, error) { return cl.Address() + " left the cluster", cl.Leave(c.Context) })
		}),
	)
}

func clusterJoin(c *ucli.Context) error {
	if c.NArg() == 0 {
		return Exitf(2, "cluster join needs at least one ADDR (host[:port] of a member)")
	}
	addrs := c.Args().Slice()
	return act(c, func(cl *api.Client) (string, error) {
		return fmt.Sprintf("joined %v", addrs), cl.Join(c.Context, addrs)
	})
}

func clusterMembers(c *ucli.Context) error {
	return list(c, "members", func(cl *api.Client) ([]api.Member, error) { return cl.Members(c.Context) },
		[]string{"NAME", "ADDRESS", "API", "STATUS", "RAFT", "VOTER", "LEADER"}, func(m api.Member) []any {
			leader := ""
			if m.Leader {
				leader = "*"
			}
			return []any{m.Name, orDash(m.Addr), orDash(m.HTTPAddr), m.Status, orDash(m.RaftRole), m.Voter, leader}
		})
}

func clusterRaft(c *ucli.Context) error {
	return call(c, func(cl *api.Client) (*api.RaftInfo, error) { return cl.Raft(c.Context) }, func(r *api.RaftInfo) error { return printRaft(c, r) })
}

// printRaft is cluster raft's text.
func printRaft(c *ucli.Context, r *api.RaftInfo) error {
	kv := NewTable(Stdout(c))
	kv.Row("Node:", r.Node)
	kv.Row("State:", r.State)
	kv.Row("Leader:", orDash(r.Leader)+" "+r.LeaderAddr)
	kv.Row("Term:", r.Term)
	kv.Row("Commit index:", r.CommitIndex)
	kv.Row("Applied index:", r.AppliedIndex)
	kv.Row("Last index:", r.LastIndex)
	kv.Row("First index:", r.FirstIndex)
	kv.Row("Snapshot index:", r.SnapshotIndex)
	kv.Row("Last contact:", orDash(r.LastContact))
	kv.Row("Voters:", r.Voters)
	if err := kv.Flush(); err != nil {
		return err
	}
	if len(r.Servers) > 0 {
		fmt.Fprintln(Stdout(c))
		// LAST HEARD and CLIENTS (work streams held) only the leader knows.
		t := NewTable(Stdout(c), "SERVER", "ADDRESS", "ROLE", "SUFFRAGE", "VERSION", "LAST HEARD", "CLIENTS")
		for _, s := range r.Servers {
			role := s.Role
			if s.Suffrage == "nonvoter" {
				role = "nonvoter"
			}
			clients := "-"
			if s.Clients != nil {
				clients = strconv.Itoa(*s.Clients)
			}
			t.Row(s.ID, s.Address, role, s.Suffrage, orDash(s.Version), orDash(s.LastHeardAgo), clients)
		}
		if err := t.Flush(); err != nil {
			return err
		}
	}
	return printFeatures(c, r.Features)
}

// printFeatures is the feature gate's text: the features every server
// can apply, and each one held back with the servers lacking it.
func printFeatures(c *ucli.Context, f *api.ClusterFeatures) error {
	if f == nil {
		return nil // an agent from before the gate
	}
	fmt.Fprintln(Stdout(c))
	enabled := "none beyond the baseline"
	if len(f.Enabled) > 0 {
		enabled = strings.Join(f.Enabled, ", ")
	}
	fmt.Fprintf(Stdout(c), "Features enabled: %s\n", enabled)
	if len(f.Held) == 0 {
		return nil
	}
	t := NewTable(Stdout(c), "HELD FEATURE", "SERVERS LACKING IT")
	for _, h := range f.Held {
		t.Row(h.Name, strings.Join(h.Lacking, ", "))
	}
	return t.Flush()
}
