//go:build jepsenclock

package wallclock

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestReloadShiftsWallOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clock")
	if err := os.WriteFile(path, []byte("3 -90000000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { offset.Store(0) })
	line, err := reload(path)
	if err != nil || line != "3 -90000000000" {
		t.Fatalf("reload: %q %v", line, err)
	}
	real := time.Now()
	n := Now()
	if skew := n.Round(0).Sub(real.Round(0)); skew > -89*time.Second || skew < -91*time.Second {
		t.Fatalf("wall skew %v, want about -90s", skew)
	}
	if d := n.Sub(real); d < 0 || d > time.Second {
		t.Fatalf("monotonic difference %v, want a few µs", d)
	}
	if err := writeAck(path, line); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path + ".ack"); string(b) != line+"\n" {
		t.Fatalf("ack %q", b)
	}
	if err := os.WriteFile(path, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := reload(path); err == nil {
		t.Fatal("a malformed offset file must be refused")
	}
}
