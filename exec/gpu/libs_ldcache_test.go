package gpu

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestParseLDCacheHost reads this host's /etc/ld.so.cache and compares it
// with what `ldconfig -p` (glibc's own reader) prints.
func TestParseLDCacheHost(t *testing.T) {
	b, err := os.ReadFile("/etc/ld.so.cache")
	if err != nil {
		t.Skipf("no /etc/ld.so.cache here: %v", err)
	}
	out, err := exec.Command("ldconfig", "-p").Output()
	if err != nil {
		out, err = exec.Command("/sbin/ldconfig", "-p").Output()
	}
	if err != nil {
		t.Skipf("no ldconfig here: %v", err)
	}
	var want []string
	for _, line := range strings.Split(string(out), "\n")[1:] {
		// "\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1"
		name, rest, ok := strings.Cut(strings.TrimSpace(line), " (")
		_, path, ok2 := strings.Cut(rest, ") => ")
		if ok && ok2 {
			want = append(want, name+" "+path)
		}
	}
	entries, err := ParseLDCache(b)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name+" "+e.Path)
	}
	slices.Sort(got)
	slices.Sort(want)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("parsed %d entries, ldconfig -p lists %d; first difference around %v", len(got), len(want), firstDiff(got, want))
	}
}

// TestEncodeLDCacheRoundTrip: an encoded cache is what ldconfig -p reads
// back, in the loader's order.
func TestEncodeLDCacheRoundTrip(t *testing.T) {
	in := []LDEntry{
		{Name: "libfoo.so.9", Path: "/a/libfoo.so.9", Flags: 0x0303},
		{Name: "libcuda.so.1", Path: "/usr/local/nvidia/lib64/libcuda.so.1", Flags: 0x0303},
		{Name: "libfoo.so.10", Path: "/a/libfoo.so.10", Flags: 0x0303},
		{Name: "libcuda.so", Path: "/usr/local/nvidia/lib64/libcuda.so", Flags: 0x0303},
		{Name: "libhw.so.1", Path: "/a/glibc-hwcaps/x86-64-v3/libhw.so.1", Flags: 0x0303, HWCap: hwcapExtension | 1},
	}
	b := EncodeLDCache(in)
	got, err := ParseLDCache(b)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range got {
		names = append(names, e.Name)
	}
	// ldconfig's order: descending by _dl_cache_libcmp (numbers as numbers).
	want := []string{"libfoo.so.10", "libfoo.so.9", "libcuda.so.1", "libcuda.so"}
	if !slices.Equal(names, want) {
		t.Errorf("order %v, want %v", names, want)
	}
	f := t.TempDir() + "/ld.so.cache"
	os.WriteFile(f, b, 0o644)
	out, err := exec.Command("ldconfig", "-p", "-C", f).CombinedOutput()
	if err != nil {
		t.Skipf("no ldconfig to read it back: %v %s", err, out)
	}
	if !strings.Contains(string(out), "4 libs found") || !strings.Contains(string(out), "libcuda.so.1 (libc6,x86-64) => /usr/local/nvidia/lib64/libcuda.so.1") {
		t.Errorf("ldconfig -p reads back:\n%s", out)
	}
}

func TestLibcmp(t *testing.T) {
	for _, c := range []struct {
		a, b string
		sign int
	}{
		{"libfoo.so.10", "libfoo.so.9", 1}, {"libfoo.so.1", "libfoo.so.1", 0}, {"libfoo.so", "libfoo.so.1", -1},
		{"liba.so", "libb.so", -1}, {"lib1", "liba", 1}, {"liba", "lib1", -1},
	} {
		if got := libcmp(c.a, c.b); sign(got) != c.sign {
			t.Errorf("libcmp(%q, %q) = %d, want sign %d", c.a, c.b, got, c.sign)
		}
	}
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

func firstDiff(a, b []string) []string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return []string{a[i], b[i]}
		}
	}
	return nil
}

func FuzzParseLDCache(f *testing.F) {
	f.Add(EncodeLDCache([]LDEntry{{Name: "libcuda.so.1", Path: "/x/libcuda.so.1", Flags: 0x0303}}))
	f.Add([]byte(ldcacheMagic + "\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := ParseLDCache(b)
		if err != nil {
			return
		}
		if _, err := ParseLDCache(EncodeLDCache(es)); err != nil {
			t.Fatalf("re-encoded cache does not parse: %v", err)
		}
	})
}
