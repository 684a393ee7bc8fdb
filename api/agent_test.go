package api_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/api"
)

// Every typed method against the real dev agent TestMain started: each
// answer decodes and says what was asked.
func TestDevAgentRoutes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := api.NewClient(api.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Health(ctx); err != nil {
		t.Fatal(err)
	}
	must(t, "ready", c.Ready(ctx))

	t.Run("jobs", func(t *testing.T) {
		// A label of this run only: the agent is shared by every test of
		// the process, and -count runs them again on it.
		suite := map[string]string{"suite": fmt.Sprintf("routes-%d", time.Now().UnixNano())}
		subs, err := c.SubmitJobs(ctx, []api.JobSpec{
			{Name: "routes-a", Command: api.Shell("echo out; echo err >&2"), Labels: suite, Queue: "routes"},
			{Name: "routes-b", Command: []string{"false"}, MaxAttempts: api.Int(1), Labels: suite},
		})
		must(t, "submit batch", err)
		a, err := c.WaitJob(ctx, subs[0].ID, nil)
		must(t, "wait a", err)
		b, err := c.WaitJob(ctx, subs[1].ID, nil)
		must(t, "wait b", err)
		if a.Job.State != api.JobSucceeded || b.Job.State != api.JobFailed || len(b.Attempts) != 1 || *b.Attempts[0].ExitCode != 1 {
			t.Fatalf("a %s, b %s %+v", a.Job.State, b.Job.State, b.Attempts)
		}
		var stderr bytes.Buffer
		must(t, "logs", c.Logs(ctx, subs[0].ID, api.LogQuery{Stream: "stderr", Attempt: 1}, &stderr))
		if stderr.String() != "err\n" {
			t.Errorf("stderr %q", stderr.String())
		}
		list, err := c.Consistent().ListJobs(ctx, api.JobQuery{Labels: suite, State: api.JobFailed})
		must(t, "list", err)
		if len(list.Jobs) != 1 || list.Jobs[0].ID != subs[1].ID {
			t.Errorf("failed jobs labelled %v: %+v", suite, list.Jobs)
		}
		counts, err := c.JobCounts(ctx)
		must(t, "counts", err)
		if counts.Counts[api.JobFailed] < 1 || counts.Total < 2 {
			t.Errorf("counts %+v", counts)
		}
		events, err := c.JobEvents(ctx, subs[0].ID)
		must(t, "events", err)
		if len(events) == 0 || events[0].Type != "job.submitted" || events[0].JobID != subs[0].ID {
			t.Errorf("timeline %+v", events)
		}
		retried, err := c.RetryJob(ctx, subs[1].ID)
		must(t, "retry", err)
		if retried.Job.State.Terminal() {
			t.Errorf("retried job is %s", retried.Job.State)
		}
		if _, err := c.CancelJob(ctx, subs[0].ID, "done already"); !errors.Is(err, api.ErrConflict) {
			t.Errorf("cancel of a finished job: %v, want conflict", err)
		}
		arts, err := c.ListArtifacts(ctx, subs[0].ID, 0)
		must(t, "artifacts", err)
		if arts.JobID != subs[0].ID || arts.Attempt != 1 {
			t.Errorf("artifacts %+v", arts)
		}
		queues, err := c.ListQueues(ctx)
		must(t, "queues", err)
		_ = queues
		q, err := c.SetQueue(ctx, "routes", 2)
		must(t, "set queue", err)
		if q.Name != "routes" || q.MaxRunning != 2 {
			t.Errorf("queue %+v", q)
		}
	})

	t.Run("schedules", func(t *testing.T) {
		s, err := c.CreateSchedule(ctx, api.ScheduleSpec{Name: "routes-nightly", Cron: "0 3 * * *", Job: &api.JobSpec{Command: []string{"true"}}})
		must(t, "create", err)
		if s.Spec.Name != "routes-nightly" || s.Spec.Job == nil || s.Spec.Overlap == "" || s.NextFireUTC == "" {
			t.Errorf("schedule %+v", s)
		}
		s, err = c.PauseSchedule(ctx, "routes-nightly", true)
		must(t, "pause", err)
		if !s.Spec.Paused {
			t.Error("not paused")
		}
		fire, err := c.TriggerSchedule(ctx, "routes-nightly")
		must(t, "trigger", err)
		if fire.JobID == "" || fire.Workflow {
			t.Errorf("trigger %+v", fire)
		}
		d, err := c.WaitJob(ctx, fire.JobID, nil)
		must(t, "wait fired job", err)
		if d.Job.Spec.Schedule != "routes-nightly" || d.Job.Spec.ScheduledAt == nil {
			t.Errorf("fired job's spec %+v", d.Job.Spec)
		}
		all, err := c.ListSchedules(ctx)
		must(t, "list", err)
		if len(all) == 0 {
			t.Error("no schedules")
		}
		// A spec read back goes in again as it is.
		s.Spec.Paused = false
		s, err = c.UpdateSchedule(ctx, "routes-nightly", s.Spec)
		must(t, "update", err)
		if s.Spec.Paused || s.Spec.Name != "routes-nightly" {
			t.Errorf("updated %+v", s.Spec)
		}
		must(t, "delete", c.DeleteSchedule(ctx, "routes-nightly"))
		if _, err := c.GetSchedule(ctx, "routes-nightly"); !errors.Is(err, api.ErrNotFound) {
			t.Errorf("deleted schedule: %v, want not found", err)
		}
	})

	t.Run("workflows", func(t *testing.T) {
		sub, err := c.SubmitWorkflow(ctx, api.WorkflowSpec{Name: "routes-wf", Jobs: []api.JobSpec{
			// a fails; run again by the retry, it runs until the cancel
			// (a retried a that failed at once would race the cancel).
			{Name: "a", Command: api.Shell(`if [ "$FOREMAN_ATTEMPT" = 1 ]; then exit 1; fi; exec sleep 600`), MaxAttempts: api.Int(1)},
			{Name: "b", Command: []string{"true"}, DependsOn: []string{"a"}},
		}})
		must(t, "submit", err)
		if _, err := c.WaitJob(ctx, sub.Jobs[1].ID, nil); err != nil {
			t.Fatal(err)
		}
		wf, err := c.Consistent().GetWorkflow(ctx, sub.ID)
		must(t, "get", err)
		if wf.Name != "routes-wf" || len(wf.JobList) != 2 || wf.JobList[1].State != api.JobSkipped {
			t.Errorf("workflow %+v", wf)
		}
		list, err := c.ListWorkflows(ctx, api.WorkflowQuery{Limit: 1})
		must(t, "list", err)
		if len(list.Workflows) != 1 {
			t.Errorf("list %+v", list)
		}
		_, err = c.RetryWorkflow(ctx, sub.ID)
		must(t, "retry", err)
		_, err = c.CancelWorkflow(ctx, sub.ID, "test over")
		must(t, "cancel", err)
		a, err := c.WaitJob(ctx, sub.Jobs[0].ID, nil)
		must(t, "wait a", err)
		if a.Job.State != api.JobCancelled {
			t.Errorf("a after the cancel: %s, want cancelled", a.Job.State)
		}
	})

	t.Run("nodes and cluster", func(t *testing.T) {
		nodes, err := c.ListNodes(ctx, api.NodeQuery{})
		must(t, "nodes", err)
		if len(nodes.Nodes) != 1 || nodes.Summary.Total != 1 || nodes.Nodes[0].Capacity.CPU == 0 {
			t.Fatalf("nodes %+v", nodes)
		}
		name := nodes.Nodes[0].Name
		n, err := c.GetNode(ctx, name)
		must(t, "node", err)
		if n.Name != name || n.Gossip != "alive" {
			t.Errorf("node %+v", n)
		}
		_, err = c.NodeUsage(ctx, name)
		must(t, "usage", err)
		n, err = c.SetEligibility(ctx, name, true)
		must(t, "eligibility", err)
		if n.Eligibility != "eligible" {
			t.Errorf("eligibility %q", n.Eligibility)
		}
		members, err := c.Members(ctx)
		must(t, "members", err)
		if len(members) != 1 || !members[0].Leader {
			t.Errorf("members %+v", members)
		}
		r, err := c.Raft(ctx)
		must(t, "raft", err)
		if r.Node != name || r.Leader != name || r.AppliedIndex == 0 {
			t.Errorf("raft %+v", r)
		}
		h, err := c.StateHash(ctx)
		must(t, "hash", err)
		if h.Hash == "" || h.Index == 0 {
			t.Errorf("hash %+v", h)
		}
	})

	t.Run("namespaces", func(t *testing.T) {
		ns, err := c.SetNamespace(ctx, "routes-team", api.NamespaceSpec{MaxRunning: api.Int(3), MaxCPU: 2000, MaxMemory: 1024})
		must(t, "set", err)
		if !ns.Configured || ns.MaxRunning != 3 || ns.MaxCPU != 2000 || ns.MaxMemory != 1024 {
			t.Errorf("namespace %+v", ns)
		}
		sub, err := c.WithNamespace("routes-team").SubmitJob(ctx, api.JobSpec{Command: []string{"true"}})
		must(t, "submit in namespace", err)
		d, err := c.WithNamespace("routes-team").GetJob(ctx, sub.ID)
		must(t, "get in namespace", err)
		if d.Job.Spec.Namespace != "routes-team" {
			t.Errorf("job's namespace %q", d.Job.Spec.Namespace)
		}
		all, err := c.ListNamespaces(ctx)
		must(t, "list", err)
		if len(all) == 0 {
			t.Error("no namespaces")
		}
		must(t, "delete", c.DeleteNamespace(ctx, "routes-team"))
		got, err := c.GetNamespace(ctx, "routes-team")
		if err == nil && got.Configured {
			t.Errorf("deleted namespace still configured: %+v", got)
		}
	})

	t.Run("tokens", func(t *testing.T) {
		// The dev agent runs without --acl: no token is needed, and the
		// list decodes.
		_, err := c.ListTokens(ctx)
		must(t, "list tokens", err)
	})
}

// must ends t (the subtest's own: FailNow on a parent from a subtest is a
// panic) when err is set.
func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
