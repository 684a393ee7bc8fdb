package cli

import (
	"fmt"
	"os"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/httpapi"
)

func workflowCommand() *ucli.Command {
	return commandGroup("workflow", "submit, list, inspect, cancel and retry workflows (DAGs of named jobs)",
		ClientCommand("submit", "submit a workflow file (YAML or JSON): all its jobs or none", "", workflowSubmit,
			&ucli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "workflow file (YAML or JSON)"}, JSONFlag),
		ClientCommand("ls", "list workflows, newest first", "", workflowList,
			&ucli.IntFlag{Name: "limit", Value: 50, Usage: "at most this many workflows (0 = all)"}, ConsistentFlag, JSONFlag),
		ClientCommand("status", "show a workflow and every job with the edge that released or skipped it", "WORKFLOW_ID", workflowStatus,
			ConsistentFlag, JSONFlag),
		ClientCommand("cancel", "cancel every job of the workflow that has not finished", "WORKFLOW_ID", func(c *ucli.Context) error {
			return workflowChange(c, func(cl *api.Client, id string) (*api.WorkflowDetail, error) {
				return cl.CancelWorkflow(c.Context, id, c.String("reason"))
			})
		}, &ucli.StringFlag{Name: "reason", Usage: "recorded on the jobs"}, JSONFlag),
		ClientCommand("retry", "re-run the failed, cancelled and skipped jobs (keeping the succeeded ones)", "WORKFLOW_ID", func(c *ucli.Context) error {
			return workflowChange(c, func(cl *api.Client, id string) (*api.WorkflowDetail, error) { return cl.RetryWorkflow(c.Context, id) })
		}, JSONFlag),
	)
}

func workflowSubmit(c *ucli.Context) error {
	path := c.String("file")
	if path == "" {
		return Exitf(2, "workflow submit needs -f FILE (YAML or JSON)")
	}
	if c.NArg() > 0 {
		return Exitf(2, "workflow submit takes no arguments (got %q); the jobs are in -f FILE", c.Args().First())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if t := strings.TrimSpace(string(b)); !strings.HasPrefix(t, "{") {
		if b, err = httpapi.YAMLToJSON(b); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	// The file goes as it is (the server checks it, strictly), with no
	// idempotency key made up: a submit the user did not key is sent once.
	return post(c, "/v1/workflows", b, func(res *api.WorkflowSubmitResponse) error {
		fmt.Fprintln(Stdout(c), res.ID)
		return nil
	})
}

func workflowList(c *ucli.Context) error {
	cl, err := readClient(c)
	if err != nil {
		return err
	}
	return printPages(c, "workflows", func(n int, cursor string) ([]api.Workflow, string, error) {
		page, err := cl.ListWorkflows(c.Context, api.WorkflowQuery{Cursor: cursor, Limit: n})
		if err != nil {
			return nil, "", err
		}
		return page.Workflows, page.NextCursor, nil
	}, []string{"ID", "NAME", "STATE", "JOBS", "DONE", "FAILED", "SKIPPED", "SUBMITTED", "FINISHED"}, func(w api.Workflow, now time.Time) []any {
		done := 0
		for s, n := range w.Counts {
			if s.Terminal() {
				done += n
			}
		}
		return []any{w.ID, orDash(truncate(w.Name, 40)), w.State, w.Jobs, done, w.Counts[api.JobFailed], w.Counts[api.JobSkipped],
			ago(w.SubmittedAt, now), ago(w.FinishedAt, now)}
	})
}

func workflowStatus(c *ucli.Context) error {
	id, err := oneArg(c, "WORKFLOW_ID")
	if err != nil {
		return err
	}
	return call(c, func(cl *api.Client) (*api.WorkflowDetail, error) {
		if c.Bool("consistent") {
			cl = cl.Consistent()
		}
		return cl.GetWorkflow(c.Context, id)
	}, func(d *api.WorkflowDetail) error { return printWorkflow(c, d) })
}

func printWorkflow(c *ucli.Context, d *api.WorkflowDetail) error {
	now := time.Now()
	kv := NewTable(Stdout(c))
	kv.Row("ID:", d.ID)
	kv.Row("Name:", d.Name)
	kv.Row("State:", d.State)
	kv.Row("Jobs:", d.Jobs)
	kv.Row("Submitted:", d.SubmittedAt.Local().Format(time.RFC3339)+" ("+ago(d.SubmittedAt, now)+")")
	if !d.FinishedAt.IsZero() {
		kv.Row("Finished:", d.FinishedAt.Local().Format(time.RFC3339)+" ("+ago(d.FinishedAt, now)+")")
	}
	if err := kv.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(Stdout(c))
	t := NewTable(Stdout(c), "NAME", "STATE", "DEPENDS ON", "CONDITION", "DECIDED BY", "ATTEMPTS", "EXIT", "ID", "REASON")
	for _, j := range d.JobList {
		decided := "-"
		if j.Decision != "" {
			decided = j.Decision + " by " + j.DecidedBy
		}
		cond := string(j.Condition)
		if cond == "" && len(j.DependsOn) > 0 {
			cond = "success"
		}
		t.Row(j.Name, j.State, orDash(strings.Join(j.DependsOn, ",")), orDash(cond), decided, j.Attempts,
			exitCode(j.ExitCode), j.ID, orDash(truncate(j.Reason, 60)))
	}
	return t.Flush()
}

func workflowChange(c *ucli.Context, fn func(*api.Client, string) (*api.WorkflowDetail, error)) error {
	return change(c, "WORKFLOW_ID", fn, func(d *api.WorkflowDetail) (string, error) {
		return fmt.Sprintf("workflow %s is %s", d.ID, d.State), nil
	})
}
