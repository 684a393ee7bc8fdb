package cli

import (
	"fmt"
	"strconv"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
)

func clusterCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "cluster",
		Usage: "inspect and change cluster membership",
		Subcommands: []*ucli.Command{
			{
				Name:   "members",
				Usage:  "list gossip members with their raft roles",
				Flags:  WithClientFlags(JSONFlag),
				Action: func(c *ucli.Context) error { return Error(clusterMembers(c)) },
			},
			{
				Name:        "raft",
				Usage:       "show the agent's raft state; remove a peer or transfer leadership",
				Flags:       WithClientFlags(JSONFlag),
				Action:      func(c *ucli.Context) error { return Error(clusterRaft(c)) },
				Subcommands: raftCommands(),
			},
			{
				Name:      "join",
				Usage:     "make the agent at --addr join the cluster at ADDR",
				ArgsUsage: "ADDR...",
				Flags:     WithClientFlags(),
				Action: func(c *ucli.Context) error {
					if c.NArg() == 0 {
						return Exitf(2, "cluster join needs at least one ADDR (host[:port] of a member)")
					}
					cl, err := newClient(c)
					if err != nil {
						return err
					}
					if err := cl.Join(c.Context, c.Args().Slice()); err != nil {
						return Error(err)
					}
					fmt.Fprintf(Stdout(c), "joined %v\n", c.Args().Slice())
					return nil
				},
			},
			{
				Name:  "leave",
				Usage: "make the agent at --addr leave the cluster gracefully",
				Flags: WithClientFlags(),
				Action: func(c *ucli.Context) error {
					cl, err := newClient(c)
					if err != nil {
						return err
					}
					if err := cl.Leave(c.Context); err != nil {
						return Error(err)
					}
					fmt.Fprintf(Stdout(c), "%s left the cluster\n", cl.Address())
					return nil
				},
			},
		},
	}
}

func clusterMembers(c *ucli.Context) error {
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	ms, err := cl.Members(c.Context)
	if err != nil {
		return err
	}
	return printList(c, "members", ms, []string{"NAME", "ADDRESS", "API", "STATUS", "RAFT", "VOTER", "LEADER"}, func(m api.Member) []any {
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
		t := NewTable(Stdout(c), "SERVER", "ADDRESS", "ROLE", "SUFFRAGE", "LAST HEARD", "CLIENTS")
		for _, s := range r.Servers {
			role := s.Role
			if s.Suffrage == "nonvoter" {
				role = "nonvoter"
			}
			clients := "-"
			if s.Clients != nil {
				clients = strconv.Itoa(*s.Clients)
			}
			t.Row(s.ID, s.Address, role, s.Suffrage, orDash(s.LastHeardAgo), clients)
		}
		return t.Flush()
	}
	return nil
}
