package bench

import (
	"fmt"
	"io"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/cli"
)

// Every bench prints its outcome once, at the end, on stdout: the result
// struct as JSON with --json (benchCommand gives each bench the flag),
// else as text, usually one table. Progress goes to stderr meanwhile.

// printResult prints res as JSON with --json, else what text writes.
func printResult(c *ucli.Context, res any, text func(w io.Writer) error) error {
	if c.Bool("json") {
		return cli.PrintJSON(c, res)
	}
	return text(cli.Stdout(c))
}

// printTable prints res as JSON with --json, else as a table of header
// and rows.
func printTable(c *ucli.Context, res any, header []string, rows ...[]any) error {
	return printResult(c, res, func(w io.Writer) error { return writeTable(w, header, rows...) })
}

// printLine prints res as JSON with --json, else as one line of format.
func printLine(c *ucli.Context, res any, format string, args ...any) error {
	return printResult(c, res, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, format+"\n", args...)
		return err
	})
}

// writeTable writes a table of header and rows to w.
func writeTable(w io.Writer, header []string, rows ...[]any) error {
	t := cli.NewTable(w, header...)
	for _, r := range rows {
		t.Row(r...)
	}
	return t.Flush()
}

// ms is a time in milliseconds as the tables show it.
func ms(f float64) string { return fmt.Sprintf("%.1fms", f) }
