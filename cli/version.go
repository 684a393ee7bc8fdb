package cli

import (
	"fmt"
	"sort"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
)

// nodeVersion is one member's version in `foreman version --cluster`.
type nodeVersion struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Version string `json:"version"` // "" for a member that advertised none (older than this field)
}

// versionCommand prints this binary's version and, with --cluster, every
// member's as it advertises it in gossip: during a rolling upgrade the
// nodes still on the old version are the ones left to restart.
func versionCommand(version string) *ucli.Command {
	return &ucli.Command{
		Name:  "version",
		Usage: "print the version of this binary (--cluster: and of every node)",
		Flags: WithClientFlags(
			&ucli.BoolFlag{Name: "cluster", Usage: "also list every node's version (asks the agent at --addr)"},
			JSONFlag,
		),
		Action: func(c *ucli.Context) error {
			if !c.Bool("cluster") {
				if c.Bool("json") {
					return PrintJSON(c, map[string]any{"version": version})
				}
				fmt.Fprintf(Stdout(c), "foreman %s\n", version)
				return nil
			}
			cl, err := newClient(c)
			if err != nil {
				return err
			}
			ms, err := cl.Members(c.Context)
			if err != nil {
				return Error(err)
			}
			nodes := nodeVersions(ms)
			if c.Bool("json") {
				return PrintJSON(c, map[string]any{"version": version, "nodes": nodes})
			}
			fmt.Fprintf(Stdout(c), "foreman %s (this binary)\n\n", version)
			t := NewTable(Stdout(c), "NODE", "STATUS", "VERSION")
			for _, n := range nodes {
				v := n.Version
				if v == "" {
					v = "-"
				}
				t.Row(n.Name, n.Status, v)
			}
			return t.Flush()
		},
	}
}

func nodeVersions(ms []api.Member) []nodeVersion {
	out := make([]nodeVersion, 0, len(ms))
	for _, m := range ms {
		out = append(out, nodeVersion{Name: m.Name, Status: m.Status, Version: m.Version})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
