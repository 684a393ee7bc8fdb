package exec

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

func TestLease(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	l := NewLease(clk, 6*time.Second)
	steps := []struct {
		advance time.Duration
		renew   bool
		expired bool
	}{
		{advance: 5 * time.Second, expired: false},
		{advance: 0, renew: true, expired: false},
		{advance: 5900 * time.Millisecond, expired: false},
		{advance: 100 * time.Millisecond, expired: true},
		{advance: 0, renew: true, expired: false},
	}
	for i, s := range steps {
		clk.now = clk.now.Add(s.advance)
		if s.renew {
			l.Renew()
		}
		if got := l.Expired(); got != s.expired {
			t.Errorf("step %d: expired = %v, want %v (remaining %v)", i, got, s.expired, l.Remaining())
		}
	}
}

func TestLogWriterRotatesAndKeepsTail(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.log")
	w, err := newLogWriter(p, 100, 16)
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for i := 0; i < 25; i++ {
		chunk := strings.Repeat(string(rune('a'+i)), 13)
		all.WriteString(chunk)
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	cur, _ := os.ReadFile(p)
	rot, _ := os.ReadFile(p + ".1")
	if len(cur) > 100 || len(rot) != 100 {
		t.Fatalf("sizes: current %d rotated %d", len(cur), len(rot))
	}
	if got := string(rot) + string(cur); !strings.HasSuffix(all.String(), got) {
		t.Errorf("rotated+current is not the suffix of what was written")
	}
	if tail := w.Tail(); tail != all.String()[all.Len()-16:] {
		t.Errorf("tail = %q", tail)
	}
}

func TestLogWriterTailIsValidUTF8(t *testing.T) {
	w, err := newLogWriter(filepath.Join(t.TempDir(), "e.log"), 1<<20, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Write([]byte("ab€cd\xff")) // € is 3 bytes; the tail cut lands inside it
	if got := w.Tail(); got != "cd?" {
		t.Errorf("tail = %q, want %q", got, "cd?")
	}
}

func TestParseSignal(t *testing.T) {
	tests := []struct {
		in   string
		want syscall.Signal
		err  bool
	}{
		{"", syscall.SIGTERM, false},
		{"SIGINT", syscall.SIGINT, false},
		{"hup", syscall.SIGHUP, false},
		{"9", syscall.SIGKILL, false},
		{"SIGNOPE", 0, true},
	}
	for _, tc := range tests {
		got, err := parseSignal(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("parseSignal(%q) = %v, %v", tc.in, got, err)
		}
		if tc.err && !errors.Is(err, ErrBadSignal) {
			t.Errorf("parseSignal(%q) error %v does not wrap ErrBadSignal", tc.in, err)
		}
	}
}

func TestWorkerConfigValidate(t *testing.T) {
	ok := DefaultWorkerConfig()
	ok.Node, ok.DataDir = "n1", "/var/lib/foreman"
	tests := []struct {
		name  string
		edit  func(c *WorkerConfig)
		field string // "" = valid
	}{
		{"default", func(c *WorkerConfig) {}, ""},
		{"no node", func(c *WorkerConfig) { c.Node = "" }, "Node"},
		{"no data dir", func(c *WorkerConfig) { c.DataDir = "" }, "DataDir"},
		{"long data dir", func(c *WorkerConfig) { c.DataDir = "/" + strings.Repeat("d", 80) }, "DataDir"},
		{"renew too slow", func(c *WorkerConfig) { c.RenewInterval = c.LeaseDuration }, "RenewInterval"},
		{"zero lease", func(c *WorkerConfig) { c.LeaseDuration = 0 }, "LeaseDuration"},
		{"tiny log cap", func(c *WorkerConfig) { c.LogMaxBytes = 10 }, "LogMaxBytes"},
		{"saturation off", func(c *WorkerConfig) { c.SaturatedRunQueue = 0 }, ""},
		{"negative saturation", func(c *WorkerConfig) { c.SaturatedRunQueue = -1 }, "SaturatedRunQueue"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v, want ErrInvalidConfig naming %s", err, tc.field)
			}
		})
	}
}

func TestDetect(t *testing.T) {
	usable, unusable := DetectDrivers()
	found := false
	for _, n := range usable {
		found = found || n == ProcessDriverName
	}
	if !found {
		t.Errorf("process driver not usable: %v", unusable)
	}
	res, err := DetectCapacity()
	if err != nil || res.CPU != int64(runtime.NumCPU())*1000-AgentCPUReserve() || res.MemoryMB < 64 {
		t.Errorf("capacity %+v, %v", res, err)
	}
}

func TestJobEnv(t *testing.T) {
	env := jobEnv(Assignment{
		Attempt: fsm.Attempt{JobID: "J", Num: 2, FencingToken: 77},
		Spec: fsm.JobSpec{Env: map[string]string{"B": "2", "A": "1", "FOREMAN_NODE": "fake"},
			SecretEnv: map[string]string{"S": "secret", "FOREMAN_ATTEMPT": "9"}},
	}, "n9")
	got := strings.Join(env, " ")
	want := "A=1 B=2 S=secret PATH=" + defaultPath + " FOREMAN_JOB_ID=J FOREMAN_ATTEMPT=2 FOREMAN_FENCING_TOKEN=77 FOREMAN_NODE=n9"
	if got != want {
		t.Errorf("env\n got %s\nwant %s", got, want)
	}
}

func TestJobEnvGangTask(t *testing.T) {
	env := jobEnv(Assignment{
		Attempt: fsm.Attempt{JobID: "G", Num: 5, FencingToken: 9, Task: &fsm.GangTask{Index: 1, Size: 3, Port: 31001,
			Peers: []string{"10.0.0.1:31000", "10.0.0.2:31001", "10.0.0.3:31000"}}},
		Spec: fsm.JobSpec{Env: map[string]string{"GANG_INDEX": "spoofed"}},
	}, "n2")
	got := strings.Join(env, " ")
	want := "PATH=" + defaultPath + " FOREMAN_JOB_ID=G FOREMAN_ATTEMPT=5 FOREMAN_FENCING_TOKEN=9 FOREMAN_NODE=n2" +
		" GANG_ID=G GANG_SIZE=3 GANG_INDEX=1 GANG_PORT=31001 GANG_PEERS=10.0.0.1:31000,10.0.0.2:31001,10.0.0.3:31000"
	if got != want {
		t.Errorf("env\n got %s\nwant %s", got, want)
	}
}
