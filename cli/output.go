package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// JSONFlag is on every read command.
var JSONFlag = &ucli.BoolFlag{Name: "json", Usage: "print JSON instead of a table"}

// PrintJSON writes v as indented JSON to the command's stdout.
func PrintJSON(c *ucli.Context, v any) error {
	enc := json.NewEncoder(Stdout(c))
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func Stdout(c *ucli.Context) io.Writer {
	if c != nil && c.App != nil && c.App.Writer != nil {
		return c.App.Writer
	}
	return os.Stdout
}

// Table is an aligned text table.
type Table struct{ tw *tabwriter.Writer }

func NewTable(w io.Writer, header ...string) *Table {
	t := &Table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.Row(toAny(header)...)
	return t
}

func (t *Table) Row(cols ...any) {
	for i, c := range cols {
		if i > 0 {
			fmt.Fprint(t.tw, "\t")
		}
		fmt.Fprint(t.tw, c)
	}
	fmt.Fprintln(t.tw)
}

func (t *Table) Flush() error { return t.tw.Flush() }

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// ago renders a past time relative to now ("3m ago"); zero is "-".
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	if d < 0 {
		return "in " + RoundDur(-d)
	}
	return RoundDur(d) + " ago"
}

func RoundDur(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// resources renders a request or capacity ("500m/256MiB gpu=1").
func resources(r fsm.Resources) string {
	s := httpapi.FormatCPU(r.CPU) + " cpu, " + httpapi.FormatMemory(r.MemoryMB)
	for _, k := range slices.Sorted(maps.Keys(r.Named)) {
		s += fmt.Sprintf(", %s=%d", k, r.Named[k])
	}
	if r.GPUMemoryMiB > 0 {
		s += ", gpu memory share " + httpapi.FormatMemory(r.GPUMemoryMiB)
	}
	return s
}

func labels(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// intOr0 is *p, or 0 for nil (a spec's optional number as the server
// fills it).
func intOr0(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func exitCode(p *int) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

// truncate shortens s to n runes with an ellipsis.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
