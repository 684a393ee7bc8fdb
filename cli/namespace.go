package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/httpapi"
)

// namespaceCommand manages namespace records: a namespace's quota (max
// running jobs, cpu, memory) and policy (drivers, allow_root).
func namespaceCommand() *ucli.Command {
	return commandGroup("namespace", "set and show namespace quotas and policies",
		ClientCommand("set", "set a namespace's quota and policy (flags not given keep their value; needs a management token)", "NAME", namespaceSet,
			&ucli.IntFlag{Name: "max-running", Usage: "jobs of the namespace running at once (0 = unlimited)"},
			&ucli.StringFlag{Name: "max-cpu", Usage: "cpu its running jobs may hold, e.g. 4 or 500m (0 = unlimited)"},
			&ucli.StringFlag{Name: "max-memory", Usage: "memory its running jobs may hold, e.g. 8GiB (0 = unlimited)"},
			&ucli.StringSliceFlag{Name: "drivers", Usage: "drivers its jobs may use, comma-separated (\"\" = any)"},
			&ucli.BoolFlag{Name: "allow-root", Usage: "its jobs may run as root (on nodes whose --job-users allow root)"},
			&ucli.StringSliceFlag{Name: "volumes", Usage: "the host volumes its jobs may mount: NAME[,NAME] (repeatable; empty: any volume a node declares)"},
			&ucli.Int64Flag{Name: "share", Usage: "fair share, 1-1000000: among equal priorities, placements go to the namespace furthest below its share (README, \"Fair share\")"},
			JSONFlag,
		),
		ClientCommand("shares", "show each namespace's fair share, recent and live allocation and current factor", "", namespaceShares, JSONFlag),
		ClientCommand("ls", "list namespaces with a quota, a policy or active jobs", "", namespaceList, JSONFlag),
		ClientCommand("status", "show a namespace's quota, policy and usage (default: --namespace)", "[NAME]", namespaceStatus, JSONFlag),
		ClientCommand("delete", "remove a namespace's quota and policy (its jobs stay; needs a management token)", "NAME", func(c *ucli.Context) error {
			name, err := oneArg(c, "namespace NAME")
			if err != nil {
				return err
			}
			return act(c, func(cl *api.Client) (string, error) {
				return "namespace " + name + ": quota and policy removed", cl.DeleteNamespace(c.Context, name)
			})
		}),
	)
}

func namespaceList(c *ucli.Context) error {
	return list(c, "namespaces", func(cl *api.Client) ([]api.NamespaceStatus, error) { return cl.ListNamespaces(c.Context) },
		[]string{"NAMESPACE", "RUNNING", "QUEUED", "CPU", "MEMORY", "DRIVERS", "ROOT", "SHARE"}, func(n api.NamespaceStatus) []any {
			return []any{n.Name, used(int64(n.Usage.Running), int64(n.MaxRunning), fmtCount),
				n.Usage.Jobs["queued"], used(n.Usage.CPU, n.MaxCPU, httpapi.FormatCPU),
				used(n.Usage.Memory, n.MaxMemory, httpapi.FormatMemory), driversText(n.Drivers), yesNo(n.AllowRoot), shareText(n.Share)}
		})
}

func namespaceStatus(c *ucli.Context) error {
	name := innermost(c, "namespace")
	switch {
	case c.NArg() == 1:
		name = c.Args().First()
	case c.NArg() > 1:
		return Exitf(2, "%s takes at most one NAME (got %d arguments)", c.Command.FullName(), c.NArg())
	}
	if name == "" {
		name = "default"
	}
	return call(c, func(cl *api.Client) (*api.NamespaceStatus, error) { return cl.GetNamespace(c.Context, name) }, func(n *api.NamespaceStatus) error {
		return printNamespace(c, n)
	})
}

// printNamespace is namespace status's text.
func printNamespace(c *ucli.Context, n *api.NamespaceStatus) error {
	w := Stdout(c)
	fmt.Fprintf(w, "namespace:   %s\n", n.Name)
	fmt.Fprintf(w, "running:     %s\n", used(int64(n.Usage.Running), int64(n.MaxRunning), fmtCount))
	fmt.Fprintf(w, "cpu:         %s\n", used(n.Usage.CPU, n.MaxCPU, httpapi.FormatCPU))
	fmt.Fprintf(w, "memory:      %s\n", used(n.Usage.Memory, n.MaxMemory, httpapi.FormatMemory))
	fmt.Fprintf(w, "drivers:     %s\n", driversText(n.Drivers))
	fmt.Fprintf(w, "allow root:  %s\n", yesNo(n.AllowRoot))
	fmt.Fprintf(w, "share:       %s\n", shareText(n.Share))
	if len(n.Volumes) > 0 {
		fmt.Fprintf(w, "volumes:     %s\n", strings.Join(n.Volumes, ", "))
	}
	var jobs []string
	for _, st := range []string{"waiting", "queued", "running", "retrying"} {
		jobs = append(jobs, fmt.Sprintf("%d %s", n.Usage.Jobs[api.JobState(st)], st))
	}
	fmt.Fprintf(w, "active jobs: %s\n", strings.Join(jobs, ", "))
	return nil
}

// namespaceSet reads the current record and replaces the fields whose
// flags were given, so `namespace set NAME --max-cpu 4` keeps the rest.
func namespaceSet(c *ucli.Context) error {
	name, cl, err := argClient(c, "namespace NAME", newClient)
	if err != nil {
		return err
	}
	cur, err := cl.GetNamespace(c.Context, name)
	if err != nil {
		return Error(err)
	}
	in := httpapi.SetNamespaceRequest{Drivers: cur.Drivers, AllowRoot: cur.AllowRoot, Volumes: cur.Volumes}
	maxRunning := cur.MaxRunning
	in.MaxRunning = &maxRunning
	in.MaxCPU, _ = json.Marshal(cur.MaxCPU)
	in.MaxMemory, _ = json.Marshal(cur.MaxMemory)
	if c.IsSet("max-running") {
		maxRunning = c.Int("max-running")
	}
	if c.IsSet("max-cpu") {
		in.MaxCPU, _ = json.Marshal(c.String("max-cpu"))
	}
	if c.IsSet("max-memory") {
		in.MaxMemory, _ = json.Marshal(c.String("max-memory"))
	}
	if c.IsSet("drivers") {
		in.Drivers = commaList(c.StringSlice("drivers"))
	}
	if c.IsSet("allow-root") {
		in.AllowRoot = c.Bool("allow-root")
	}
	if c.IsSet("volumes") {
		in.Volumes = commaList(c.StringSlice("volumes"))
	}
	if cur.Share > 0 {
		share := cur.Share
		in.Share = &share
	}
	if c.IsSet("share") {
		share := c.Int64("share") // 0 or negative: the server names the field
		in.Share = &share
	}
	// The limits go as the user wrote them ("500m", "4Gi"): the server
	// parses them and names a bad one.
	var n api.NamespaceStatus
	if err := cl.Do(c.Context, api.Request{Method: http.MethodPut, Path: "/v1/namespaces/" + url.PathEscape(name), Body: in}, &n); err != nil {
		return Error(err)
	}
	if c.Bool("json") {
		return PrintJSON(c, n)
	}
	fmt.Fprintf(Stdout(c), "namespace %s: max_running %s, max_cpu %s, max_memory %s, drivers %s, allow_root %s, share %s\n", n.Name,
		limitText(int64(n.MaxRunning), fmtCount), limitText(n.MaxCPU, httpapi.FormatCPU), limitText(n.MaxMemory, httpapi.FormatMemory),
		driversText(n.Drivers), yesNo(n.AllowRoot), shareText(n.Share))
	return nil
}

// namespaceShares prints each namespace's fair-share standing.
func namespaceShares(c *ucli.Context) error {
	return call(c, func(cl *api.Client) (*api.NamespaceShares, error) { return cl.NamespaceShares(c.Context) }, func(s *api.NamespaceShares) error {
		w := Stdout(c)
		state := "on"
		if !s.Enabled {
			state = "off (no namespace sets a share)"
		}
		fmt.Fprintf(w, "fair share: %s, half-life %s\n", state, time.Duration(s.HalfLifeSeconds*float64(time.Second)))
		t := NewTable(w, "NAMESPACE", "SHARE", "NORMALIZED", "RECENT", "LIVE", "FACTOR")
		for _, n := range s.Namespaces {
			t.Row(n.Name, shareText(n.Share), pct(n.Normalized), pct(n.RecentDominant), pct(n.LiveDominant), fmt.Sprintf("%.3f", n.Factor))
		}
		return t.Flush()
	})
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

func shareText(s int64) string {
	if s <= 0 {
		return "-"
	}
	return fmt.Sprint(s)
}

// commaList is the names of a repeatable flag whose values may each
// hold several, comma-separated; empty names are dropped.
func commaList(values []string) []string {
	var out []string
	for _, v := range values {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				out = append(out, name)
			}
		}
	}
	return out
}

func fmtCount(n int64) string { return fmt.Sprint(n) }

func limitText(max int64, f func(int64) string) string {
	if max <= 0 {
		return "unlimited"
	}
	return f(max)
}

// used renders "N/MAX" or "N" without a limit.
func used(n, max int64, f func(int64) string) string {
	if max <= 0 {
		return f(n)
	}
	return f(n) + "/" + f(max)
}

func driversText(d []string) string {
	if len(d) == 0 {
		return "any"
	}
	return strings.Join(d, ",")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
