package release

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestCheckVersion(t *testing.T) {
	for _, tc := range []struct {
		v  string
		ok bool
	}{
		{"v0.1.0", true},
		{"v1.20.3", true},
		{"v1.2.3-rc.1", true},
		{"v1.2.3-rc.1+build.7", true},
		{"", false},
		{"0.1.0", false},
		{"v0.1", false},
		{"v01.2.3", false},
		{"v1.2.3-", false},
		{"v1.2.3 ", false},
		{"v1.2.3/../x", false},
		{"latest", false},
	} {
		err := CheckVersion(tc.v)
		if (err == nil) != tc.ok || err != nil && (!errors.Is(err, ErrVersion) || strings.Contains(err.Error(), "\n")) {
			t.Errorf("CheckVersion(%q) = %v, want ok=%v (one line, ErrVersion)", tc.v, err, tc.ok)
		}
	}
}

func TestDebVersion(t *testing.T) {
	for v, want := range map[string]string{
		"v0.1.0":              "0.1.0",
		"v1.2.3-rc.1":         "1.2.3~rc.1",
		"v1.2.3-rc-1":         "1.2.3~rc.1",
		"v1.2.3+build.7":      "1.2.3+build.7",
		"v1.2.3-beta+exp-sha": "1.2.3~beta+exp.sha",
	} {
		if got := debVersion(v); got != want {
			t.Errorf("debVersion(%q) = %q, want %q", v, got, want)
		}
	}
}

// The Makefile's build tags are the release's: make release passes its
// TAGS, and the test below builds with DefaultConfig's.
func TestMakefileTags(t *testing.T) {
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^TAGS\s*:=\s*(.*)$`).FindSubmatch(mk)
	if m == nil || strings.TrimSpace(string(m[1])) != DefaultConfig().Tags {
		t.Fatalf("Makefile TAGS %q, release.DefaultConfig().Tags %q: keep them the same", m, DefaultConfig().Tags)
	}
}

// A bad version or a missing tool stops Build before it writes anything.
func TestBuildBadInputWritesNothing(t *testing.T) {
	for _, v := range []string{"", "1.0.0", "v1.0"} {
		cfg := DefaultConfig()
		cfg.Dir, cfg.Version = "..", v
		cfg.Out = filepath.Join(t.TempDir(), "dist")
		if _, err := Build(context.Background(), cfg); !errors.Is(err, ErrVersion) {
			t.Errorf("version %q: %v, want ErrVersion", v, err)
		}
		if _, err := os.Stat(cfg.Out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("version %q: %s was made (%v)", v, cfg.Out, err)
		}
	}
	cfg := DefaultConfig()
	cfg.Dir, cfg.Version, cfg.Arches = "..", "v0.0.1", []string{"mips"}
	cfg.Out = filepath.Join(t.TempDir(), "dist")
	if _, err := Build(context.Background(), cfg); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("arch mips: %v, want one line", err)
	}
	if _, err := os.Stat(cfg.Out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("arch mips: %s was made", cfg.Out)
	}
}

// requireTools fails under CI=true and skips loudly otherwise when the
// release cannot be built or checked here (scripts/test-deps.sh installs
// all of these).
func requireTools(t *testing.T) {
	t.Helper()
	var missing []string
	for _, arch := range DefaultConfig().Arches {
		if _, err := compilerFor(arch); err != nil {
			missing = append(missing, err.Error())
		}
	}
	for _, tool := range []string{"git", "sha256sum", "dpkg-deb", "qemu-aarch64-static"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true but this machine cannot build or check a release: %s", strings.Join(missing, "; "))
	}
	t.Skipf("SKIPPED (LOUDLY): this machine cannot build or check a release (%s); CI=true makes this a failure", strings.Join(missing, "; "))
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestRelease builds a release twice (the second from go's build cache:
// the binaries' own reproducibility across machines rests on -trimpath and
// -buildid=, checked by hand in docs/operations.md) and checks what an
// operator would: the same bytes, sha256sum -c, the packages' control and
// files, the unit, the arm64 binary under qemu.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two releases (about a minute with a warm build cache)")
	}
	requireTools(t)
	const version = "v0.0.0-test.1"
	build := func() (string, []Artifact) {
		cfg := DefaultConfig()
		cfg.Dir, cfg.Version = "..", version
		cfg.Out = filepath.Join(t.TempDir(), "dist")
		var log bytes.Buffer
		cfg.Log = &log
		start := time.Now()
		arts, err := Build(context.Background(), cfg)
		if err != nil {
			t.Fatalf("Build: %v\n%s", err, log.String())
		}
		t.Logf("release built in %s:\n%s", time.Since(start).Round(time.Millisecond), log.String())
		return cfg.Out, arts
	}
	dirA, artsA := build()
	dirB, artsB := build()

	want := []string{
		"SHA256SUMS",
		"foreman_0.0.0~test.1_amd64.deb",
		"foreman_0.0.0~test.1_arm64.deb",
		"foreman_" + version + "_linux_amd64.tar.gz",
		"foreman_" + version + "_linux_arm64.tar.gz",
		"foreman_" + version + "_oci.tar",
	}
	ents, err := os.ReadDir(dirA)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("dist holds %q, want %q", got, want)
	}
	if len(artsA) != len(artsB) {
		t.Fatalf("builds gave %d and %d artifacts", len(artsA), len(artsB))
	}
	for i, a := range artsA {
		t.Logf("%-44s %9d bytes  %s", a.Name, a.Size, a.SHA256)
		b1, err1 := os.ReadFile(filepath.Join(dirA, a.Name))
		b2, err2 := os.ReadFile(filepath.Join(dirB, a.Name))
		if err1 != nil || err2 != nil || !bytes.Equal(b1, b2) || artsB[i] != a {
			t.Errorf("%s differs between two builds of the same tree (%v %v)", a.Name, err1, err2)
		}
	}

	run(t, dirA, "sha256sum", "-c", "--strict", "SHA256SUMS")
	// A damaged file fails the check.
	tampered := t.TempDir()
	run(t, "", "cp", "-a", dirA+"/.", tampered)
	f := filepath.Join(tampered, "foreman_"+version+"_linux_amd64.tar.gz")
	if err := os.WriteFile(f, []byte("not the release"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sha256sum", "-c", "--quiet", "SHA256SUMS")
	cmd.Dir = tampered
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("sha256sum -c passes a tampered tarball: %s", out)
	}

	t.Run("deb", func(t *testing.T) { checkDeb(t, filepath.Join(dirA, "foreman_0.0.0~test.1_amd64.deb"), version) })
	t.Run("tarball", func(t *testing.T) {
		list := run(t, dirA, "tar", "tzvf", "foreman_"+version+"_linux_arm64.tar.gz")
		for _, f := range []string{"foreman", "README.md", "foreman.service", "agent.yaml"} {
			if !strings.Contains(list, "foreman_"+version+"_linux_arm64/"+f+"\n") {
				t.Errorf("tarball lacks %s:\n%s", f, list)
			}
		}
		for _, l := range strings.Split(strings.TrimSpace(list), "\n") {
			if !strings.Contains(l, " root/root ") {
				t.Errorf("tarball entry not owned by root/root: %s", l)
			}
		}
		x := t.TempDir()
		run(t, x, "tar", "xzf", filepath.Join(dirA, "foreman_"+version+"_linux_arm64.tar.gz"))
		bin := filepath.Join(x, "foreman_"+version+"_linux_arm64", "foreman")
		out := run(t, x, "qemu-aarch64-static", bin, "version")
		if !strings.HasPrefix(out, "foreman "+version+"\ncommit ") || !strings.Contains(out, "linux/arm64") {
			t.Errorf("arm64 binary under qemu: %q", out)
		}
		t.Logf("arm64 under qemu: %q", out)
	})
	t.Run("oci", func(t *testing.T) {
		x := t.TempDir()
		run(t, x, "tar", "xf", filepath.Join(dirA, "foreman_"+version+"_oci.tar"))
		idx, err := os.ReadFile(filepath.Join(x, "index.json"))
		if err != nil || !strings.Contains(string(idx), `"org.opencontainers.image.ref.name":"`+version+`"`) {
			t.Fatalf("index.json: %v %s", err, idx)
		}
		checkOCI(t, x, version)
	})
}

func checkDeb(t *testing.T, deb, version string) {
	info := run(t, "", "dpkg-deb", "--info", deb)
	for _, want := range []string{"Package: foreman\n", "Version: 0.0.0~test.1\n", "Architecture: amd64\n", "Depends: adduser\n", " conffiles", " postinst", " prerm", " postrm"} {
		if !strings.Contains(info, want) {
			t.Errorf("dpkg-deb --info lacks %q:\n%s", want, info)
		}
	}
	if got := run(t, "", "dpkg-deb", "--field", deb, "Version"); got != "0.0.0~test.1\n" {
		t.Errorf("Version field %q", got)
	}
	if got := run(t, "", "dpkg-deb", "--ctrl-tarfile", deb); len(got) == 0 {
		t.Error("empty control tar")
	}
	list := run(t, "", "dpkg-deb", "--contents", deb)
	for _, want := range []string{
		"-rwxr-xr-x root/root .* ./usr/bin/foreman\n",
		"-rw-r--r-- root/root .* ./lib/systemd/system/foreman.service\n",
		"-rw-r--r-- root/root .* ./etc/foreman/agent.yaml\n",
		"drwx------ root/root .* ./var/lib/foreman/\n",
	} {
		if !regexp.MustCompile(want).MatchString(list) {
			t.Errorf("dpkg-deb --contents lacks %q:\n%s", want, list)
		}
	}
	root := t.TempDir()
	run(t, "", "dpkg-deb", "--extract", deb, root)
	// The control scripts: the user, the data dir.
	ctl := t.TempDir()
	run(t, "", "dpkg-deb", "--control", deb, ctl)
	for name, want := range map[string]string{
		"conffiles": "/etc/foreman/agent.yaml\n",
		"postinst":  "adduser --system --group",
	} {
		b, err := os.ReadFile(filepath.Join(ctl, name))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("control %s: %v %q, want %q", name, err, b, want)
		}
	}
	// md5sums agree with the files (dpkg --verify reads them).
	cmd := exec.Command("md5sum", "-c", "--quiet", filepath.Join(ctl, "md5sums"))
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("md5sums: %v\n%s", err, out)
	}
	out := run(t, "", filepath.Join(root, "usr/bin/foreman"), "version")
	if !strings.HasPrefix(out, "foreman "+version+"\n") {
		t.Errorf("packaged binary: %q", out)
	}
	unit, err := os.ReadFile(filepath.Join(root, "lib/systemd/system/foreman.service"))
	if err != nil || !strings.Contains(string(unit), "\nExecStart=/usr/bin/foreman agent --config /etc/foreman/agent.yaml\n") {
		t.Fatalf("unit: %v\n%s", err, unit)
	}
	// systemd-analyze verify the unit inside the package's tree (with the
	// host's targets, which it names), so it checks the packaged binary.
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but systemd-analyze is missing (apt-get install systemd)")
		}
		t.Skip("SKIPPED (LOUDLY): no systemd-analyze to verify the unit")
	}
	targets, _ := filepath.Glob("/lib/systemd/system/*.target")
	for _, tg := range targets {
		run(t, "", "cp", tg, filepath.Join(root, "lib/systemd/system/"))
	}
	verify := exec.Command("systemd-analyze", "verify", "--root="+root, "/lib/systemd/system/foreman.service")
	if out, err := verify.CombinedOutput(); err != nil || len(out) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// It can fail: without the binary it names, it does.
	if err := os.Remove(filepath.Join(root, "usr/bin/foreman")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("systemd-analyze", "verify", "--root="+root, "/lib/systemd/system/foreman.service").CombinedOutput(); err == nil {
		t.Errorf("systemd-analyze verify passes a unit whose binary is missing: %s", out)
	}
}
