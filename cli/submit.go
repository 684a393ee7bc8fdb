package cli

import (
	"context"
	"fmt"
	"net/http"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/httpapi"
)

func submitCommand() *ucli.Command {
	cmd := ClientCommand("submit", "submit a job and print its ID", "[flags] -- CMD [ARGS...]", submit, append(specFlags(), JSONFlag)...)
	cmd.Description = "Submits one job (or, with -f, a spec file that may hold a batch {\"jobs\": [...]}).\n" +
		"A single quoted argument with shell syntax runs under /bin/sh -c."
	return cmd
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
			var res []api.SubmitResponse
			if err := SubmitJobs(c.Context, cl, httpapi.BatchSubmitRequest{Jobs: specs}, &res); err != nil {
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
	res, err := SubmitJob(c.Context, cl, spec, key)
	if err != nil {
		return err
	}
	id, dup := res.ID, res.Duplicate
	if c.Bool("json") {
		return PrintJSON(c, map[string]any{"id": id, "duplicate": dup})
	}
	fmt.Fprintln(Stdout(c), id)
	if dup {
		Stderrf("idempotency key %q already names job %s; not submitted again", key, id)
	}
	return nil
}

// SubmitJob submits one job spec as the flags or the file gave it (an
// httpapi.JobSpecInput, or its JSON; the server fills the defaults and
// checks it, strictly). key, if set, goes
// as the Idempotency-Key; none is made up for a submit the user did not
// key, so it is sent once (api.Client.SubmitJob would key and resend it).
func SubmitJob(ctx context.Context, cl *api.Client, spec any, key string) (*api.SubmitResponse, error) {
	var hdr http.Header
	if key != "" {
		hdr = http.Header{httpapi.HeaderIdempotencyKey: {key}}
	}
	var out api.SubmitResponse
	if err := cl.Do(ctx, api.Request{Method: http.MethodPost, Path: "/v1/jobs", Body: spec, Header: hdr}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SubmitJobs submits a batch ({"jobs": [...]}, a value or its JSON) as
// it is: all its jobs or none. out receives the answers, in its order.
func SubmitJobs(ctx context.Context, cl *api.Client, batch any, out *[]api.SubmitResponse) error {
	var reply struct {
		Jobs []api.SubmitResponse `json:"jobs"`
	}
	if err := cl.Do(ctx, api.Request{Method: http.MethodPost, Path: "/v1/jobs", Body: batch}, &reply); err != nil {
		return err
	}
	*out = reply.Jobs
	return nil
}
