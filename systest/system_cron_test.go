package systest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/httpapi"
)

// A schedule on real agents fires jobs that run with FOREMAN_SCHEDULE and
// FOREMAN_SCHEDULED_TIME, once per tick, and its status shows the fires
// with their outcomes; pause stops the fires.
func TestSystemSchedule(t *testing.T) {
	c := newSysCluster(t, 3)
	leader := c.leader()
	d := newJobDir(t, c.root)
	follower := c.others(leader)[0]
	var created httpapi.ScheduleInfo
	// Through a follower: the write is proxied to the leader.
	err := postJSON(follower.url("/v1/schedules"), map[string]any{
		"name": "tick", "cron": "@every 1s", "catch_up": "all",
		"job": map[string]any{
			"command": []string{"/bin/sh", "-c", `echo "$FOREMAN_SCHEDULE $FOREMAN_SCHEDULED_TIME" > "$SYSDIR/fire-$FOREMAN_SCHEDULED_TIME"`},
			"env":     map[string]string{"SYSDIR": string(d), "PATH": "/usr/local/bin:/usr/bin:/bin"},
			"driver":  "process",
		},
	}, &created)
	if err != nil {
		t.Fatal(err)
	}
	var info httpapi.ScheduleInfo
	eventually(t, systemTimeout, "three fires succeeded", func() error {
		if err := getJSON(leader.url("/v1/schedules/tick"), &info); err != nil {
			return err
		}
		ok := 0
		for _, f := range info.Fires {
			if f.Outcome == "succeeded" {
				ok++
			}
		}
		if ok < 3 {
			return fmt.Errorf("%d of %d fires succeeded", ok, len(info.Fires))
		}
		return nil
	})
	if err := postJSON(leader.url("/v1/schedules/tick/pause"), nil, &info); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(string(d), "fire-*"))
	if len(files) < 3 {
		t.Fatalf("%d jobs wrote their file", len(files))
	}
	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tick := strings.TrimPrefix(filepath.Base(f), "fire-")
		if got := strings.TrimSpace(string(b)); got != "tick "+tick {
			t.Errorf("%s: job saw %q, want %q", f, got, "tick "+tick)
		}
		at, err := time.Parse(time.RFC3339Nano, tick)
		if err != nil || at.Before(created.CreatedAt) || seen[tick] {
			t.Errorf("tick %q: %v (created %v, seen before %v)", tick, err, created.CreatedAt, seen[tick])
		}
		seen[tick] = true
	}
	for _, f := range info.Fires {
		if f.JobID == "" || f.At.Before(f.Tick) {
			t.Errorf("fire %+v: no job, or fired before its tick", f)
		}
	}
	t.Logf("%d fires; first fire %+v", len(info.Fires), info.Fires[0])
}
