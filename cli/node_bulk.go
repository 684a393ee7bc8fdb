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

// bulkChange is what a bulk node command does once its request is built:
// a dry run shown to the operator, then, once confirmed, the change.
type bulkChange[R any] struct {
	cmd string // "node drain": names the command when not confirmed
	// send posts the request: the dry run, or the change of the named nodes.
	send  func(cl *api.Client, dryRun bool, names []string) (*R, error)
	nodes func(*R) []string               // the nodes an answer lists
	ask   func(n int, some string) string // the confirmation's question
	show  func(c *ucli.Context, r *R, verb string) error
	would string // show's verb for the dry run
	did   string // show's verb for the change
	// askEmpty: a dry run that matched no node is still confirmed and sent.
	askEmpty bool
}

func (b bulkChange[R]) run(c *ucli.Context) error {
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	plan, err := b.send(cl, true, nil)
	if err != nil {
		return err
	}
	names := b.nodes(plan)
	if c.Bool("dry-run") || (len(names) == 0 && !b.askEmpty) {
		return b.show(c, plan, b.would)
	}
	if err := confirm(c, b.cmd, b.ask(len(names), listSome(names, 10))); err != nil {
		return err
	}
	// The nodes shown, not the filter again: a node that came to match
	// since is not changed unasked.
	done, err := b.send(cl, false, names)
	if err != nil {
		return err
	}
	return b.show(c, done, b.did)
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
	req := api.NodesDrainRequest{Role: c.String("role"), Labels: labels, Deadline: api.Duration(c.Duration("deadline"))}
	return bulkChange[api.NodesChangeResponse]{
		cmd: "node drain",
		send: func(cl *api.Client, dryRun bool, names []string) (*api.NodesChangeResponse, error) {
			req.DryRun, req.Names = dryRun, names
			return cl.DrainNodes(c.Context, req)
		},
		nodes: changedNodes,
		ask:   func(n int, some string) string { return fmt.Sprintf("drain %d node(s) (%s)?", n, some) },
		show:  printNodesChange, would: "would drain", did: "drained",
	}.run(c)
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
	req := api.NodesEligibilityRequest{Role: c.String("role"), Labels: labels, Eligibility: e}
	return bulkChange[api.NodesChangeResponse]{
		cmd: "node eligibility",
		send: func(cl *api.Client, dryRun bool, names []string) (*api.NodesChangeResponse, error) {
			req.DryRun, req.Names = dryRun, names
			return cl.SetNodesEligibility(c.Context, req)
		},
		nodes: changedNodes,
		ask:   func(n int, some string) string { return fmt.Sprintf("mark %d node(s) %s (%s)?", n, e, some) },
		show:  printNodesChange, would: "would be " + verb, did: verb,
	}.run(c)
}

func changedNodes(r *api.NodesChangeResponse) []string { return r.Nodes }

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
