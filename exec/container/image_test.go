package container

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/foreman-sched/foreman/exec/image"
	"github.com/foreman-sched/foreman/fsm"
)

var (
	toolboxOnce sync.Once
	toolboxPath string
	toolboxErr  error
)

// buildToolbox compiles testdata/toolbox statically (no busybox offline).
func buildToolbox(t testing.TB) string {
	t.Helper()
	toolboxOnce.Do(func() {
		dir, err := os.MkdirTemp("", "toolbox-")
		if err != nil {
			toolboxErr = err
			return
		}
		toolboxPath = filepath.Join(dir, "toolbox")
		cmd := osexec.Command("go", "build", "-o", toolboxPath, "./testdata/toolbox")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			toolboxErr = err
			t.Logf("%s", out)
		}
	})
	if toolboxErr != nil {
		t.Fatalf("build toolbox: %v", toolboxErr)
	}
	return toolboxPath
}

// toolboxImage is a one-layer image: /bin/toolbox, /etc/passwd with a
// non-root user, Entrypoint+Cmd that print a greeting.
func toolboxImage(t testing.TB) v1.Image {
	t.Helper()
	return toolboxImageWith(t, nil)
}

// toolboxImageWith is toolboxImage with more regular files (path ->
// content); ELF files (programs, shared libraries) are executable.
func toolboxImageWith(t testing.TB, files map[string][]byte) v1.Image {
	t.Helper()
	bin, err := os.ReadFile(buildToolbox(t))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, body []byte) {
		h.Size = int64(len(body))
		tw.WriteHeader(h)
		tw.Write(body)
	}
	add(&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755}, nil)
	add(&tar.Header{Name: "bin/toolbox", Typeflag: tar.TypeReg, Mode: 0o755}, bin)
	add(&tar.Header{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755}, nil)
	add(&tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644}, []byte("root:x:0:0::/:/bin/toolbox\napp:x:1000:1000::/home/app:/bin/toolbox\n"))
	for name, body := range files {
		mode := int64(0o644)
		if bytes.HasPrefix(body, []byte("\x7fELF")) {
			mode = 0o755
		}
		add(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode}, body)
	}
	tw.Close()
	b := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", image.DefaultConfig().Arch
	cf.Config = v1.Config{Entrypoint: []string{"/bin/toolbox", "echo"}, Cmd: []string{"hello from image"}, Env: []string{"PATH=/bin", "IMG=1"}}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func pushToolbox(t testing.TB) string {
	t.Helper()
	return pushImage(t, toolboxImage(t))
}

// pushImage serves img from an in-process registry and returns its reference.
func pushImage(t testing.TB, img v1.Image) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/foreman/toolbox:test"
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	return ref
}

// TestImageFromRegistry pulls from an in-process registry and runs the
// image's Entrypoint+Cmd; the shim is the static toolbox because the test
// binary needs libc, which the image does not have.
func TestImageFromRegistry(t *testing.T) {
	requireContainers(t)
	tb := buildToolbox(t)
	d := newTestDriver(t, func(c *Config) { c.ShimPath = tb })
	ref := pushToolbox(t)

	r := run(t, d, fsm.JobSpec{Image: ref})
	if r.stdout != "hello from image\n" || r.status.ExitCode != 0 {
		t.Fatalf("entrypoint run: stdout %q stderr %q status %+v", r.stdout, r.stderr, r.status)
	}
	r = run(t, d, fsm.JobSpec{Image: ref, User: "app", Command: []string{"toolbox", "id"}})
	if r.stdout != "1000 1000\n" {
		t.Fatalf("user app: stdout %q stderr %q", r.stdout, r.stderr)
	}
	r = run(t, d, fsm.JobSpec{Image: ref, Command: []string{"/bin/toolbox", "ls", "/"}})
	for _, want := range []string{"bin", "etc", "proc", "task", "tmp"} {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Fatalf("ls / = %q: missing %s", r.stdout, want)
		}
	}

	_, err := d.Start(context.Background(), newTask(t, testID(t), fsm.JobSpec{Image: ref, Command: []string{"sh", "-c", "true"}}))
	assertErrorIs(t, err, ErrCommandNotFound, `command "sh" not found in rootfs`)
	_, err = d.Start(context.Background(), newTask(t, testID(t), fsm.JobSpec{Image: strings.Replace(ref, "toolbox:test", "missing:x", 1)}))
	assertErrorIs(t, err, image.ErrNotFound, "not found")
	_, err = d.Start(context.Background(), newTask(t, testID(t), fsm.JobSpec{Image: "Not A Ref"}))
	assertErrorIs(t, err, image.ErrBadReference, "")
}
