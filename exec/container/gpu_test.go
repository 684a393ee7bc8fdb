package container

import (
	"context"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/exec/gpu"
	"github.com/foreman-sched/foreman/exec/gpu/gputest"
	"github.com/foreman-sched/foreman/fsm"
)

// TestContainerGPUHostRootfs starts containers on a fake GPU host whose
// "GPUs" are real character devices: a container holding GPU index 1
// (/dev/nvidia0) has exactly its node, nvidiactl and nvidia-uvm(-tools) in
// /dev and can open its GPU; a node it makes for the other GPU (it has
// CAP_MKNOD) is refused by the kernel's device cgroup, and a container
// with no GPU has no NVIDIA node and is refused every one it makes.
func TestContainerGPUHostRootfs(t *testing.T) {
	requireContainers(t)
	host := gputest.Devices(t)
	d := newTestDriver(t, nil)
	g1 := host.GPUs[1] // minor 0
	cases := []struct {
		name  string
		gpus  []fsm.GPU
		nodes string // ls /dev | grep nvidia
		want  []string
	}{
		{"none", nil, "", []string{"/dev/probe Operation not permitted", "CUDA_VISIBLE_DEVICES=", "NVIDIA_VISIBLE_DEVICES=void"}},
		{"index1", []fsm.GPU{g1}, "nvidia-uvm\nnvidia-uvm-tools\nnvidia0\nnvidiactl\n", []string{
			"/dev/nvidia0 ok", "/dev/probe Operation not permitted", "CUDA_VISIBLE_DEVICES=0", "NVIDIA_VISIBLE_DEVICES=" + g1.UUID}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The probe is the GPU the job does not hold: 7:1 (index 0).
			script := "ls /dev | grep nvidia > nodes\n" + gputest.OpenScript("/dev/nvidia0", "/dev/nvidiactl") +
				"mknod /dev/probe c 7 1 && " + strings.TrimSuffix(gputest.OpenScript("/dev/probe"), "\n") + "\nenv | grep -E '^(CUDA|NVIDIA)'\n"
			task := newTask(t, testID(t), fsm.JobSpec{Command: sh(script)})
			task.GPUs, task.GPURoot = c.gpus, host.Dir
			h, err := d.Start(context.Background(), task)
			if err != nil {
				t.Fatal(err)
			}
			st := waitFor(t, h)
			if err := h.Destroy(); err != nil {
				t.Fatal(err)
			}
			out := readFile(t, task.Stdout.Name())
			if st.ExitCode != 0 {
				t.Fatalf("exit %d: %s %s", st.ExitCode, out, readFile(t, task.Stderr.Name()))
			}
			if nodes := readFile(t, task.WorkDir+"/nodes"); nodes != c.nodes {
				t.Errorf("NVIDIA nodes in /dev:\n%s\nwant\n%s", nodes, c.nodes)
			}
			for _, w := range c.want {
				if !slices.Contains(strings.Split(out, "\n"), w) {
					t.Errorf("want line %q; job printed:\n%s", w, out)
				}
			}
			if c.gpus != nil && strings.Contains(out, "/dev/nvidiactl Operation not permitted") {
				t.Errorf("nvidiactl refused to a container holding a GPU:\n%s", out)
			}
		})
	}
}

// TestContainerGPUConfig checks the libcontainer config of an image
// container holding GPU index 1: exactly its stand-in nodes and rules, the
// driver's libraries of the loaded version under all their names,
// nvidia-smi, the merged ldcache, and masks over the other GPU's /proc dir.
func TestContainerGPUConfig(t *testing.T) {
	host := gputest.Devices(t)
	drv := host.InstallDriver(t, "/bin/true")
	d, err := New(DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	image := t.TempDir()
	writeFile(t, image+"/etc/ld.so.cache", gpu.EncodeLDCache([]gpu.LDEntry{{Name: "libc.so.6", Path: "/lib/libc.so.6", Flags: 0x0303}}))
	task := newTask(t, "cfg", fsm.JobSpec{})
	task.GPUs, task.GPURoot = []fsm.GPU{host.GPUs[1]}, host.Dir
	g, env, err := gpuSetup(task, image, []string{"PATH=/bin"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := d.buildConfig(containerSpec{id: "cfg", rootfs: image, workDir: task.WorkDir, gpu: g})

	var devs, rules, mounts []string
	for _, dv := range cfg.Devices {
		if strings.Contains(dv.Path, "nvidia") {
			devs = append(devs, dv.Path+" "+dv.CgroupString())
		}
	}
	for _, r := range cfg.Cgroups.Resources.Devices {
		if r.Major == gputest.GPUMajor || r.Major == gputest.UVMMajor {
			rules = append(rules, r.CgroupString())
		}
	}
	for _, m := range cfg.Mounts {
		if strings.HasPrefix(m.Destination, "/usr/local/nvidia") || m.Destination == "/etc/ld.so.cache" {
			mounts = append(mounts, m.Destination+" <- "+strings.TrimPrefix(m.Source, host.Dir))
		}
	}
	wantDevs := []string{"/dev/nvidia0 c 7:0 rwm", "/dev/nvidiactl c 7:255 rwm", "/dev/nvidia-uvm c 511:0 rwm", "/dev/nvidia-uvm-tools c 511:1 rwm"}
	wantRules := []string{"c 7:0 rwm", "c 7:255 rwm", "c 511:0 rwm", "c 511:1 rwm"}
	wantMounts := []string{"/usr/local/nvidia <- tmpfs", "/usr/local/nvidia/bin/nvidia-smi <- /usr/bin/nvidia-smi", "/etc/ld.so.cache <- " + task.Dir + "/ld.so.cache"}
	for file, names := range drv.Libs {
		for _, n := range append([]string{file}, names...) {
			wantMounts = append(wantMounts, "/usr/local/nvidia/lib64/"+n+" <- "+gputest.LibDir+"/"+file)
		}
	}
	for _, l := range [][]string{devs, wantDevs, rules, wantRules, mounts, wantMounts} {
		sort.Strings(l)
	}
	if !slices.Equal(devs, wantDevs) {
		t.Errorf("devices\n%v\nwant\n%v", devs, wantDevs)
	}
	if !slices.Equal(rules, wantRules) {
		t.Errorf("cgroup rules\n%v\nwant\n%v", rules, wantRules)
	}
	if !slices.Equal(mounts, wantMounts) {
		t.Errorf("mounts\n%v\nwant\n%v", strings.Join(mounts, "\n"), strings.Join(wantMounts, "\n"))
	}
	if !slices.Contains(cfg.MaskPaths, "/proc/driver/nvidia/gpus/"+host.GPUs[0].BusID) || slices.Contains(cfg.MaskPaths, "/proc/driver/nvidia/gpus/"+host.GPUs[1].BusID) {
		t.Errorf("masks %v: want the other GPU's /proc dir masked, not the job's", cfg.MaskPaths)
	}
	if slices.Contains(maskedPaths, "/proc/driver/nvidia/gpus/"+host.GPUs[0].BusID) {
		t.Error("the driver's default masks were changed in place")
	}
	for _, w := range []string{"PATH=/bin:/usr/local/nvidia/bin", "CUDA_VISIBLE_DEVICES=0"} {
		if !slices.Contains(env, w) {
			t.Errorf("env %v lacks %s", env, w)
		}
	}
}

// TestContainerGPUImage runs `nvidia-smi -L` in a plain image (no CUDA, no
// driver) holding one of the fake host's two GPUs: the stand-in nvidia-smi
// (the static toolbox) is mounted from the host and lists exactly one
// device it can open; the libraries are in /usr/local/nvidia/lib64 and the
// image's ldcache now finds them.
func TestContainerGPUImage(t *testing.T) {
	requireContainers(t)
	tb := buildToolbox(t)
	host := gputest.Devices(t)
	host.InstallDriver(t, tb)
	d := newTestDriver(t, func(c *Config) { c.ShimPath = tb })
	withCache := pushImage(t, toolboxImageWith(t, map[string][]byte{
		"etc/ld.so.cache": gpu.EncodeLDCache([]gpu.LDEntry{{Name: "libc.so.6", Path: "/lib/libc.so.6", Flags: 0x0303}}),
	}))
	plain := pushToolbox(t)
	runGPU := func(img string, argv ...string) string {
		t.Helper()
		task := newTask(t, testID(t), fsm.JobSpec{Image: img, Command: argv})
		task.GPUs, task.GPURoot = []fsm.GPU{host.GPUs[1]}, host.Dir
		h, err := d.Start(context.Background(), task)
		if err != nil {
			t.Fatalf("%v: %v", argv, err)
		}
		st := waitFor(t, h)
		h.Destroy()
		out := readFile(t, task.Stdout.Name())
		if st.ExitCode != 0 {
			t.Fatalf("%v: exit %d: %s %s", argv, st.ExitCode, out, readFile(t, task.Stderr.Name()))
		}
		return out
	}
	if out := runGPU(withCache, "nvidia-smi", "-L"); out != "GPU 0: stand-in (/dev/nvidia0)\n" {
		t.Errorf("nvidia-smi -L printed %q, want exactly the one GPU held", out)
	}
	libs := runGPU(withCache, "toolbox", "ls", gpu.ContainerLibDir)
	if want := "libcuda.so\nlibcuda.so.1\nlibcuda.so." + gputest.Version + "\nlibnvidia-ml.so.1\nlibnvidia-ml.so." + gputest.Version + "\n"; libs != want {
		t.Errorf("%s holds\n%s\nwant\n%s", gpu.ContainerLibDir, libs, want)
	}
	if out := runGPU(withCache, "toolbox", "cat", gpu.ContainerLibDir+"/libcuda.so.1"); out != "fake libcuda.so."+gputest.Version {
		t.Errorf("libcuda.so.1 in the container reads %q, want the host's file", out)
	}
	es, err := gpu.ParseLDCache([]byte(runGPU(withCache, "toolbox", "cat", "/etc/ld.so.cache")))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name+" => "+e.Path)
	}
	for _, w := range []string{"libcuda.so.1 => /usr/local/nvidia/lib64/libcuda.so.1", "libc.so.6 => /lib/libc.so.6"} {
		if !slices.Contains(names, w) {
			t.Errorf("the container's ldcache %v lacks %s", names, w)
		}
	}
	env := strings.Split(runGPU(plain, "toolbox", "env"), "\n")
	for _, w := range []string{"LD_LIBRARY_PATH=/usr/local/nvidia/lib64", "CUDA_VISIBLE_DEVICES=0", "CUDA_DEVICE_ORDER=PCI_BUS_ID", "FOREMAN_GPU_UUIDS=" + host.GPUs[1].UUID} {
		if !slices.Contains(env, w) {
			t.Errorf("an image without an ldcache: env %v lacks %s", env, w)
		}
	}
}

func writeFile(t testing.TB, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestContainerGPUCDI: on a node with a CDI spec for nvidia.com/gpu the
// container gets what the spec names for the held GPU (by UUID, else by
// index) instead of the built-in recipe: its device nodes (no nvidia-uvm
// here, as the spec lists none), mounts, env and a createContainer hook
// that really runs; foreman's GPU variables win over the spec's. A held
// GPU the spec does not name is a clear start error.
func TestContainerGPUCDI(t *testing.T) {
	requireContainers(t)
	host := gputest.Devices(t)
	d := newTestDriver(t, nil)
	g0, g1 := host.GPUs[0], host.GPUs[1]
	hookOut := filepath.Join(t.TempDir(), "hook-ran")
	writeFile(t, host.Path("usr/share/cdi-test/file"), []byte("mounted by cdi\n"))
	writeFile(t, host.Path("usr/bin/cdi-hook"), []byte("#!/bin/sh\ncat > "+hookOut+"\n"))
	os.Chmod(host.Path("usr/bin/cdi-hook"), 0o755)
	writeFile(t, host.Path("etc/cdi/nvidia.yaml"), []byte(`cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "`+g0.UUID+`"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia1
- name: "1"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
containerEdits:
  env:
  - NVIDIA_VISIBLE_DEVICES=void
  - FROM_CDI=yes
  deviceNodes:
  - path: /dev/nvidiactl
  mounts:
  - hostPath: /usr/share/cdi-test/file
    containerPath: /tmp/cdi-file
    options: [ro, nosuid, nodev, bind]
  hooks:
  - hookName: createContainer
    path: /usr/bin/cdi-hook
`))
	script := "ls /dev | grep nvidia\n" + gputest.OpenScript("/dev/nvidia0") + "cat /tmp/cdi-file\necho $FROM_CDI $NVIDIA_VISIBLE_DEVICES $CUDA_VISIBLE_DEVICES\n"
	task := newTask(t, testID(t), fsm.JobSpec{Command: sh(script)})
	task.GPUs, task.GPURoot = []fsm.GPU{g1}, host.Dir // by index: the spec has no entry for its UUID
	h, err := d.Start(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	st := waitFor(t, h)
	h.Destroy()
	out := readFile(t, task.Stdout.Name())
	want := "nvidia0\nnvidiactl\n/dev/nvidia0 ok\nmounted by cdi\nyes " + g1.UUID + " 0\n"
	if st.ExitCode != 0 || out != want {
		t.Errorf("exit %d, job printed\n%s\nwant\n%s\nstderr: %s", st.ExitCode, out, want, readFile(t, task.Stderr.Name()))
	}
	if b, err := os.ReadFile(hookOut); err != nil || !strings.Contains(string(b), `"id":"`+task.ID+`"`) {
		t.Errorf("the createContainer hook did not get the container's state: %q %v", b, err)
	}

	task = newTask(t, testID(t), fsm.JobSpec{Command: sh("true")})
	host.GPUs[1].UUID = "GPU-not-in-the-spec"
	host.GPUs[1].Index = 7
	task.GPUs, task.GPURoot = []fsm.GPU{host.GPUs[1]}, host.Dir
	_, err = d.Start(context.Background(), task)
	assertErrorIs(t, err, ErrStart, "nvidia.com/gpu=7: no such device in "+host.Path("etc/cdi/nvidia.yaml")+" (it has: "+g0.UUID+", 1)")
}

// TestContainerGPULoader checks the merged ldcache with glibc's own loader:
// a program linked against libcuda.so.1 (a stub built here, installed as
// the fake host's driver library) runs in an image that has glibc and its
// own /etc/ld.so.cache but no libcuda and no LD_LIBRARY_PATH, so it starts
// only if the loader's binary search of the container's cache finds the
// library in /usr/local/nvidia/lib64 (it does not when the cache is sorted
// the other way round).
func TestContainerGPULoader(t *testing.T) {
	requireContainers(t)
	gcc, err := osexec.LookPath("gcc")
	if err != nil {
		gputest.Unavailable(t, "no gcc to build the stub libcuda")
	}
	tb := buildToolbox(t)
	host := gputest.Devices(t)
	host.InstallDriver(t, tb)
	src := t.TempDir()
	lib := host.Path(gputest.LibDir + "/libcuda.so." + gputest.Version)
	writeFile(t, src+"/cuda.c", []byte("int cuInit(unsigned flags) { return 42; }\n"))
	writeFile(t, src+"/app.c", []byte("#include <stdio.h>\nint cuInit(unsigned);\nint main(void) { printf(\"cuInit=%d\\n\", cuInit(0)); return 0; }\n"))
	for _, args := range [][]string{
		{"-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", lib, src + "/cuda.c"},
		{"-o", src + "/app", src + "/app.c", "-L" + filepath.Dir(lib), "-l:" + filepath.Base(lib)},
	} {
		if out, err := osexec.Command(gcc, args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %v: %v\n%s", args, err, out)
		}
	}
	files := map[string][]byte{}
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	files["app"] = read(src + "/app")
	// The program's glibc, from this host, at the same paths.
	out, err := osexec.Command("ldd", src+"/app").Output()
	if err != nil {
		t.Skipf("ldd: %v", err)
	}
	var cache []gpu.LDEntry
	for _, f := range strings.Fields(string(out)) {
		if !strings.HasPrefix(f, "/") || strings.Contains(f, "libcuda") || strings.HasPrefix(f, src) {
			continue
		}
		files[strings.TrimPrefix(f, "/")] = read(f)
		if base := filepath.Base(f); strings.HasPrefix(base, "libc.") {
			cache = append(cache, gpu.LDEntry{Name: base, Path: f, Flags: 0x0303})
		}
	}
	// The image's cache lists this host's ~500 libraries (most absent from
	// the image: the loader goes by the cache, so it finds libc), enough
	// that a cache sorted other than glibc binary-searches it would miss.
	if hostCache, err := os.ReadFile("/etc/ld.so.cache"); err == nil {
		if es, err := gpu.ParseLDCache(hostCache); err == nil {
			cache = append(cache, es...)
		}
	}
	files["etc/ld.so.cache"] = gpu.EncodeLDCache(cache)
	ref := pushImage(t, toolboxImageWith(t, files))
	d := newTestDriver(t, func(c *Config) { c.ShimPath = tb })
	for _, gpus := range [][]fsm.GPU{{host.GPUs[0]}, nil} {
		task := newTask(t, testID(t), fsm.JobSpec{Image: ref, Command: []string{"/app"}})
		task.GPUs, task.GPURoot = gpus, host.Dir
		h, err := d.Start(context.Background(), task)
		if err != nil {
			t.Fatal(err)
		}
		st := waitFor(t, h)
		h.Destroy()
		stdout, stderr := readFile(t, task.Stdout.Name()), readFile(t, task.Stderr.Name())
		if gpus != nil && (st.ExitCode != 0 || stdout != "cuInit=42\n") {
			t.Errorf("with a GPU: exit %d, stdout %q, stderr %q; want the stub's cuInit=42", st.ExitCode, stdout, stderr)
		}
		// Without GPUs the image is as it was: no driver library to load.
		if gpus == nil && (st.ExitCode == 0 || !strings.Contains(stderr, "libcuda.so.1")) {
			t.Errorf("without GPUs: exit %d, stdout %q, stderr %q; want the loader to miss libcuda.so.1", st.ExitCode, stdout, stderr)
		}
	}
}
