package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

func clusterCommand() *cli.Command {
	return &cli.Command{
		Name:  "cluster",
		Usage: "inspect and change cluster membership",
		Subcommands: []*cli.Command{
			{
				Name:   "members",
				Usage:  "list gossip members with their raft roles",
				Flags:  withClientFlags(jsonFlag),
				Action: func(c *cli.Context) error { return cliError(clusterMembers(c)) },
			},
			{
				Name:   "raft",
				Usage:  "show the agent's raft state",
				Flags:  withClientFlags(jsonFlag),
				Action: func(c *cli.Context) error { return cliError(clusterRaft(c)) },
			},
			{
				Name:      "join",
				Usage:     "make the agent at --addr join the cluster at ADDR",
				ArgsUsage: "ADDR...",
				Flags:     withClientFlags(),
				Action: func(c *cli.Context) error {
					if c.NArg() == 0 {
						return exitError(2, "cluster join needs at least one ADDR (host[:port] of a member)")
					}
					cl, err := newClient(c)
					if err != nil {
						return err
					}
					if err := cl.Join(c.Context, c.Args().Slice()); err != nil {
						return cliError(err)
					}
					fmt.Fprintf(stdout(c), "joined %v\n", c.Args().Slice())
					return nil
				},
			},
			{
				Name:  "leave",
				Usage: "make the agent at --addr leave the cluster gracefully",
				Flags: withClientFlags(),
				Action: func(c *cli.Context) error {
					cl, err := newClient(c)
					if err != nil {
						return err
					}
					if err := cl.Leave(c.Context); err != nil {
						return cliError(err)
					}
					fmt.Fprintf(stdout(c), "%s left the cluster\n", cl.Addr())
					return nil
				},
			},
		},
	}
}

func clusterMembers(c *cli.Context) error {
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	ms, err := cl.Members(c.Context)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c, map[string]any{"members": ms})
	}
	t := newTable(stdout(c), "NAME", "ADDRESS", "API", "STATUS", "RAFT", "VOTER", "LEADER")
	for _, m := range ms {
		leader := ""
		if m.Leader {
			leader = "*"
		}
		t.row(m.Name, orDash(m.Addr), orDash(m.HTTPAddr), m.Status, orDash(m.RaftRole), m.Voter, leader)
	}
	return t.flush()
}

func clusterRaft(c *cli.Context) error {
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	r, err := cl.Raft(c.Context)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c, r)
	}
	kv := newTable(stdout(c))
	kv.row("Node:", r.Node)
	kv.row("State:", r.State)
	kv.row("Leader:", orDash(r.Leader)+" "+r.LeaderAddr)
	kv.row("Term:", r.Term)
	kv.row("Commit index:", r.CommitIndex)
	kv.row("Applied index:", r.AppliedIndex)
	kv.row("Last index:", r.LastIndex)
	kv.row("First index:", r.FirstIndex)
	kv.row("Snapshot index:", r.SnapshotIndex)
	kv.row("Last contact:", orDash(r.LastContact))
	kv.row("Voters:", r.Voters)
	if err := kv.flush(); err != nil {
		return err
	}
	if len(r.Servers) > 0 {
		fmt.Fprintln(stdout(c))
		t := newTable(stdout(c), "SERVER", "ADDRESS", "ROLE", "SUFFRAGE")
		for _, s := range r.Servers {
			role := s.Role
			if s.Suffrage == "nonvoter" {
				role = "nonvoter"
			}
			t.row(s.ID, s.Address, role, s.Suffrage)
		}
		return t.flush()
	}
	return nil
}
