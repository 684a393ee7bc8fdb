package cli

import (
	"fmt"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/httpapi"
)

// usageCommand shows what finished attempts used (issue 39).
func usageCommand() *ucli.Command {
	return ClientCommand("usage", "show what finished attempts used: CPU, memory, GPU and wall time, requested next to used, "+
		"by namespace, user or label (--namespace limits it to one; \"*\" every namespace)", "", usageAction,
		&ucli.StringFlag{Name: "by", Value: "namespace", Usage: "namespace, user or label:KEY (KEY one of the agents' --usage-labels)"},
		&ucli.StringFlag{Name: "since", Value: "30d", Usage: "start: a duration back from now (30d, 2w, 12h), an RFC 3339 time or a date (YYYY-MM-DD); at most 365d"},
		&ucli.StringFlag{Name: "until", Usage: "end, as --since (default now)"},
		&ucli.StringFlag{Name: "step", Value: "total", Usage: "hour, day or total"},
		JSONFlag,
		&ucli.BoolFlag{Name: "csv", Usage: "print CSV"},
	)
}

func usageAction(c *ucli.Context) error {
	if c.NArg() > 0 {
		return Exitf(2, "%s takes no arguments (got %q)", c.Command.FullName(), c.Args().First())
	}
	if c.Bool("json") && c.Bool("csv") {
		return Exitf(2, "--json and --csv: give one")
	}
	q := api.UsageQuery{Since: c.String("since"), Until: c.String("until"), By: c.String("by"), Step: c.String("step"),
		Namespace: innermost(c, "namespace")}
	return call(c, func(cl *api.Client) (*api.UsageReport, error) { return cl.Usage(c.Context, q) }, func(r *api.UsageReport) error {
		if c.Bool("csv") {
			return httpapi.WriteUsageCSV(Stdout(c), r.Rows)
		}
		return printUsage(c, r)
	})
}

// printUsage is the usage table: hours of CPU, memory and GPU, used next
// to requested.
func printUsage(c *ucli.Context, r *api.UsageReport) error {
	w := Stdout(c)
	if !r.Enabled {
		fmt.Fprintln(w, "usage accounting is not on yet (it starts once every server runs a version with it)")
	}
	header := []string{keyHeader(r.By), "ATTEMPTS", "CPU-H USED", "CPU-H REQ", "USED/REQ", "MEM GIB-H", "MEM GIB-H REQ", "GPU-H", "WALL-H"}
	if r.Step != "total" {
		header = append([]string{"START"}, header...)
	}
	t := NewTable(w, header...)
	const h = 3600
	for _, row := range r.Rows {
		ratio := "-"
		if row.CPURequestedSeconds > 0 {
			ratio = fmt.Sprintf("%.0f%%", 100*row.CPUSeconds/row.CPURequestedSeconds)
		}
		cols := []any{orDash(row.Key), row.Usage.Attempts, hours(row.CPUSeconds / h), hours(row.CPURequestedSeconds / h), ratio,
			hours(row.MemoryGiBSeconds / h), hours(row.MemoryGiBSecondsRequested / h), hours(row.GPUSeconds / h), hours(row.WallSeconds / h)}
		if r.Step != "total" {
			cols = append([]any{row.Start.Local().Format(time.DateTime)}, cols...)
		}
		t.Row(cols...)
	}
	return t.Flush()
}

func keyHeader(by string) string {
	switch by {
	case "namespace":
		return "NAMESPACE"
	case "user":
		return "USER"
	}
	return strings.ToUpper(strings.TrimPrefix(by, "label:"))
}

func hours(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3f", v)
}
