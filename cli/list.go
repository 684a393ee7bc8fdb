package cli

import (
	"fmt"
	"net/http"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
)

// The shapes every client command shares: one call whose answer is
// printed as JSON (--json) or as text, a change to one object named by
// the arguments, and a list printed as {"<key>": [...]} or as a table.

// withClient builds the command's client and makes one call with it.
func withClient[T any](c *ucli.Context, do func(*api.Client) (T, error)) (T, error) {
	cl, err := newClient(c)
	if err != nil {
		var zero T
		return zero, err
	}
	return do(cl)
}

// call builds the command's client, makes one API call and prints its
// answer: as JSON with --json, else as text writes it.
func call[T any](c *ucli.Context, do func(*api.Client) (T, error), text func(T) error) error {
	v, err := withClient(c, do)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return PrintJSON(c, v)
	}
	return text(v)
}

// list is a list command's action: one call for the items, printed by
// printList.
func list[T any](c *ucli.Context, key string, get func(*api.Client) ([]T, error), header []string, row func(T) []any) error {
	items, err := withClient(c, get)
	if err != nil {
		return err
	}
	return printList(c, key, items, header, row)
}

// post is call for a POST of body to path (the server checks the body
// and fills its defaults), answered as a T printed by text.
func post[T any](c *ucli.Context, path string, body any, text func(*T) error) error {
	return call(c, func(cl *api.Client) (*T, error) {
		var v T
		return &v, cl.Do(c.Context, api.Request{Method: http.MethodPost, Path: path, Body: body}, &v)
	}, text)
}

// act is a command whose call answers nothing worth printing: do makes
// the call and returns the line to print.
func act(c *ucli.Context, do func(*api.Client) (string, error)) error {
	line, err := withClient(c, do)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(Stdout(c), line)
	return err
}

// readClient is newClient for a read that goes through the leader with
// --consistent (ConsistentFlag).
func readClient(c *ucli.Context) (*api.Client, error) {
	cl, err := newClient(c)
	if err == nil && c.Bool("consistent") {
		cl = cl.Consistent()
	}
	return cl, err
}

// argClient is the one argument a command takes (what names it, for the
// usage error) and the client newCl builds for it (newClient, readClient,
// snapshotClient).
func argClient(c *ucli.Context, what string, newCl func(*ucli.Context) (*api.Client, error)) (string, *api.Client, error) {
	arg, err := oneArg(c, what)
	if err != nil {
		return "", nil, err
	}
	cl, err := newCl(c)
	return arg, cl, err
}

// change is call for a command that acts on the one object its argument
// names (what says what the argument is, for the usage error): the
// answer is printed as JSON with --json, else as the line say makes.
func change[T any](c *ucli.Context, what string, do func(*api.Client, string) (T, error), say func(T) (string, error)) error {
	name, err := oneArg(c, what)
	if err != nil {
		return err
	}
	return call(c, func(cl *api.Client) (T, error) { return do(cl, name) }, func(v T) error {
		line, err := say(v)
		if err == nil {
			fmt.Fprintln(Stdout(c), line)
		}
		return err
	})
}

// show is a command that reads the one object its argument names: the
// answer is printed as JSON with --json, else by text, written on the
// server's type S the answer is read back as (AsServer).
func show[T, S any](c *ucli.Context, what string, get func(*api.Client, string) (T, error), text func(*S) error) error {
	name, err := oneArg(c, what)
	if err != nil {
		return err
	}
	return call(c, func(cl *api.Client) (T, error) { return get(cl, name) }, func(reply T) error {
		v, err := AsServer[S](reply, nil)
		if err != nil {
			return err
		}
		return text(v)
	})
}

// printList is a list command's output: the items as {"<key>": items}
// with --json, else a table under header with one row per item.
func printList[T any](c *ucli.Context, key string, items []T, header []string, row func(T) []any) error {
	if c.Bool("json") {
		return PrintJSON(c, map[string]any{key: items})
	}
	t := NewTable(Stdout(c), header...)
	for _, it := range items {
		t.Row(row(it)...)
	}
	return t.Flush()
}

// printPages is a list command over a cursor-paged listing: page's pages
// (read as pages reads them, up to --limit items) printed by printList,
// with row given the time they were read, for the "ago" columns.
func printPages[T any](c *ucli.Context, key string, page func(n int, cursor string) ([]T, string, error), header []string, row func(it T, now time.Time) []any) error {
	items, err := pages(c.Int("limit"), page)
	if err != nil {
		return err
	}
	now := time.Now()
	return printList(c, key, items, header, func(it T) []any { return row(it, now) })
}

// pages reads a cursor-paged listing: page answers one page of at most n
// items (n 0: the server's default) after cursor, and the next cursor
// ("" after the last page). It stops after limit items (0: all), asking
// for at most 1,000 at a time.
func pages[T any](limit int, page func(n int, cursor string) ([]T, string, error)) ([]T, error) {
	var all []T
	cursor := ""
	for {
		n := 0
		if limit > 0 {
			n = min(limit-len(all), 1000)
		}
		items, next, err := page(n, cursor)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == "" || (limit > 0 && len(all) >= limit) {
			return all, nil
		}
		cursor = next
	}
}
