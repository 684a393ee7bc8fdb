package cli

import (
	"fmt"
	"strconv"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/httpapi"
)

// jobGPUUsage asks, for each live attempt of d holding GPUs, what its
// processes use there (GET /v1/jobs/{id}/gpu-usage, measured by the
// attempt's node). An attempt whose node cannot say is left out, with why.
func jobGPUUsage(c *ucli.Context, cl *api.Client, d *httpapi.JobDetail) (out []api.JobGPUUsage, failed []string) {
	for i := range d.Attempts {
		a := &d.Attempts[i]
		if !a.State.Live() || len(a.Devices()) == 0 {
			continue
		}
		u, err := cl.JobGPUUsage(c.Context, a.JobID, a.Num)
		if err != nil {
			failed = append(failed, fmt.Sprintf("attempt %d: %v", a.Num, err))
			continue
		}
		out = append(out, *u)
	}
	return out, failed
}

// printGPUUsage is job status's GPU USE section.
func printGPUUsage(c *ucli.Context, usage []api.JobGPUUsage, failed []string) error {
	if len(usage) == 0 && len(failed) == 0 {
		return nil
	}
	fmt.Fprintln(Stdout(c), "\nGPU USE")
	t := NewTable(Stdout(c), "ATTEMPT", "NODE", "GPU", "UUID", "MEMORY", "SM")
	for _, u := range usage {
		for _, g := range u.Devices {
			mem, sm := "-", "-"
			if g.MemoryBytes != nil {
				mem = httpapi.FormatMemory(*g.MemoryBytes >> 20)
			}
			if g.SMRatio != nil {
				sm = strconv.FormatFloat(*g.SMRatio*100, 'f', 0, 64) + "%"
			}
			t.Row(u.Attempt, u.Node, g.Index, g.UUID, mem, sm)
		}
	}
	if err := t.Flush(); err != nil {
		return err
	}
	for _, u := range usage {
		if u.Note != "" {
			fmt.Fprintf(Stdout(c), "attempt %d: %s\n", u.Attempt, u.Note)
		}
	}
	for _, f := range failed {
		fmt.Fprintln(Stdout(c), "GPU use unavailable: "+f)
	}
	return nil
}
