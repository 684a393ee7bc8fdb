package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/foreman-sched/foreman/fsm"
)

// EventQuery selects what GET /v1/events streams.
type EventQuery struct {
	Topics []string // empty: all
	Job    string
	// After resumes after this event ID ("INDEX-SEQ", or "INDEX" for
	// after every event of that raft index). Empty: from now.
	After string
	// Opened, if set, is called once the server has answered: events from
	// then on will be delivered (a read made after it misses nothing).
	Opened func()
}

// StreamEvents follows GET /v1/events and calls fn for each event (a
// reset arrives as an Event of Type fsm.EventReset: the caller missed
// events and should re-list, then carry on). It returns when ctx ends
// (nil), fn returns an error (that error), or the stream breaks.
func (c *Client) StreamEvents(ctx context.Context, q EventQuery, fn func(fsm.Event) error) error {
	body, err := c.OpenEventStream(ctx, q)
	if err != nil {
		return err
	}
	defer body.Close()
	if q.Opened != nil {
		q.Opened()
	}
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
			var e fsm.Event
			if err := json.Unmarshal(data, &e); err != nil {
				return fmt.Errorf("event stream: bad event %q: %w", data, err)
			}
			data = data[:0]
			if err := fn(e); err != nil {
				return err
			}
		case line[0] == ':':
			// comment (heartbeat)
		default:
			if v, ok := strings.CutPrefix(string(line), "data: "); ok {
				data = append(data, v...)
			}
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("event stream from %s: %w", c.host, err)
	}
	return fmt.Errorf("event stream from %s: closed by the server", c.host)
}

// OpenEventStream opens GET /v1/events for q (q.Opened is not called)
// and returns the raw text/event-stream body, for a caller that counts or
// forwards events without decoding them (foreman bench events). The
// caller closes it.
func (c *Client) OpenEventStream(ctx context.Context, q EventQuery) (io.ReadCloser, error) {
	query := url.Values{}
	if len(q.Topics) > 0 {
		query.Set("topic", strings.Join(q.Topics, ","))
	}
	if q.Job != "" {
		query.Set("job", q.Job)
	}
	hdr := http.Header{"Accept": {"text/event-stream"}}
	if q.After != "" {
		hdr.Set(HeaderLastEventID, q.After)
	}
	resp, err := c.send(ctx, http.MethodGet, "/v1/events", query, nil, hdr)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// JobEvents returns a job's timeline.
func (c *Client) JobEvents(ctx context.Context, id string) ([]fsm.Event, error) {
	var out JobTimeline
	if _, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/events", nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return out.Events, nil
}

// WaitJob returns the job once it reaches a terminal state, following the
// event stream of the node c talks to (no polling): it opens the stream
// for the job, then reads the job once, so a transition is either in that
// read or on the stream. onEvent, if set, sees each of the job's events.
// A reset (the stream lost its place) re-reads the job. Errors: ctx's, or
// the stream's (the caller may fall back to polling).
func (c *Client) WaitJob(ctx context.Context, id string, onEvent func(fsm.Event)) (*JobDetail, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opened := make(chan struct{})
	terminal := make(chan struct{}, 1)
	errc := make(chan error, 1)
	signal := func() {
		select {
		case terminal <- struct{}{}:
		default:
		}
	}
	go func() {
		errc <- c.StreamEvents(ctx, EventQuery{Job: id, Opened: func() { close(opened) }}, func(e fsm.Event) error {
			if onEvent != nil && e.Type != fsm.EventReset {
				onEvent(e)
			}
			if e.Type == fsm.EventReset || e.Type == fsm.EventJob && fsm.JobState(e.State).Terminal() {
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
		case <-terminal:
			d, err := c.GetJob(ctx, id, false)
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
