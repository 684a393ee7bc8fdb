package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

func TestLogs(t *testing.T) {
	n1 := newTestAPI(t)
	// n2 is another node over the same replicated state (as a follower
	// would be once caught up), with its own executor's logs.
	n2 := newTestAPIOn(t, n1.f, "n2", false)
	n2.cluster.leaderName, n2.cluster.leaderAddr = n1.cluster.leaderName, n1.cluster.leaderAddr
	n1.addNode("n1", strings.TrimPrefix(n1.srv.URL, "http://"), 4000, 4096)
	n1.addNode("n2", strings.TrimPrefix(n2.srv.URL, "http://"), 4000, 4096)
	n1.addNode("n3", "127.0.0.1:1", 4000, 4096)

	local := n1.submit(`{"command":"true"}`)
	n1.place(local, "n1")
	n1.logs.logs[local+"/1/stdout"] = "local out\n"
	n1.logs.logs[local+"/1/stderr"] = "local err\n"

	remote := n1.submit(`{"command":"true"}`)
	n1.place(remote, "n2")
	n2.logs.logs[remote+"/1/stdout"] = "remote out\n"

	gone := n1.submit(`{"command":"true"}`)
	tok := n1.place(gone, "n3")
	one := 1
	n1.cluster.must(fsm.CmdReport, fsm.ReportAttempt{JobID: gone, Attempt: 1, FencingToken: tok, Node: "n3",
		State: fsm.AttemptFailed, ExitCode: &one, FinishedAt: t0, StderrTail: "boom\n"})
	n1.cluster.must(fsm.CmdNodeState, fsm.SetNodeState{Name: "n3", Gossip: fsm.NodeDead})

	unplaced := n1.submit(`{"command":"true"}`)

	ctx := context.Background()
	tests := []struct {
		name    string
		via     *testAPI
		id      string
		stream  string
		attempt int
		want    string
		code    string
	}{
		{"local stdout", n1, local, "stdout", 0, "local out\n", ""},
		{"local stderr", n1, local, "stderr", 1, "local err\n", ""},
		{"remote via proxy", n1, remote, "stdout", 0, "remote out\n", ""},
		{"remote from the other side", n2, local, "stderr", 0, "local err\n", ""},
		{"dead node stderr tail", n2, gone, "stderr", 0, "boom\n", ""},
		{"dead node stdout", n1, gone, "stdout", 0, "", CodeUnreachable},
		{"no attempt yet", n1, unplaced, "stdout", 0, "", CodeNoAttempt},
		{"unknown attempt", n1, local, "stdout", 7, "", CodeNotFound},
		{"assigned, not started yet", n2, remote, "stderr", 0, "", CodeNoAttempt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := tc.via.client.Logs(ctx, tc.id, api.LogQuery{Stream: tc.stream, Follow: true, Attempt: tc.attempt}, &buf)
			if tc.code != "" {
				var ae *api.Error
				if !errors.As(err, &ae) || ae.Code != tc.code {
					t.Fatalf("err %v, want code %s", err, tc.code)
				}
				return
			}
			if err != nil || buf.String() != tc.want {
				t.Fatalf("got %q, %v; want %q", buf.String(), err, tc.want)
			}
		})
	}
	code, body := n1.do("GET", fmt.Sprintf("/v1/jobs/%s/logs?stream=both", local), "")
	if code != http.StatusBadRequest || !strings.Contains(body, "stream") {
		t.Fatalf("bad stream: %d %s", code, body)
	}
}

// stepLogs writes "first\n", waits for next, then writes "second\n".
type stepLogs struct{ next chan struct{} }

func (l *stepLogs) StreamLog(ctx context.Context, jobID string, attempt int, stream string, follow bool, out io.Writer) error {
	if _, err := io.WriteString(out, "first\n"); err != nil {
		return err
	}
	select {
	case <-l.next:
	case <-ctx.Done():
		return ctx.Err()
	}
	_, err := io.WriteString(out, "second\n")
	return err
}

// TestLogsFlushAsTheyArrive: a follower of a log sees bytes before the
// attempt ends, also through a proxy hop.
func TestLogsFlushAsTheyArrive(t *testing.T) {
	n1 := newTestAPI(t)
	n2 := newTestAPIOn(t, n1.f, "n2", false)
	n1.addNode("n1", strings.TrimPrefix(n1.srv.URL, "http://"), 4000, 4096)
	id := n1.submit(`{"command":"true"}`)
	n1.place(id, "n1")
	steps := &stepLogs{next: make(chan struct{})}
	n1.srv.Config.Handler = New(DefaultConfig(), Deps{Cluster: n1.cluster, State: n1.f, Logs: steps, Clock: fixedClock{t0}})

	for _, via := range []*testAPI{n1, n2} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", via.srv.URL+"/v1/jobs/"+id+"/logs?follow=true", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(resp.Body)
		line, err := r.ReadString('\n')
		if err != nil || line != "first\n" {
			t.Fatalf("via %s: first line %q %v", via.cluster.name, line, err)
		}
		steps.next <- struct{}{} // only now may the rest be written
		rest, err := io.ReadAll(r)
		if err != nil || string(rest) != "second\n" {
			t.Fatalf("via %s: rest %q %v", via.cluster.name, rest, err)
		}
		resp.Body.Close()
		cancel()
	}
}
