package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// gpuColumn is node ls's GPUS: allocated/capacity and the model of the
// detected devices ("4/8 H100"), "-" for a node without GPUs.
func gpuColumn(alloc, capacity fsm.Resources, gpus []fsm.GPU) string {
	c := capacity.Named["gpu"]
	if c == 0 && len(gpus) == 0 {
		return "-"
	}
	s := strconv.FormatInt(alloc.Named["gpu"], 10) + "/" + strconv.FormatInt(c, 10)
	if m := commonModel(gpus); m != "" {
		s += " " + m
	}
	return s
}

// commonModel is the devices' model without the vendor, when they share
// one ("H100 80GB HBM3"), else "mixed".
func commonModel(gpus []fsm.GPU) string {
	if len(gpus) == 0 {
		return ""
	}
	m := gpus[0].Model
	for _, g := range gpus[1:] {
		if g.Model != m {
			return "mixed"
		}
	}
	return strings.TrimPrefix(m, "NVIDIA ")
}

func nodeShow(c *ucli.Context) error {
	return show(c, "node NAME", func(cl *api.Client, name string) (*api.NodeDetail, error) { return cl.GetNode(c.Context, name) },
		func(d *httpapi.NodeDetail) error { return printNode(c, d) })
}

// printNode is node status's text.
func printNode(c *ucli.Context, d *httpapi.NodeDetail) error {
	w := Stdout(c)
	role := d.Role
	if role == "" {
		role = "server"
	}
	fmt.Fprintf(w, "Name:        %s (%s)\n", d.Name, role)
	fmt.Fprintf(w, "Address:     %s\n", orDash(d.HTTPAddr))
	fmt.Fprintf(w, "State:       %s, %s (since %s)\n", d.Gossip, d.Eligibility, ago(d.StateChangedAt, time.Now()))
	fmt.Fprintf(w, "CPU:         %s/%s\n", httpapi.FormatCPU(d.Allocated.CPU), httpapi.FormatCPU(d.Capacity.CPU))
	fmt.Fprintf(w, "Memory:      %s/%s\n", httpapi.FormatMemory(d.Allocated.MemoryMB), httpapi.FormatMemory(d.Capacity.MemoryMB))
	fmt.Fprintf(w, "GPUs:        %s\n", gpuColumn(d.Allocated, d.Capacity, d.GPUs))
	fmt.Fprintf(w, "Running:     %d\n", d.Running)
	fmt.Fprintf(w, "Drivers:     %s\n", orDash(strings.Join(d.Drivers, ",")))
	fmt.Fprintf(w, "Labels:      %s\n", labels(d.Labels))
	if len(d.Volumes) > 0 {
		var vs []string
		for _, v := range d.Volumes {
			mode := ""
			if v.ReadOnly {
				mode = " (ro)"
			}
			vs = append(vs, v.Name+"="+v.Path+mode)
		}
		fmt.Fprintf(w, "Volumes:     %s\n", strings.Join(vs, ", "))
	}
	if d.GPUDriver != "" || d.CUDAVersion != "" {
		fmt.Fprintf(w, "GPU driver:  %s (CUDA %s)\n", orDash(d.GPUDriver), orDash(d.CUDAVersion))
	}
	if d.GPUMemoryMode != "" {
		fmt.Fprintf(w, "GPU memory:  shares held by %s\n", gpuMemoryModeText(d.GPUMemoryMode))
	}
	if len(d.GPUs) > 0 {
		fmt.Fprintln(w)
		printGPUs(w, d.GPUs, d.Attempts)
	}
	if len(d.Attempts) > 0 {
		fmt.Fprintln(w)
		t := NewTable(w, "JOB", "ATTEMPT", "STATE", "GPUS", "ASSIGNED")
		for _, a := range d.Attempts {
			t.Row(a.JobID, a.Num, a.State, attemptGPUColumn(a), ago(a.AssignedAt, time.Now()))
		}
		return t.Flush()
	}
	return nil
}

// printGPUs lists a node's devices with the live attempt holding each.
func printGPUs(w io.Writer, gpus []fsm.GPU, attempts []fsm.Attempt) {
	holder := map[string]string{}
	shared := map[string]int64{}
	for _, a := range attempts {
		for _, g := range a.GPUs {
			holder[g.UUID] = a.JobID + "/" + strconv.Itoa(a.Num)
		}
		if s := a.GPUShare; s != nil {
			shared[s.GPU.UUID] += s.MemoryMiB
			if holder[s.GPU.UUID] != "" {
				holder[s.GPU.UUID] += ","
			}
			holder[s.GPU.UUID] += a.JobID + "/" + strconv.Itoa(a.Num)
		}
	}
	t := NewTable(w, "INDEX", "UUID", "MODEL", "MEMORY", "SHARED", "COMPUTE", "MINOR", "BUS", "HEALTH", "HELD BY", "LINKS")
	for _, g := range gpus {
		mem := "-"
		if g.MemoryMiB > 0 {
			mem = httpapi.FormatMemory(g.MemoryMiB)
		}
		health := "healthy"
		if g.Health != "" {
			health = g.Health
		}
		share := "-"
		if s := shared[g.UUID]; s > 0 {
			share = strconv.FormatInt(s, 10) + "/" + strconv.FormatInt(g.MemoryMiB, 10) + " MiB"
		}
		t.Row(g.Index, g.UUID, orDash(g.Model), mem, share, orDash(g.Compute), g.Minor, orDash(g.BusID), health,
			orDash(holder[g.UUID]), orDash(strings.Join(g.Links, " ")))
	}
	_ = t.Flush()
}

// gpuIndexes is an attempt's devices by index ("0,1,4,5"), "-" for none.
func gpuIndexes(gpus []fsm.GPU) string {
	if len(gpus) == 0 {
		return "-"
	}
	idx := make([]string, len(gpus))
	for i, g := range gpus {
		idx[i] = strconv.Itoa(g.Index)
	}
	return strings.Join(idx, ",")
}

// nodeGPUReset is `foreman node gpu-reset NAME [UUID...]`.
func nodeGPUReset(c *ucli.Context) error {
	if c.NArg() < 1 {
		return Exitf(2, "node gpu-reset takes NAME and optionally the UUIDs of its GPUs")
	}
	name := c.Args().First()
	return call(c, func(cl *api.Client) (*api.GPUResetResponse, error) {
		return cl.ResetNodeGPUs(c.Context, name, c.Args().Tail()...)
	}, func(out *api.GPUResetResponse) error {
		if len(out.UUIDs) == 0 {
			fmt.Fprintf(Stdout(c), "node %s has no unhealthy GPU: nothing to reset\n", name)
			return nil
		}
		fmt.Fprintf(Stdout(c), "node %s: health reset of %s; its agent detects again and publishes them\n", name, strings.Join(out.UUIDs, ", "))
		return nil
	})
}

// attemptGPUColumn is an attempt's devices: whole ones by index
// ("0,1,4,5"), a share as index and size ("0:20GiB"), "-" for none.
func attemptGPUColumn(a fsm.Attempt) string {
	if s := a.GPUShare; s != nil {
		return strconv.Itoa(s.GPU.Index) + ":" + httpapi.FormatMemory(s.MemoryMiB)
	}
	return gpuIndexes(a.GPUs)
}

// gpuMemoryModeText says how a node holds jobs to their VRAM shares.
func gpuMemoryModeText(mode string) string {
	switch mode {
	case fsm.GPUMemoryDmem:
		return "dmem (the kernel caps each job at its share)"
	case fsm.GPUMemoryWatchReport:
		return "watchdog-report (a job over its share is reported)"
	case fsm.GPUMemoryWatchKill:
		return "watchdog-kill (a job over its share is reported and stopped)"
	}
	return mode
}
