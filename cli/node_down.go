package cli

import (
	"fmt"
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
	labels, err := labelFlags(c)
	if err != nil {
		return err
	}
	req := api.NodesDownRequest{Silent: c.Bool("silent"), SilentFor: api.Duration(c.Duration("since")), Role: c.String("role"), Labels: labels}
	return bulkChange[api.NodesDownResponse]{
		cmd: "node down",
		send: func(cl *api.Client, dryRun bool, names []string) (*api.NodesDownResponse, error) {
			req.DryRun, req.Names = dryRun, names
			return cl.MarkNodesDown(c.Context, req)
		},
		nodes: func(r *api.NodesDownResponse) []string { return r.Nodes },
		ask: func(n int, some string) string {
			return fmt.Sprintf("declare %d client(s) dead (%s)? Their jobs rerun once their lease is out.", n, some)
		},
		show: printNodesDown, would: "would declare", did: "declared",
		askEmpty: true,
	}.run(c)
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
