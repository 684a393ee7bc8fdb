package cli

import (
	"fmt"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/httpapi"
)

func submitCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "submit",
		Usage:     "submit a job and print its ID",
		ArgsUsage: "[flags] -- CMD [ARGS...]",
		Description: "Submits one job (or, with -f, a spec file that may hold a batch {\"jobs\": [...]}).\n" +
			"A single quoted argument with shell syntax runs under /bin/sh -c.",
		Flags:  WithClientFlags(append(specFlags(), JSONFlag)...),
		Action: func(c *ucli.Context) error { return Error(submit(c)) },
	}
}

func submit(c *ucli.Context) error {
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	var base *httpapi.JobSpecInput
	if f := c.String("file"); f != "" {
		specs, batch, err := readSpecFile(f)
		if err != nil {
			return err
		}
		if !batch {
			base = &specs[0]
		} else {
			if c.NArg() > 0 {
				return fmt.Errorf("a batch file takes no command arguments")
			}
			res, err := cl.SubmitJobs(c.Context, specs)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return PrintJSON(c, map[string]any{"jobs": res})
			}
			for _, r := range res {
				fmt.Fprintln(Stdout(c), r.ID)
			}
			return nil
		}
	}
	spec, key, err := specFromFlags(c, time.Now(), base)
	if err != nil {
		return err
	}
	id, dup, err := cl.SubmitJob(c.Context, spec, key)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return PrintJSON(c, map[string]any{"id": id, "duplicate": dup})
	}
	fmt.Fprintln(Stdout(c), id)
	if dup {
		Stderrf("idempotency key %q already names job %s; not submitted again", key, id)
	}
	return nil
}
