package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// entry is one tar entry of a test layer.
type entry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func layerOf(t testing.TB, entries ...entry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Size: int64(len(e.body)), Format: tar.FormatPAX}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func imageOf(t testing.TB, cfg v1.Config, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config = cfg
	cf.OS, cf.Architecture = "linux", DefaultConfig().Arch
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// testImage has two layers: the second deletes a file of the first (whiteout).
func testImage(t testing.TB) v1.Image {
	base := layerOf(t,
		entry{name: "bin/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "bin/hello", body: "#!hello\n", mode: 0o4755},
		entry{name: "etc/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "etc/passwd", body: "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n"},
		entry{name: "etc/gone", body: "x"},
		entry{name: "dev/null", typ: tar.TypeChar},
		entry{name: "usr/bin/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "sbin", typ: tar.TypeSymlink, link: "usr/bin"},
	)
	top := layerOf(t, entry{name: "etc/.wh.gone", body: ""}, entry{name: "usr/bin/tool", body: "tool", mode: 0o755})
	return imageOf(t, v1.Config{Entrypoint: []string{"/bin/hello"}, Cmd: []string{"world"}, Env: []string{"A=1"}, User: "app"}, base, top)
}

func newStore(t testing.TB) *Store {
	t.Helper()
	cfg := DefaultConfig()
	cfg.CacheDir = filepath.Join(t.TempDir(), "cache")
	cfg.MountDirs = []string{"/proc", "/task"}
	cfg.MountFiles = []string{"/.foreman/init", "/etc/resolv.conf"}
	s, err := NewStore(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// startRegistry serves an in-process registry on loopback (plain HTTP).
func startRegistry(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func push(t testing.TB, ref string, img v1.Image) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
}

func assertImage(t *testing.T, img *Image, want v1.Image) {
	t.Helper()
	d, _ := want.Digest()
	if img.Digest != d.String() {
		t.Fatalf("digest %s, want %s", img.Digest, d)
	}
	if got := strings.Join(img.Config.Entrypoint, " ") + "|" + strings.Join(img.Config.Cmd, " ") + "|" + img.Config.User; got != "/bin/hello|world|app" {
		t.Fatalf("config %q", got)
	}
	fi, err := os.Stat(filepath.Join(img.Rootfs, "bin/hello"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSetuid != 0 || fi.Mode().Perm() != 0o755 {
		t.Fatalf("bin/hello mode %v: want 0755 without setuid", fi.Mode())
	}
	for _, p := range []string{"etc/gone", "dev/null"} {
		if _, err := os.Lstat(filepath.Join(img.Rootfs, p)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s should not exist (whiteout / device): %v", p, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(img.Rootfs, "sbin/tool")); err != nil || string(b) != "tool" {
		t.Fatalf("sbin/tool through symlink: %q %v", b, err)
	}
	for _, p := range []string{"proc", "task"} {
		if fi, err := os.Stat(filepath.Join(img.Rootfs, p)); err != nil || !fi.IsDir() {
			t.Fatalf("mountpoint dir %s: %v", p, err)
		}
	}
	for _, p := range []string{".foreman/init", "etc/resolv.conf"} {
		if fi, err := os.Stat(filepath.Join(img.Rootfs, p)); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("mountpoint file %s: %v", p, err)
		}
	}
}

func TestRegistryPullCachesByDigest(t *testing.T) {
	s := newStore(t)
	img := testImage(t)
	ref := startRegistry(t) + "/test/hello:v1"
	push(t, ref, img)

	got, err := s.Get(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	assertImage(t, got, img)

	// A second Get reuses the extracted tree (same inode, no temp dirs).
	before, _ := os.Stat(got.Rootfs)
	again, err := s.Get(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(again.Rootfs)
	if again.Rootfs != got.Rootfs || !os.SameFile(before, after) {
		t.Fatalf("re-extracted: %s vs %s", got.Rootfs, again.Rootfs)
	}
}

func TestConcurrentPullsExtractOnce(t *testing.T) {
	s := newStore(t)
	img := testImage(t)
	ref := startRegistry(t) + "/test/conc:v1"
	push(t, ref, img)
	const n = 6
	var wg sync.WaitGroup
	roots := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Separate stores model separate supervisor processes.
			s2, _ := NewStore(s.cfg, s.log)
			img, err := s2.Get(context.Background(), ref)
			errs[i] = err
			if err == nil {
				roots[i] = img.Rootfs
			}
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || roots[i] != roots[0] {
			t.Fatalf("pull %d: %v %s (want %s)", i, errs[i], roots[i], roots[0])
		}
	}
	entries, _ := os.ReadDir(s.cfg.CacheDir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Fatalf("temp dir left: %s", e.Name())
		}
	}
}

func TestOCILayoutAndDockerArchive(t *testing.T) {
	img := testImage(t)
	dir := t.TempDir()

	lp, err := layout.Write(filepath.Join(dir, "layout"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{refNameAnnotation: "v1"})); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("example.com/hello:v1")
	archive := filepath.Join(dir, "hello.tar")
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{
		"oci-layout:" + filepath.Join(dir, "layout"),
		"oci-layout:" + filepath.Join(dir, "layout") + ":v1",
		"docker-archive:" + archive,
		"docker-archive:" + archive + ":example.com/hello:v1",
	} {
		t.Run(ref, func(t *testing.T) {
			got, err := newStore(t).Get(context.Background(), ref)
			if err != nil {
				t.Fatal(err)
			}
			assertImage(t, got, img)
		})
	}
}

func TestBadReferencesAndMissingImages(t *testing.T) {
	s := newStore(t)
	reg := startRegistry(t)
	cases := []struct {
		ref    string
		target error
	}{
		{"", ErrBadReference},
		{"UPPER/case::bad", ErrBadReference},
		{"oci-layout:relative/dir", ErrBadReference},
		{reg + "/no/such:image", ErrNotFound},
		{"oci-layout:/nonexistent/layout", ErrNotFound},
		{"docker-archive:/nonexistent.tar", ErrNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.ref, func(t *testing.T) {
			_, err := s.Get(context.Background(), tc.ref)
			if !errors.Is(err, tc.target) {
				t.Fatalf("err %v, want %v", err, tc.target)
			}
		})
	}
}

// TestMaliciousLayers: every escape is refused (or, for relative symlinks
// that climb out, dropped by mutate.Extract) and nothing is written outside
// the cache dir.
func TestMaliciousLayers(t *testing.T) {
	outside := t.TempDir() // an attacker's target on the host
	victim := filepath.Join(outside, "victim")
	os.WriteFile(victim, []byte("original"), 0o644)
	cases := []struct {
		name    string
		entries []entry
		refused bool
	}{
		{"dotdot name", []entry{{name: "../../../../../../" + outside + "/evil", body: "x"}}, true},
		{"absolute name", []entry{{name: outside + "/evil", body: "x"}}, true},
		{"absolute symlink then write through it", []entry{
			{name: "link", typ: tar.TypeSymlink, link: outside},
			{name: "link/evil", body: "x"}}, false}, // mutate.Extract drops link/evil
		{"relative symlink climbing out then write", []entry{
			{name: "a/", typ: tar.TypeDir, mode: 0o755},
			{name: "a/link", typ: tar.TypeSymlink, link: "../../../../../../../../" + outside},
			{name: "a/link/evil", body: "x"}}, false}, // link dropped, evil lands in a/link/ inside
		{"hardlink to absolute host file", []entry{{name: "hl", typ: tar.TypeLink, link: victim}}, true},
		{"hardlink climbing out", []entry{{name: "hl", typ: tar.TypeLink, link: "../../../../../../../.." + victim}}, false},
		{"hardlink through escaping symlink", []entry{
			{name: "l", typ: tar.TypeSymlink, link: outside},
			{name: "hl", typ: tar.TypeLink, link: "l/victim"}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			dir := t.TempDir()
			lp, _ := layout.Write(dir, empty.Index)
			img := imageOf(t, v1.Config{Cmd: []string{"x"}}, layerOf(t, tc.entries...))
			if err := lp.AppendImage(img); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(context.Background(), "oci-layout:"+dir)
			if tc.refused && !errors.Is(err, ErrUnsafe) {
				t.Fatalf("want ErrUnsafe, got %v (%+v)", err, got)
			}
			if !tc.refused && err != nil {
				t.Fatalf("want the entry neutralised, got %v", err)
			}
			if es, _ := os.ReadDir(outside); len(es) != 1 {
				t.Fatalf("something written outside: %v", es)
			}
			if b, _ := os.ReadFile(victim); string(b) != "original" {
				t.Fatalf("victim changed: %q", b)
			}
			if err != nil {
				es, _ := os.ReadDir(s.cfg.CacheDir)
				for _, e := range es {
					if e.IsDir() && e.Name() != "refs" {
						t.Fatalf("refused image left %s in the cache", e.Name())
					}
				}
			}
		})
	}
}

func TestParseReference(t *testing.T) {
	dir := t.TempDir()
	withColon := filepath.Join(dir, "a:b")
	os.Mkdir(withColon, 0o755)
	cases := []struct{ in, kind, path, tag string }{
		{"oci-layout:" + dir, KindOCILayout, dir, ""},
		{"oci-layout:" + dir + ":v2", KindOCILayout, dir, "v2"},
		{"oci-layout:" + withColon, KindOCILayout, withColon, ""},
		{"docker-archive:" + dir + ":repo/x:tag", KindDockerArchive, dir, "repo/x:tag"},
		{"busybox", KindRegistry, "", ""},
		{"127.0.0.1:5000/x:tag", KindRegistry, "", ""},
	}
	for _, tc := range cases {
		r, err := ParseReference(tc.in)
		if err != nil || r.Kind != tc.kind || r.Path != tc.path || r.Tag != tc.tag {
			t.Fatalf("%q: %+v %v", tc.in, r, err)
		}
	}
	r, _ := ParseReference("127.0.0.1:5000/x:tag")
	if r.Registry.Context().Registry.Scheme() != "http" {
		t.Fatalf("loopback registry should use plain HTTP")
	}
}

// TestUntarRefusesEscapes feeds crafted flattened tars straight to untar,
// bypassing mutate.Extract's own filtering, so the os.Root defence is what
// is tested.
func TestUntarRefusesEscapes(t *testing.T) {
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	os.WriteFile(victim, []byte("original"), 0o644)
	cases := map[string][]entry{
		"dotdot":                    {{name: "../evil", body: "x"}},
		"absolute":                  {{name: outside + "/evil", body: "x"}},
		"write through abs symlink": {{name: "l", typ: tar.TypeSymlink, link: outside}, {name: "l/evil", body: "x"}},
		"write through rel symlink": {{name: "l", typ: tar.TypeSymlink, link: "../../../../../../../../../.." + outside}, {name: "l/evil", body: "x"}},
		"overwrite through symlink": {{name: "l", typ: tar.TypeSymlink, link: "../../../../../../../../../.." + outside}, {name: "l/victim", body: "x"}},
		"hardlink absolute":         {{name: "hl", typ: tar.TypeLink, link: victim}},
		"hardlink dotdot":           {{name: "hl", typ: tar.TypeLink, link: "../../../../../../../.." + victim}},
		"hardlink through symlink":  {{name: "l", typ: tar.TypeSymlink, link: outside}, {name: "hl", typ: tar.TypeLink, link: "l/victim"}},
		"mkdir through symlink":     {{name: "l", typ: tar.TypeSymlink, link: outside}, {name: "l/d/", typ: tar.TypeDir, mode: 0o755}},
	}
	for name, entries := range cases {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, e := range entries {
				h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: 0o644}
				if h.Typeflag == 0 {
					h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
				}
				tw.WriteHeader(h)
				tw.Write([]byte(e.body))
			}
			tw.Close()
			dir := t.TempDir()
			_, err := untar(&buf, dir, testLimits)
			if !errors.Is(err, ErrUnsafe) {
				t.Fatalf("want ErrUnsafe, got %v", err)
			}
			if es, _ := os.ReadDir(outside); len(es) != 1 {
				t.Fatalf("something written outside: %v", es)
			}
			if b, _ := os.ReadFile(victim); string(b) != "original" {
				t.Fatalf("victim changed: %q", b)
			}
		})
	}
}
