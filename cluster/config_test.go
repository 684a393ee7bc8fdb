package cluster

import (
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	valid := func() Config {
		c := DefaultConfig()
		c.DataDir, c.Name = t.TempDir(), "n1"
		return c
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // substring of the error; "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"no data dir", func(c *Config) { c.DataDir = "" }, "DataDir must be set"},
		{"no name", func(c *Config) { c.Name = "" }, "Name must be set"},
		{"bad bind", func(c *Config) { c.BindAddr = "localhost" }, `BindAddr "localhost" must be an IP`},
		{"unspecified advertise", func(c *Config) { c.AdvertiseAddr = "0.0.0.0" }, "AdvertiseAddr \"0.0.0.0\" must not be the unspecified"},
		{"port too high", func(c *Config) { c.Port = 65534 }, "Port 65534 must be in 1..65533"},
		{"bad join", func(c *Config) { c.Join = []string{"h:x"} }, `Join "h:x"`},
		{"voters 2", func(c *Config) { c.Voters = 2 }, "Voters 2 must be 1, 3 or 5"},
		{"dev expect 3", func(c *Config) { c.Dev, c.BootstrapExpect = true, 3 }, "BootstrapExpect must be 0 or 1 with Dev"},
		{"no dead timeout", func(c *Config) { c.DeadServerTimeout = 0 }, "DeadServerTimeout must be positive"},
		{"lease > heartbeat", func(c *Config) { c.Raft.LeaderLeaseTimeout = 2 * c.Raft.HeartbeatTimeout }, "Raft.LeaderLeaseTimeout"},
		{"append entries", func(c *Config) { c.Raft.MaxAppendEntries = 2048 }, "Raft.MaxAppendEntries must be in 1..1024"},
		{"probe timeout", func(c *Config) { c.Gossip.ProbeTimeout = 2 * c.Gossip.ProbeInterval }, "Gossip.ProbeTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.edit(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestJoinAddrAndBootstrapExpect(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"10.0.0.1", "10.0.0.1:7072"},
		{"10.0.0.1:8000", "10.0.0.1:8002"},
		{"node-a", "node-a:7072"},
		{"[::1]:7070", "[::1]:7072"},
	} {
		if got, err := joinAddr(tc.in); err != nil || got != tc.want {
			t.Errorf("joinAddr(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		cfg  Config
		want int
	}{
		{Config{Dev: true}, 1},
		{Config{}, 1},
		{Config{Join: []string{"a"}}, 0},
		{Config{Join: []string{"a"}, BootstrapExpect: 3}, 3},
	} {
		if got := tc.cfg.bootstrapExpect(); got != tc.want {
			t.Errorf("bootstrapExpect(%+v) = %d, want %d", tc.cfg, got, tc.want)
		}
	}
}

func TestMetaFitsAndRefusesOversize(t *testing.T) {
	m := nodeMeta{ClusterID: "01HZX3J5T0Q5Z8Y9W8V7U6T5S4", HTTPAddr: "255.255.255.255:65533", RaftAddr: "255.255.255.255:65534",
		Version: "v1.2.3", CPU: 64000, MemoryMB: 512000, Named: map[string]int64{"gpu": 8},
		Labels: map[string]string{"zone": "eu-west-1a", "rack": "r12"}, Drivers: []string{"container", "process", "http"}, HasState: true,
		Slots: 1024, Applied: 1 << 40, Behind: true}
	b, err := m.encode()
	if err != nil {
		t.Fatalf("typical meta: %v", err)
	}
	back, err := decodeMeta(b)
	if err != nil || back.ClusterID != m.ClusterID || back.Labels["zone"] != "eu-west-1a" ||
		back.Slots != 1024 || back.Applied != 1<<40 || !back.Behind || back.node("n1", "a:1").Slots != 1024 {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	m.Labels["big"] = strings.Repeat("x", 600)
	if _, err := m.encode(); err == nil || !strings.Contains(err.Error(), "too large for gossip") {
		t.Fatalf("oversize meta: %v", err)
	}
}
