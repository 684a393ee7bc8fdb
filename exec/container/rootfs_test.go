package container

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestHostIndexSkipsRebuildInNewProcess: a driver with an empty in-memory
// cache (a freshly started supervisor) takes the skeleton recorded under
// the current inputs' fingerprint; a stale or malformed record is ignored.
func TestHostIndexSkipsRebuildInNewProcess(t *testing.T) {
	root := t.TempDir()
	d1 := &Driver{}
	hr, err := d1.hostRootfsFor(root)
	if err != nil {
		t.Fatal(err)
	}
	fp := hostInputsFingerprint()
	idx := hostIndexPath(root, fp)
	if _, err := os.Stat(idx); err != nil {
		t.Fatalf("no index after a build: %v", err)
	}
	got, err := (&Driver{}).hostRootfsFor(root)
	if err != nil {
		t.Fatal(err)
	}
	if got.dir != hr.dir || !slices.Equal(got.binds, hr.binds) {
		t.Fatalf("second driver got %+v, first %+v", got, hr)
	}

	// The index is what a new driver trusts: point it at another complete
	// skeleton and that one is used (so the lookup really skipped the build).
	other := filepath.Join(root, "hostroot-other")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(other, ".complete"), nil, 0o644)
	os.WriteFile(idx, []byte("hostroot-other\n/usr\n"), 0o644)
	got, err = (&Driver{}).hostRootfsFor(root)
	if err != nil {
		t.Fatal(err)
	}
	if got.dir != other || !slices.Equal(got.binds, []string{"/usr"}) {
		t.Fatalf("index not used: %+v", got)
	}

	// Stale (skeleton gone) or malformed records are rebuilt from the inputs.
	for _, bad := range []string{"hostroot-gone\n", "../etc\n", "hostroot-other\nrelative\n"} {
		os.WriteFile(idx, []byte(bad), 0o644)
		got, err = (&Driver{}).hostRootfsFor(root)
		if err != nil {
			t.Fatal(err)
		}
		if got.dir != hr.dir || !slices.Equal(got.binds, hr.binds) {
			t.Fatalf("index %q: got %+v, want the rebuilt %+v", bad, got, hr)
		}
	}
}
