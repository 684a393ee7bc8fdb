package bench

import (
	"context"
	"fmt"
	"sort"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/cli"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// artifactsCommand is `foreman bench artifacts` (issue 25): what an
// artifact of --size costs an attempt on its node (the job writes it, the
// supervisor collects it: node-local) and, side by side in the same run,
// what the object store adds until it is durable (finish → outputs stored),
// as MB/s per node.
func artifactsCommand(driver ucli.Flag) *ucli.Command {
	return benchCommand("artifacts", "jobs that each write an artifact of --size: node-local cost vs the time and MB/s to the object store, per node",
		"Each job writes --size bytes (from /dev/zero) into its artifacts directory; the jobs run one\n"+
			"after another. node-local = the attempt's run time (write + collect on the node); to store =\n"+
			"the attempt's finish → its outputs recorded stored (the upload, after the finish). Without\n"+
			"--object-store on the agents only the node-local column is measured. Times across machines\n"+
			"compare the executing node's clock with the leader's.",
		withClient(4, benchArtifacts), driver,
		&ucli.StringFlag{Name: "size", Value: "256MiB", Usage: "artifact size per job (e.g. 1GiB)"},
		&ucli.IntFlag{Name: "jobs", Value: 3, Usage: "jobs to run (sequentially)"},
		timeoutFlag(30*time.Minute))
}

// artifactsRow is one node's figures.
type artifactsRow struct {
	Node          string  `json:"node"`
	Jobs          int     `json:"jobs"`
	SizeBytes     int64   `json:"size_bytes"`
	NodeLocalP50S float64 `json:"node_local_p50_s"`         // attempt run time
	ToStoreP50S   float64 `json:"to_store_p50_s,omitempty"` // finish → stored
	StoreMBps     float64 `json:"store_mb_per_s,omitempty"` // size / to store (median)
	NotStored     int     `json:"not_stored,omitempty"`     // jobs whose upload gave up
	Store         string  `json:"store,omitempty"`          // the store, when there is one
}

func benchArtifacts(ctx context.Context, c *ucli.Context, cl *api.Client) error {
	mib, err := httpapi.ParseMemory(c.String("size"))
	if err != nil || mib < 1 {
		return cli.Exitf(2, "--size: %v (want e.g. 256MiB or 1GiB)", err)
	}
	size := mib << 20
	n := c.Int("jobs")
	if n < 1 {
		return cli.Exitf(2, "--jobs must be at least 1")
	}
	deadline := time.Now().Add(c.Duration("timeout"))
	run := benchRunID()
	type sample struct {
		local, toStore time.Duration
		stored         bool
		store          string
	}
	byNode := map[string][]sample{}
	for i := range n {
		spec := noopSpec(run, c.String("driver"))
		spec.Command = httpapi.Argv("/bin/sh", "-c", fmt.Sprintf(`head -c %d /dev/zero > "$FOREMAN_ARTIFACTS/blob"`, size))
		id, _, err := submitJob(ctx, cl, spec, "")
		if err != nil {
			return err
		}
		var at *fsm.Attempt
		for {
			d, err := jobDetail(ctx, cl, id)
			if err != nil && !isNotFound(err) {
				return err
			}
			if err == nil && d.Job.State.Terminal() && len(d.Attempts) > 0 {
				if d.Job.State != fsm.JobSucceeded {
					return fmt.Errorf("job %s %s: %s", id, d.Job.State, d.Job.Reason)
				}
				a := d.Attempts[len(d.Attempts)-1]
				if a.Outputs == nil || a.Outputs.State != fsm.OutputsPending {
					at = &a
					break
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("job %s not finished and stored within --timeout", id)
			}
			if err := pause(ctx, 20*time.Millisecond); err != nil {
				return err
			}
		}
		s := sample{local: at.FinishedAt.Sub(at.StartedAt)}
		if o := at.Outputs; o != nil {
			s.store, s.stored = o.Store, o.State == fsm.OutputsStored
			s.toStore = o.StoredAt.Sub(at.FinishedAt)
		}
		byNode[at.Node] = append(byNode[at.Node], s)
		note("%d/%d: node %s, node-local %v, to store %v", i+1, n, at.Node, s.local.Round(time.Millisecond), s.toStore.Round(time.Millisecond))
	}
	var rows []artifactsRow
	for node, ss := range byNode {
		r := artifactsRow{Node: node, Jobs: len(ss), SizeBytes: size}
		var local, toStore []time.Duration
		for _, s := range ss {
			local = append(local, s.local)
			if s.store != "" {
				r.Store = s.store
				if s.stored {
					toStore = append(toStore, s.toStore)
				} else {
					r.NotStored++
				}
			}
		}
		r.NodeLocalP50S = round3(percentileMS(sortDurations(local), 50) / 1000)
		if len(toStore) > 0 {
			r.ToStoreP50S = round3(percentileMS(sortDurations(toStore), 50) / 1000)
			if r.ToStoreP50S > 0 {
				r.StoreMBps = round3(float64(size) / (1 << 20) / r.ToStoreP50S)
			}
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Node < rows[j].Node })
	var text [][]any
	for _, r := range rows {
		toStore, mbps := "-", "-"
		if r.ToStoreP50S > 0 {
			toStore, mbps = fmt.Sprintf("+%.2fs", r.ToStoreP50S), fmt.Sprintf("%.1f", r.StoreMBps)
		}
		text = append(text, []any{r.Node, r.Jobs, fmt.Sprintf("%d MiB", mib), fmt.Sprintf("%.2fs", r.NodeLocalP50S), toStore, mbps, r.NotStored})
	}
	return printTable(c, rows, []string{"NODE", "JOBS", "SIZE", "NODE-LOCAL P50", "TO STORE P50", "STORE MB/S", "NOT STORED"}, text...)
}
