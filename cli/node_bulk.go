package cli

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
)

// Bulk drain and eligibility (issue 38): `node drain --label k=v` and
// `node eligibility --enable|--disable --label k=v` change every matching
// node in one raft entry, after a dry run shown to the operator (asked to
// confirm unless --yes), as `node down --silent` does.

// bulkFlags are the filter and the confirmation of a bulk node change.
var bulkFlags = []ucli.Flag{
	&ucli.StringSliceFlag{Name: "label", Usage: "every node with this label k=v (repeatable; all must match)"},
	&ucli.StringFlag{Name: "role", Usage: "with --label: only nodes of this role (server, replica, client)"},
	&ucli.BoolFlag{Name: "yes", Usage: "with --label: do not ask before changing them"},
	&ucli.BoolFlag{Name: "dry-run", Usage: "with --label: list the nodes and change nothing"},
}

// bulkNodes reports whether the command names its nodes by filter.
func bulkNodes(c *ucli.Context) bool {
	return c.IsSet("label") || c.IsSet("role") || c.Bool("dry-run") || c.Bool("yes")
}

// labelFlags parses --label k=v (repeatable) into a map.
func labelFlags(c *ucli.Context) (map[string]string, error) {
	var out map[string]string
	for _, kv := range c.StringSlice("label") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, Exitf(2, "--label %q: want key=value", kv)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out, nil
}

// confirm asks the operator on stderr; anything but y or yes is a no.
func confirm(c *ucli.Context, cmd, question string) error {
	if c.Bool("yes") {
		return nil
	}
	fmt.Fprintf(os.Stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		return Exitf(1, "%s: not confirmed; nothing changed", cmd)
	}
	return nil
}

// nodesDrain is `node drain --label k=v [--role R] [--deadline D]`.
func nodesDrain(c *ucli.Context) error {
	if c.NArg() > 0 {
		return Exitf(2, "node drain: give a NAME or --label, not both")
	}
	labels, err := labelFlags(c)
	if err != nil {
		return err
	}
	req := api.NodesDrainRequest{Role: c.String("role"), Labels: labels, Deadline: api.Duration(c.Duration("deadline")), DryRun: true}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	plan, err := cl.DrainNodes(c.Context, req)
	if err != nil {
		return err
	}
	if c.Bool("dry-run") || len(plan.Nodes) == 0 {
		return printNodesChange(c, plan, "would drain")
	}
	if err := confirm(c, "node drain", fmt.Sprintf("drain %d node(s) (%s)?", len(plan.Nodes), listSome(plan.Nodes, 10))); err != nil {
		return err
	}
	// The nodes shown, not the filter again: a node that came to match
	// since is not changed unasked.
	req.DryRun, req.Names = false, plan.Nodes
	done, err := cl.DrainNodes(c.Context, req)
	if err != nil {
		return err
	}
	return printNodesChange(c, done, "drained")
}

// nodesEligibility is `node eligibility --enable|--disable --label k=v`.
func nodesEligibility(c *ucli.Context) error {
	if c.NArg() > 0 {
		return Exitf(2, "node eligibility: give NAME eligible|ineligible or --label, not both")
	}
	if c.Bool("enable") == c.Bool("disable") {
		return Exitf(2, "node eligibility: give one of --enable and --disable")
	}
	labels, err := labelFlags(c)
	if err != nil {
		return err
	}
	e, verb := "ineligible", "marked ineligible"
	if c.Bool("enable") {
		e, verb = "eligible", "marked eligible"
	}
	req := api.NodesEligibilityRequest{Role: c.String("role"), Labels: labels, Eligibility: e, DryRun: true}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	plan, err := cl.SetNodesEligibility(c.Context, req)
	if err != nil {
		return err
	}
	if c.Bool("dry-run") || len(plan.Nodes) == 0 {
		return printNodesChange(c, plan, "would be "+verb)
	}
	if err := confirm(c, "node eligibility", fmt.Sprintf("mark %d node(s) %s (%s)?", len(plan.Nodes), e, listSome(plan.Nodes, 10))); err != nil {
		return err
	}
	req.DryRun, req.Names = false, plan.Nodes
	done, err := cl.SetNodesEligibility(c.Context, req)
	if err != nil {
		return err
	}
	return printNodesChange(c, done, verb)
}

func printNodesChange(c *ucli.Context, r *api.NodesChangeResponse, verb string) error {
	if c.Bool("json") {
		return PrintJSON(c, r)
	}
	w := Stdout(c)
	if len(r.Nodes) > 0 {
		fmt.Fprintf(w, "%s %d node(s): %s\n", verb, len(r.Nodes), listSome(r.Nodes, 20))
	}
	if len(r.Unchanged) > 0 {
		fmt.Fprintf(w, "unchanged (so already) %d node(s): %s\n", len(r.Unchanged), listSome(r.Unchanged, 20))
	}
	return nil
}
