package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
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
}

// StreamEvents follows GET /v1/events and calls fn for each event (a
// reset arrives as an Event of Type fsm.EventReset: the caller missed
// events and should re-list, then carry on). It returns when ctx ends
// (nil), fn returns an error (that error), or the stream breaks.
func (c *Client) StreamEvents(ctx context.Context, q EventQuery, fn func(fsm.Event) error) error {
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
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
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
		return fmt.Errorf("event stream from %s: %w", c.base.Host, err)
	}
	return fmt.Errorf("event stream from %s: closed by the server", c.base.Host)
}

// JobEvents returns a job's timeline.
func (c *Client) JobEvents(ctx context.Context, id string) ([]fsm.Event, error) {
	var out JobTimeline
	if _, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/events", nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return out.Events, nil
}
