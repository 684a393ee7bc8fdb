package bench

import (
	"os"
	"testing"
)

// procCPU reads this process's CPU seconds from /proc, and -1 for no pid.
func TestProcCPU(t *testing.T) {
	if procCPU(0) != -1 {
		t.Errorf("procCPU(0) = %v, want -1", procCPU(0))
	}
	before := procCPU(os.Getpid())
	if before < 0 {
		t.Skipf("no /proc/%d/stat here", os.Getpid())
	}
	x := 0
	for i := range 200_000_000 {
		x ^= i
	}
	if after := procCPU(os.Getpid()); after <= before {
		t.Errorf("procCPU went from %v to %v over a busy loop (%d)", before, after, x)
	}
}
