package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// Exit codes of foreman run for jobs that did not exit on their own.
const (
	exitTimeout   = 124 // as timeout(1)
	exitOOM       = 137 // as a SIGKILLed process
	exitCancelled = 130 // as a SIGINTed process
	exitOther     = 1
)

func runCommand() *ucli.Command {
	cmd := ClientCommand("run", "submit a job, stream its output and exit with its exit code", "[flags] -- CMD [ARGS...]", runJob,
		append(specFlags(), &ucli.BoolFlag{Name: "detach", Aliases: []string{"d"}, Usage: "print the job ID and return at once"})...)
	cmd.Description = "Streams the job's stdout to stdout and its stderr to stderr, attempt after attempt,\n" +
		"until the job ends. Exits with the job's exit code; a job killed for a timeout exits 124,\n" +
		"for memory (oom) 137, when cancelled 130. Ctrl-C cancels the job. Unlike submit, run makes\n" +
		"one attempt unless --max-attempts says otherwise."
	return cmd
}

func runJob(c *ucli.Context) error {
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	base, err := singleSpec(c)
	if err != nil {
		return err
	}
	spec, key, err := specFromFlags(c, time.Now(), base)
	if err != nil {
		return err
	}
	if spec.Array != nil {
		return Exitf(2, "run follows one job's output: submit an array with foreman submit --array, then foreman job status ID")
	}
	if spec.MaxAttempts == nil {
		// Interactive runs behave like running the command by hand: one
		// attempt, its exit code, unless retries are asked for.
		one := 1
		spec.MaxAttempts = &one
	}
	res, err := SubmitJob(c.Context, cl, spec, key)
	if err != nil {
		return err
	}
	id := res.ID
	if c.Bool("detach") {
		fmt.Fprintln(Stdout(c), id)
		return nil
	}
	Stderrf("job %s submitted", id)

	w := &runWatcher{cl: cl, id: id, stdout: Stdout(c), stderr: os.Stderr, poll: 5 * time.Millisecond}
	followCtx, stopFollow := context.WithCancel(c.Context)
	defer stopFollow()
	w.follow(followCtx)
	sigCtx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	d, err := w.watch(sigCtx)
	interrupted := sigCtx.Err() != nil && c.Context.Err() == nil // read before stop() cancels sigCtx
	stop()
	if interrupted {
		// Ctrl-C: cancel the job, then wait for it to end; a second Ctrl-C
		// stops waiting.
		Stderrf("cancelling job %s (Ctrl-C again to stop waiting)", id)
		cctx, cancel := context.WithTimeout(c.Context, 15*time.Second)
		_, err := cl.CancelJob(cctx, id, "cancelled from foreman run")
		cancel()
		if err != nil {
			return fmt.Errorf("cancelling job %s: %w", id, err)
		}
		waitCtx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
		defer stop()
		d, err = w.waitFor(waitCtx, func(d *httpapi.JobDetail) bool { return d.Job.State.Terminal() })
		if waitCtx.Err() != nil {
			return Exitf(exitCancelled, "stopped waiting; job %s is being cancelled", id)
		}
		if err != nil {
			return err
		}
		return jobOutcome(d)
	}
	if err != nil {
		return err
	}
	return jobOutcome(d)
}

// jobOutcome turns a terminal job into run's exit: nil for success, the
// job's exit code for a plain failure (nothing printed: the job's own
// stderr said why), and a one-line reason for everything else.
func jobOutcome(d *httpapi.JobDetail) error {
	j := d.Job
	if j.State == fsm.JobSucceeded {
		return nil
	}
	var last *fsm.Attempt
	if len(d.Attempts) > 0 {
		last = &d.Attempts[len(d.Attempts)-1]
	}
	if last != nil && last.State == fsm.AttemptKilled {
		code := exitOther
		switch last.Reason {
		case fsm.ReasonTimeout:
			code = exitTimeout
		case fsm.ReasonOOM:
			code = exitOOM
		case fsm.ReasonCancelled:
			code = exitCancelled
		}
		return Exitf(code, "job %s %s: attempt %d killed (%s)", j.ID, j.State, last.Num, orDash(last.Reason))
	}
	if j.State == fsm.JobCancelled {
		return Exitf(exitCancelled, "job %s cancelled%s", j.ID, reasonSuffix(j.Reason))
	}
	if last != nil && last.State == fsm.AttemptFailed && last.ExitCode != nil && *last.ExitCode != 0 {
		return silentExit(*last.ExitCode)
	}
	why := j.Reason
	if why == "" && last != nil {
		why = fmt.Sprintf("attempt %d %s%s", last.Num, last.State, reasonSuffix(last.Reason))
	}
	return Exitf(exitOther, "job %s %s%s", j.ID, j.State, reasonSuffix(why))
}

func reasonSuffix(r string) string {
	if r == "" {
		return ""
	}
	return ": " + r
}

// runWatcher follows one job: its attempts' logs, then its end.
type runWatcher struct {
	cl             *api.Client
	id             string
	stdout, stderr io.Writer
	poll           time.Duration // first poll interval; it backs off to 1s

	// The job's events (GET /v1/events?job=ID) wake the waits at once;
	// the polls stay as a safety net (an agent without the stream, a
	// broken stream), so they back off quickly then.
	mu      sync.Mutex
	changed chan struct{} // closed (and replaced) by each event of the job
}

// follow opens the job's event stream and waits (briefly) until it is
// open, so that no change after the next read is missed.
func (w *runWatcher) follow(ctx context.Context) {
	w.changed = make(chan struct{})
	opened := make(chan struct{})
	go func() {
		_ = w.cl.StreamEvents(ctx, api.EventQuery{Job: w.id, Opened: func() { close(opened) }}, func(api.Event) error {
			w.mu.Lock()
			close(w.changed)
			w.changed = make(chan struct{})
			w.mu.Unlock()
			return nil
		})
	}()
	select {
	case <-opened:
	case <-ctx.Done():
	case <-time.After(time.Second): // polling alone then
	}
}

// sleep waits for d, an event of the job, or ctx.
func (w *runWatcher) sleep(ctx context.Context, d time.Duration) {
	w.mu.Lock()
	ch := w.changed
	w.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-ch:
	case <-time.After(d):
	}
}

// watch streams every attempt's output until the job is terminal.
func (w *runWatcher) watch(ctx context.Context) (*httpapi.JobDetail, error) {
	for n := 1; ; n++ {
		d, err := w.waitFor(ctx, func(d *httpapi.JobDetail) bool {
			return d.Job.Attempts >= n || d.Job.State.Terminal()
		})
		if err != nil {
			return nil, err
		}
		if d.Job.Attempts < n {
			return d, nil // ended without another attempt
		}
		w.streamAttempt(ctx, n)
		d, err = w.waitFor(ctx, func(d *httpapi.JobDetail) bool {
			return len(d.Attempts) >= n && !d.Attempts[n-1].State.Live()
		})
		if err != nil {
			return nil, err
		}
		if d.Job.State.Terminal() && d.Job.Attempts == n {
			return d, nil
		}
		a := d.Attempts[n-1]
		what := string(a.State)
		if a.ExitCode != nil {
			what = fmt.Sprintf("%s (exit %d)", a.State, *a.ExitCode)
		}
		Stderrf("attempt %d on %s %s%s; the job will be retried", n, a.Node, what, reasonSuffix(a.Reason))
	}
}

// streamAttempt copies both streams of attempt n until the attempt ends.
// A log that does not exist yet (the node has not started the attempt) is
// asked for again while the attempt is live.
func (w *runWatcher) streamAttempt(ctx context.Context, n int) {
	var wg sync.WaitGroup
	for _, s := range []struct {
		name string
		out  io.Writer
	}{{"stdout", w.stdout}, {"stderr", w.stderr}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.streamOne(ctx, n, s.name, s.out)
		}()
	}
	wg.Wait()
}

func (w *runWatcher) streamOne(ctx context.Context, n int, stream string, out io.Writer) {
	cw := &countingWriter{w: out}
	wait := w.poll
	for ctx.Err() == nil {
		err := w.cl.Logs(ctx, w.id, api.LogQuery{Stream: stream, Follow: true, Attempt: n}, cw)
		if err == nil || ctx.Err() != nil {
			return
		}
		var ae *api.Error
		retryable := errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status >= 500)
		if !retryable || cw.n > 0 {
			Stderrf("%s of attempt %d: %v", stream, n, err)
			return
		}
		d, gerr := w.get(ctx)
		if gerr == nil && (len(d.Attempts) < n || !d.Attempts[n-1].State.Live()) {
			return // finished without a log we can reach
		}
		w.sleep(ctx, wait)
		wait = min(wait*3/2, time.Second)
	}
}

// waitFor polls the job until done says so, showing why it waits.
func (w *runWatcher) waitFor(ctx context.Context, done func(*httpapi.JobDetail) bool) (*httpapi.JobDetail, error) {
	wait := w.poll
	lastReason := ""
	var failingSince time.Time
	for {
		d, err := w.get(ctx)
		switch {
		case err == nil:
			failingSince = time.Time{}
			if done(d) {
				return d, nil
			}
			if r := d.Job.Reason; r != "" && r != lastReason && !d.Job.State.Terminal() {
				Stderrf("job %s %s: %s", w.id, d.Job.State, r)
				lastReason = r
			}
		case ctx.Err() != nil:
			return nil, ctx.Err()
		default:
			// The agent may be restarting or the cluster electing: keep
			// trying for a while before giving up.
			if failingSince.IsZero() {
				failingSince = time.Now()
			} else if time.Since(failingSince) > time.Minute {
				return nil, fmt.Errorf("following job %s: %w", w.id, err)
			}
		}
		w.sleep(ctx, wait)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		wait = min(wait*3/2, time.Second)
	}
}

// get reads the job, as the server's type (its states' methods decide).
func (w *runWatcher) get(ctx context.Context) (*httpapi.JobDetail, error) {
	return AsServer[httpapi.JobDetail](w.cl.GetJob(ctx, w.id))
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
