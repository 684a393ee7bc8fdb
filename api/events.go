package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// EventQuery selects what the event stream carries.
type EventQuery struct {
	Topics []string // TopicJob, TopicNode, ...; empty: all
	Job    string   // only this job's events
	// After resumes after this event ID ("INDEX-SEQ", or a reset's bare
	// "INDEX"; "0": from the oldest event the node holds). Empty: from
	// now; a stream that breaks before its first event then reconnects
	// from the new now (the server names no position before an event).
	After string
	// Opened, if set, is called once the server has answered (the first
	// connection): events from then on will be delivered, so a read made
	// after it misses nothing.
	Opened func()
}

// Events follows the event stream (GET /v1/events) from q.After. When the
// connection breaks it reconnects with the last ID it delivered, so no
// event is lost or repeated; a reset (Event.IsReset) says the server
// could not resume there: re-read what you cache, then carry on.
//
// The sequence ends when ctx ends (no error), when the loop stops, or
// with an error: one the server answered that a retry cannot mend (a
// 4xx), or Config.MaxRetries reconnects in a row that failed.
func (c *Client) Events(ctx context.Context, q EventQuery) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		errStop := errors.New("stopped")
		err := c.followEvents(ctx, q, func(e Event) error {
			if !yield(e, nil) {
				return errStop
			}
			return nil
		})
		if err != nil && err != errStop && ctx.Err() == nil {
			yield(Event{}, err)
		}
	}
}

// followEvents runs the stream, reconnecting from the last ID, until ctx
// ends (nil), fn fails (its error) or reconnecting fails (that error).
func (c *Client) followEvents(ctx context.Context, q EventQuery, fn func(Event) error) error {
	opened := q.Opened
	failures := 0
	for {
		body, err := c.openEvents(ctx, q)
		if err == nil {
			failures = 0
			if opened != nil {
				opened()
				opened = nil
			}
			err = readEvents(body, func(e Event) error {
				q.After = e.ID
				return fn(e)
			})
			body.Close()
			var fe fnError
			if errors.As(err, &fe) {
				return fe.err
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		var ae *Error
		if errors.As(err, &ae) && ae.Status/100 == 4 && ae.Status != http.StatusTooManyRequests {
			return err
		}
		if failures >= c.retries {
			return fmt.Errorf("event stream from %s: %w", c.base.Host, err)
		}
		wait := backoff(failures)
		if errors.As(err, &ae) && ae.RetryAfter > 0 {
			wait = min(ae.RetryAfter, c.maxWait)
		}
		failures++
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// StreamEvents is the event stream over one connection, for a caller
// that handles a break itself (a command line that reports it, a poller
// that falls back): it calls fn for each event (a reset included) and
// returns when ctx ends (nil), fn fails (its error), or the stream
// breaks (an error saying so). Events is the same stream resumed across
// breaks.
func (c *Client) StreamEvents(ctx context.Context, q EventQuery, fn func(Event) error) error {
	resp, err := c.send(ctx, eventsRequest(q))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if q.Opened != nil {
		q.Opened()
	}
	err = readEvents(resp.Body, fn)
	var fe fnError
	if errors.As(err, &fe) {
		return fe.err
	}
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("event stream from %s: %w", c.base.Host, err)
}

// OpenEvents opens the event stream for q (q.Opened is not called) and
// returns its text/event-stream body unread, for a caller that counts or
// forwards events without decoding them; the caller closes it.
func (c *Client) OpenEvents(ctx context.Context, q EventQuery) (io.ReadCloser, error) {
	resp, err := c.send(ctx, eventsRequest(q))
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// fnError carries the callback's own error out of readEvents.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

// openEvents sends one GET /v1/events (no retries: followEvents does
// them, with the ID it has reached).
func (c *Client) openEvents(ctx context.Context, q EventQuery) (io.ReadCloser, error) {
	r := eventsRequest(q)
	target, err := c.target(r)
	if err != nil {
		return nil, err
	}
	resp, err := c.sendOnce(ctx, r, target, nil, "", "go-"+randomHex(10))
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// eventsRequest is the GET /v1/events of q.
func eventsRequest(q EventQuery) Request {
	v := url.Values{}
	if len(q.Topics) > 0 {
		v.Set("topic", strings.Join(q.Topics, ","))
	}
	if q.Job != "" {
		v.Set("job", q.Job)
	}
	hdr := http.Header{"Accept": {"text/event-stream"}}
	if q.After != "" {
		hdr.Set(headerLastEventID, q.After)
	}
	return Request{Method: http.MethodGet, Path: "/v1/events", Query: v, Header: hdr}
}

// readEvents decodes text/event-stream messages until the body ends
// (an error saying so) or fn fails (an fnError).
func readEvents(body io.Reader, fn func(Event) error) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if len(data) == 0 {
				continue
			}
			var e Event
			if err := json.Unmarshal(data, &e); err != nil {
				return fmt.Errorf("bad event %q: %w", data, err)
			}
			data = data[:0]
			if err := fn(e); err != nil {
				return fnError{err}
			}
		case line[0] == ':': // a comment: the keep-alive
		default:
			if v, ok := strings.CutPrefix(string(line), "data:"); ok {
				data = append(data, strings.TrimPrefix(v, " ")...)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("closed by the server")
}

// WaitJob returns the job once it is terminal (a retry of it later is not
// waited for). It follows the job's events rather than polling: it opens
// the stream, then reads the job, so a transition is in that read or on
// the stream. onEvent, if set, sees each of the job's events.
func (c *Client) WaitJob(ctx context.Context, id string, onEvent func(Event)) (*JobDetail, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opened := make(chan struct{})
	check := make(chan struct{}, 1)
	errc := make(chan error, 1)
	signal := func() {
		select {
		case check <- struct{}{}:
		default:
		}
	}
	go func() {
		errc <- c.followEvents(ctx, EventQuery{Job: id, Opened: func() { close(opened) }}, func(e Event) error {
			if onEvent != nil && !e.IsReset() {
				onEvent(e)
			}
			if e.IsReset() || strings.HasPrefix(e.Type, "job.") && JobState(e.State).Terminal() {
				signal()
			}
			return nil
		})
	}()
	select {
	case <-opened:
	case err := <-errc:
		if err == nil {
			err = ctx.Err()
		}
		return nil, err
	}
	signal() // the first read
	for {
		select {
		case <-check:
			d, err := c.GetJob(ctx, id)
			if err != nil {
				return nil, err
			}
			if d.Job.State.Terminal() {
				return d, nil
			}
		case err := <-errc:
			if err == nil {
				err = ctx.Err()
			}
			return nil, err
		}
	}
}
