package agent

import "testing"

// TestBinaryHoldsState: the agent warns when libcontainer's overlayfs seal
// of the binary would fail (its directory and the state root overlap).
func TestBinaryHoldsState(t *testing.T) {
	for _, tc := range []struct {
		exe, stateRoot string
		want           bool
	}{
		{"/opt/foreman/foreman", "/opt/foreman/data/run", true},
		{"/srv/foreman", "/srv/run", true},
		{"/opt/foreman/bin/foreman", "/opt/foreman", true}, // the binary inside the state root
		{"/opt/foreman/bin/foreman", "/opt/foreman/data/run", false},
		{"/usr/local/bin/foreman", "/var/lib/foreman/run", false},
		{"/work/bin/foreman", "/work/binaries/run", false}, // a shared prefix is not a parent
		{"/tmp/ci/bin/foreman", "/tmp/foreman-dev-123/run", false},
	} {
		if got := binaryHoldsState(tc.exe, tc.stateRoot); got != tc.want {
			t.Errorf("binaryHoldsState(%q, %q) = %v, want %v", tc.exe, tc.stateRoot, got, tc.want)
		}
	}
}
