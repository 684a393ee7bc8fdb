package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
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

// Build says which source this binary was built from: main.go's variables,
// set by the linker (-X main.version=..., -X main.commit=...; the Makefile
// and `make release` set both).
type Build struct {
	Version string // a release's tag (v0.1.0) or git describe's output; "dev" when unset
	Commit  string // the full commit ID; "" to take it from the Go build info
}

// commit is b.Commit or, when the linker set none, the revision go build
// stamped from the checkout ("-dirty" when it had changes), else "unknown".
func (b Build) commit() string {
	if b.Commit != "" {
		return b.Commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// versionCommand prints this binary's version, commit and Go version and,
// with --cluster, every member's version as it advertises it in gossip and
// the feature gate: during a rolling upgrade the nodes still on the old
// version are the ones left to restart, and the features they hold back.
func versionCommand(b Build) *ucli.Command {
	version := b.Version
	return &ucli.Command{
		Name:  "version",
		Usage: "print the version of this binary (--cluster: and of every node)",
		Flags: WithClientFlags(
			&ucli.BoolFlag{Name: "cluster", Usage: "also list every node's version (asks the agent at --addr)"},
			JSONFlag,
		),
		Action: func(c *ucli.Context) error {
			if !c.Bool("cluster") {
				platform := runtime.GOOS + "/" + runtime.GOARCH
				if c.Bool("json") {
					return PrintJSON(c, map[string]any{"version": version, "commit": b.commit(), "go": runtime.Version(), "platform": platform})
				}
				fmt.Fprintf(Stdout(c), "foreman %s\ncommit %s\n%s %s\n", version, b.commit(), runtime.Version(), platform)
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
			// The gate, as the agent at --addr sees it (nil: an agent
			// from before it, which answers without).
			raft, err := cl.Raft(c.Context)
			if err != nil {
				return Error(err)
			}
			if c.Bool("json") {
				return PrintJSON(c, map[string]any{"version": version, "nodes": nodes, "features": raft.Features})
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
			if err := t.Flush(); err != nil {
				return err
			}
			return printFeatures(c, raft.Features)
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
