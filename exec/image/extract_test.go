package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// testLimits are small extraction limits, so bombs are cheap to build.
var testLimits = extractLimits{maxBytes: 1 << 20, maxEntries: 200}

// tentry is one entry of a hand-built tar; size, when set, is the entry's
// length (zeros) and sparse its length as a sparse file of one byte.
type tentry struct {
	name, body, link string
	typ              byte
	mode             int64
	size, sparse     int64
}

// tarOf builds a tar exactly as given (archive/tar only refuses headers it
// cannot encode; those entries are left out).
func tarOf(entries ...tentry) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	sparse := false
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, Format: tar.FormatPAX}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		var data []byte
		switch {
		case e.sparse > 0:
			// PAX sparse format 1.0: a map with one 1-byte segment at the
			// end, then that byte. archive/tar will not write the
			// GNU.sparse records itself; they are renamed below.
			sparse = true
			m := []byte("1\n" + strconv.FormatInt(e.sparse-1, 10) + "\n1\n")
			data = append(append(m, make([]byte, 512-len(m))...), 'x')
			h.Name = "GNUSparseFile.0/" + e.name
			h.PAXRecords = map[string]string{"GNU:sparse.major": "1", "GNU:sparse.minor": "0", "GNU:sparse.name": e.name,
				"GNU:sparse.realsize": strconv.FormatInt(e.sparse, 10)}
		case e.size > 0:
			data = make([]byte, e.size)
		case h.Typeflag == tar.TypeReg:
			data = []byte(e.body)
		}
		h.Size = int64(len(data))
		if tw.WriteHeader(h) != nil {
			continue
		}
		tw.Write(data)
	}
	tw.Close()
	if sparse {
		return bytes.ReplaceAll(buf.Bytes(), []byte("GNU:sparse."), []byte("GNU.sparse."))
	}
	return buf.Bytes()
}

// sandbox is a directory with the extraction root and, beside it, what an
// attacker would like to reach: a file and a directory of the host.
type sandbox struct {
	base, root, outside, victim string
}

func newSandbox(t testing.TB) *sandbox {
	t.Helper()
	base := t.TempDir()
	s := &sandbox{base: base, root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	s.victim = filepath.Join(s.outside, "victim")
	for _, d := range []string{s.root, s.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(s.victim, []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// check asserts that extraction changed nothing outside the root and left
// nothing inside it that the rootfs must not hold.
func (s *sandbox) check(t testing.TB, lim extractLimits) {
	t.Helper()
	if es, _ := os.ReadDir(s.base); len(es) != 2 {
		t.Fatalf("something written beside the root: %v", es)
	}
	if es, _ := os.ReadDir(s.outside); len(es) != 1 {
		t.Fatalf("something written outside the root: %v", es)
	}
	fi, err := os.Lstat(s.victim)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 || fi.Sys().(*syscall.Stat_t).Nlink != 1 {
		t.Fatalf("victim changed: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(s.victim); string(b) != "original" {
		t.Fatalf("victim changed: %q", b)
	}
	var total int64
	err = filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		m := fi.Mode()
		if m&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket) != 0 {
			t.Errorf("%s: device, fifo or socket created (%s)", p, m)
		}
		if m&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			t.Errorf("%s: setuid/setgid kept (%s)", p, m)
		}
		if m.IsRegular() {
			total += fi.Sys().(*syscall.Stat_t).Blocks * 512
			if fi.Size() > lim.maxBytes {
				t.Errorf("%s: %d bytes, over the limit %d", p, fi.Size(), lim.maxBytes)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total > lim.maxBytes+1<<20 { // allocation rounds up per file
		t.Fatalf("%d bytes on disk, over the limit %d", total, lim.maxBytes)
	}
}

// TestUntarAttackClasses: one case per attack on image extraction, fed
// straight to untar (mutate.Extract filters some of them before untar sees
// them; this is the last line). Each is refused (ErrUnsafe) or neutralised,
// and never reaches outside the root.
func TestUntarAttackClasses(t *testing.T) {
	many := func(n int, size int64) []tentry {
		es := make([]tentry, n)
		for i := range es {
			es[i] = tentry{name: "f" + strconv.Itoa(i), size: size}
		}
		return es
	}
	cases := []struct {
		name    string
		entries func(s *sandbox) []tentry
		refused bool
		after   func(t *testing.T, s *sandbox, st extractStats)
	}{
		// Path traversal.
		{"dotdot", func(*sandbox) []tentry { return []tentry{{name: "../outside/evil", body: "x"}} }, true, nil},
		{"dotdot inside a path", func(*sandbox) []tentry { return []tentry{{name: "a/../../outside/evil", body: "x"}} }, true, nil},
		{"dotdot dir", func(*sandbox) []tentry { return []tentry{{name: "../outside/d/", typ: tar.TypeDir}} }, true, nil},
		// Absolute paths.
		{"absolute", func(s *sandbox) []tentry { return []tentry{{name: s.outside + "/evil", body: "x"}} }, true, nil},
		{"absolute overwrite", func(s *sandbox) []tentry { return []tentry{{name: s.victim, body: "pwned"}} }, true, nil},
		// Symlink escapes.
		{"write through absolute symlink", func(s *sandbox) []tentry {
			return []tentry{{name: "l", typ: tar.TypeSymlink, link: s.outside}, {name: "l/evil", body: "x"}}
		}, true, nil},
		{"write through climbing symlink", func(s *sandbox) []tentry {
			return []tentry{{name: "l", typ: tar.TypeSymlink, link: "../outside"}, {name: "l/victim", body: "pwned"}}
		}, true, nil},
		{"write through a chain of symlinks", func(s *sandbox) []tentry {
			return []tentry{{name: "a", typ: tar.TypeSymlink, link: "b"}, {name: "b", typ: tar.TypeSymlink, link: "c/../.."},
				{name: "c/", typ: tar.TypeDir}, {name: "a/outside/victim", body: "pwned"}}
		}, true, nil},
		{"symlink to a host file, then a file of the same name", func(s *sandbox) []tentry {
			return []tentry{{name: "v", typ: tar.TypeSymlink, link: s.victim}, {name: "v", body: "pwned"}}
		}, false, func(t *testing.T, s *sandbox, _ extractStats) {
			if b, _ := os.ReadFile(filepath.Join(s.root, "v")); string(b) != "pwned" {
				t.Fatalf("the file did not replace the symlink: %q", b)
			}
		}},
		{"mkdir through symlink", func(s *sandbox) []tentry {
			return []tentry{{name: "l", typ: tar.TypeSymlink, link: "../outside"}, {name: "l/d/", typ: tar.TypeDir}}
		}, true, nil},
		{"chmod through symlink", func(s *sandbox) []tentry {
			return []tentry{{name: "l", typ: tar.TypeSymlink, link: "../outside"}, {name: "l/", typ: tar.TypeDir, mode: 0o777}}
		}, true, nil},
		{"dangling symlinks are kept as they are", func(s *sandbox) []tentry {
			return []tentry{{name: "etc/", typ: tar.TypeDir}, {name: "etc/mtab", typ: tar.TypeSymlink, link: "/proc/self/mounts"},
				{name: "up", typ: tar.TypeSymlink, link: "../../../.."}}
		}, false, func(t *testing.T, s *sandbox, _ extractStats) {
			if l, _ := os.Readlink(filepath.Join(s.root, "etc/mtab")); l != "/proc/self/mounts" {
				t.Fatalf("symlink target %q", l)
			}
		}},
		// Hardlink escapes.
		{"hardlink to absolute host file", func(s *sandbox) []tentry {
			return []tentry{{name: "hl", typ: tar.TypeLink, link: s.victim}}
		}, true, nil},
		{"hardlink climbing out", func(s *sandbox) []tentry {
			return []tentry{{name: "hl", typ: tar.TypeLink, link: "../outside/victim"}}
		}, true, nil},
		{"hardlink through symlink", func(s *sandbox) []tentry {
			return []tentry{{name: "l", typ: tar.TypeSymlink, link: "../outside"}, {name: "hl", typ: tar.TypeLink, link: "l/victim"}}
		}, true, nil},
		{"hardlink to an escaping symlink, then written", func(s *sandbox) []tentry {
			return []tentry{{name: "l", typ: tar.TypeSymlink, link: s.victim}, {name: "hl", typ: tar.TypeLink, link: "l"},
				{name: "hl", body: "pwned"}}
		}, false, nil},
		{"hardlink to a directory", func(s *sandbox) []tentry {
			return []tentry{{name: "d/", typ: tar.TypeDir}, {name: "hl", typ: tar.TypeLink, link: "d"}}
		}, true, nil},
		{"hardlink then the target rewritten", func(s *sandbox) []tentry {
			return []tentry{{name: "a", body: "one"}, {name: "b", typ: tar.TypeLink, link: "a"}, {name: "a", body: "two"}}
		}, false, func(t *testing.T, s *sandbox, _ extractStats) {
			if b, _ := os.ReadFile(filepath.Join(s.root, "b")); string(b) != "one" {
				t.Fatalf("rewriting a changed its old hardlink b: %q", b)
			}
		}},
		// Device nodes, fifos and set-id bits.
		{"device nodes and fifos are skipped", func(s *sandbox) []tentry {
			return []tentry{{name: "dev/null", typ: tar.TypeChar}, {name: "dev/sda", typ: tar.TypeBlock},
				{name: "fifo", typ: tar.TypeFifo}, {name: "dev/mem", typ: tar.TypeChar, mode: 0o666}}
		}, false, func(t *testing.T, s *sandbox, st extractStats) {
			if st.skippedDevices != 4 {
				t.Fatalf("skipped %d devices, want 4", st.skippedDevices)
			}
		}},
		{"setuid and setgid dropped", func(s *sandbox) []tentry {
			return []tentry{{name: "su", body: "x", mode: 0o4755}, {name: "sg/", typ: tar.TypeDir, mode: 0o2775},
				{name: "tmp/", typ: tar.TypeDir, mode: 0o1777}}
		}, false, func(t *testing.T, s *sandbox, st extractStats) {
			if fi, _ := os.Stat(filepath.Join(s.root, "su")); fi.Mode() != 0o755 {
				t.Fatalf("su mode %s", fi.Mode())
			}
			if fi, _ := os.Stat(filepath.Join(s.root, "tmp")); fi.Mode()&fs.ModeSticky == 0 {
				t.Fatalf("sticky bit lost: %s", fi.Mode())
			}
			if st.droppedSetid != 2 {
				t.Fatalf("dropped %d set-id bits, want 2", st.droppedSetid)
			}
		}},
		// Huge files and tar bombs.
		{"file over the size limit", func(*sandbox) []tentry { return []tentry{{name: "big", size: testLimits.maxBytes + 1}} }, true, nil},
		{"sparse file of 1 TiB", func(*sandbox) []tentry { return []tentry{{name: "big", sparse: 1 << 40}} }, true, nil},
		{"files summing over the size limit", func(*sandbox) []tentry { return many(17, 64<<10) }, true, nil},
		{"files up to the size limit", func(*sandbox) []tentry { return many(16, 64<<10) }, false, nil},
		{"too many entries", func(*sandbox) []tentry { return many(testLimits.maxEntries+1, 0) }, true, nil},
		// Replacing what is there.
		{"directory replaced by a file", func(*sandbox) []tentry {
			return []tentry{{name: "d/", typ: tar.TypeDir}, {name: "d/x", body: "x"}, {name: "d", body: "x"}}
		}, true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			st, err := untar(bytes.NewReader(tarOf(tc.entries(s)...)), s.root, testLimits)
			if tc.refused && !errors.Is(err, ErrUnsafe) {
				t.Fatalf("want ErrUnsafe, got %v", err)
			}
			if !tc.refused && err != nil {
				t.Fatalf("want the entries neutralised, got %v", err)
			}
			s.check(t, testLimits)
			if tc.after != nil {
				tc.after(t, s, st)
			}
		})
	}
}

// TestImageBombsRefused: the limits hold through the whole pull path
// (Store.Get, mutate.Extract): a gzip bomb (16 MiB of zeros in a ~16 KiB
// layer), a sparse-file bomb and a layer of too many files are refused,
// and nothing of them stays in the cache.
func TestImageBombsRefused(t *testing.T) {
	rawLayer := func(b []byte) v1.Layer {
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	many := make([]tentry, 101)
	for i := range many {
		many[i] = tentry{name: "f" + strconv.Itoa(i)}
	}
	cases := map[string][]byte{
		"gzip bomb":      tarOf(tentry{name: "zeros", size: 64 << 20}),
		"sparse bomb":    tarOf(tentry{name: "etc/", typ: tar.TypeDir}, tentry{name: "etc/big", sparse: 1 << 40}),
		"too many files": tarOf(many...),
	}
	for name, tb := range cases {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			s.cfg.MaxBytes, s.cfg.MaxEntries = 1<<20, 100
			dir := t.TempDir()
			lp, _ := layout.Write(dir, empty.Index)
			l := rawLayer(tb)
			if size, err := l.Size(); err != nil || size > 1<<20 {
				t.Fatalf("the compressed layer is %d bytes (%v); a bomb should be small", size, err)
			}
			if err := lp.AppendImage(imageOf(t, v1.Config{Cmd: []string{"x"}}, l)); err != nil {
				t.Fatal(err)
			}
			_, err := s.Get(context.Background(), "oci-layout:"+dir)
			if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "bomb") {
				t.Fatalf("want a refused bomb, got %v", err)
			}
			es, _ := os.ReadDir(s.cfg.CacheDir)
			for _, e := range es {
				if e.IsDir() && e.Name() != "refs" {
					t.Fatalf("refused image left %s in the cache", e.Name())
				}
			}
		})
	}
}

// fuzzScript turns a fuzz input into tar entries, one per line:
// TYPE|NAME|ARG|MODE with TYPE f (file, ARG its body), z (ARG bytes of
// zeros), s (sparse, ARG its size), d (dir), l (symlink to ARG), h
// (hardlink to ARG), c/b/p (char, block, fifo). $OUT in NAME or ARG is the
// directory beside the root that nothing may reach.
func fuzzScript(script string, s *sandbox) []tentry {
	var out []tentry
	for _, line := range strings.Split(strings.ReplaceAll(script, "$OUT", s.outside), "\n") {
		f := strings.SplitN(line, "|", 4)
		if len(f) < 2 || len(f[0]) != 1 {
			continue
		}
		e := tentry{name: f[1]}
		arg := ""
		if len(f) > 2 {
			arg = f[2]
		}
		if len(f) > 3 {
			m, _ := strconv.ParseInt(f[3], 8, 64)
			e.mode = m
		}
		n, _ := strconv.ParseInt(arg, 10, 64)
		switch f[0][0] {
		case 'f':
			e.body = arg
		case 'z':
			e.size = min(max(n, 0), 4<<20)
		case 's':
			e.sparse = max(n, 1)
		case 'd':
			e.typ = tar.TypeDir
		case 'l':
			e.typ, e.link = tar.TypeSymlink, arg
		case 'h':
			e.typ, e.link = tar.TypeLink, arg
		case 'c':
			e.typ = tar.TypeChar
		case 'b':
			e.typ = tar.TypeBlock
		case 'p':
			e.typ = tar.TypeFifo
		default:
			e.typ = f[0][0]
		}
		out = append(out, e)
		if len(out) > 64 {
			break
		}
	}
	return out
}

// FuzzUntar: no sequence of tar entries (plus trailing garbage) makes
// untar write outside its root, create a device, keep a set-id bit or go
// over its limits; a failure is ErrUnsafe or ErrPull, never a panic.
func FuzzUntar(f *testing.F) {
	for _, s := range []string{
		"f|a|hello|644\nd|dir/||755\nf|dir/b|x|4755\nl|link|dir/b\nh|hard|dir/b",
		"f|../outside/evil|x", "f|$OUT/evil|x", "d|../x/", "f|a/../../outside/victim|pwned",
		"l|l|$OUT\nf|l/evil|x", "l|l|../outside\nf|l/victim|pwned", "l|l|../outside\nd|l/d/", "l|l|../outside\nd|l/||777",
		"l|a|b\nl|b|c/../..\nd|c/\nf|a/outside/victim|pwned", "l|v|$OUT/victim\nf|v|pwned",
		"h|hl|$OUT/victim", "h|hl|../outside/victim", "l|l|../outside\nh|hl|l/victim", "l|l|$OUT/victim\nh|hl|l\nf|hl|pwned",
		"d|d/\nh|hl|d", "f|a|one\nh|b|a\nf|a|two", "c|dev/null\nb|dev/sda\np|fifo\nc|dev/mem||666",
		"f|su|x|4755\nd|sg/||2775\nd|tmp/||1777", "z|big|1048577", "s|big|1099511627776", "z|a|600000\nz|b|600000",
		"d|d/\nf|d/x|x\nf|d|x", "f|.|x", "d|.", "l|.|..", "f|./|x", "f||x", "f|a\x00b|x", "x|a|b", "g|a|b", "S|a|b",
		"L|a|b", "K|a|b", "7|a|b", "f|a|x|7777777777777", "f|" + strings.Repeat("a/", 300) + "x|y", "f|" + strings.Repeat("n", 300) + "|x",
		"l|a|" + strings.Repeat("../", 100) + "\nf|a/x|y", "d|a/\nl|a/b|/\nf|a/b/etc/passwd|pwned", "l|proc|/proc\nf|proc/self/x|x",
	} {
		f.Add(s, []byte(nil))
	}
	f.Add("f|a|x", []byte("garbage after the entries"))
	f.Add("", bytes.Repeat([]byte{0}, 1024))
	f.Fuzz(func(t *testing.T, script string, tail []byte) {
		s := newSandbox(t)
		b := tarOf(fuzzScript(script, s)...)
		if len(tail) > 0 {
			b = append(b[:len(b)-1024], tail...) // the tail replaces the end-of-archive blocks
		}
		_, err := untar(bytes.NewReader(b), s.root, testLimits)
		if err != nil && !errors.Is(err, ErrUnsafe) && !errors.Is(err, ErrPull) {
			t.Fatalf("error %v wraps neither ErrUnsafe nor ErrPull", err)
		}
		s.check(t, testLimits)
	})
}
