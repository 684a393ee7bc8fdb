package cli

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
)

// nodesDown is `node down --silent|--label ...`: the matching clients
// declared dead in one raft entry, after a dry run shown to the operator
// (asked to confirm unless --yes).
func nodesDown(c *ucli.Context) error {
	if c.NArg() > 0 {
		return Exitf(2, "node down: give a NAME or filters (--silent, --label), not both")
	}
	req := api.NodesDownRequest{Silent: c.Bool("silent"), SilentFor: api.Duration(c.Duration("since")), Role: c.String("role"), DryRun: true}
	for _, kv := range c.StringSlice("label") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return Exitf(2, "--label %q: want key=value", kv)
		}
		if req.Labels == nil {
			req.Labels = map[string]string{}
		}
		req.Labels[k] = v
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	plan, err := cl.MarkNodesDown(c.Context, req)
	if err != nil {
		return err
	}
	if c.Bool("dry-run") {
		return printNodesDown(c, plan, "would declare")
	}
	if !c.Bool("yes") {
		fmt.Fprintf(os.Stderr, "declare %d client(s) dead (%s)? Their jobs rerun once their lease is out. [y/N] ", len(plan.Nodes), listSome(plan.Nodes, 10))
		line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			return Exitf(1, "node down: not confirmed; nothing changed")
		}
	}
	req.DryRun, req.Names = false, plan.Nodes
	done, err := cl.MarkNodesDown(c.Context, req)
	if err != nil {
		return err
	}
	return printNodesDown(c, done, "declared")
}

func printNodesDown(c *ucli.Context, r *api.NodesDownResponse, verb string) error {
	if c.Bool("json") {
		return PrintJSON(c, r)
	}
	fmt.Fprintf(Stdout(c), "%s %d client(s) dead: %s\n", verb, len(r.Nodes), listSome(r.Nodes, 20))
	return nil
}

// listSome joins the first n names and says how many more.
func listSome(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}
