package exec

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/foreman-sched/foreman/exec/gpu"
	"github.com/foreman-sched/foreman/exec/gpu/gputest"
	"github.com/foreman-sched/foreman/fsm"
)

// TestProcessGPUIsolation runs process jobs on a fake GPU host whose
// "GPUs" are real character devices: the kernel's device cgroup must let a
// job open exactly the devices it holds (plus nvidiactl and nvidia-uvm
// when it holds any) and refuse the others with EPERM. Run on the v1
// devices controller and, where the host mounts cgroup2 beside v1 (hybrid),
// on v2's eBPF device filter.
func TestProcessGPUIsolation(t *testing.T) {
	root := gputest.Devices(t)
	mounts := map[string]func() (string, bool, error){"v1": gpu.DevicesMount}
	if cgroup2(t, "/sys/fs/cgroup/unified") {
		mounts["v2"] = func() (string, bool, error) { return "/sys/fs/cgroup/unified", true, nil }
	}
	if cgroup2(t, "/sys/fs/cgroup") {
		mounts = map[string]func() (string, bool, error){"v2": gpu.DevicesMount}
	}
	g0, g1 := root.GPUs[0], root.GPUs[1] // /dev/nvidia1 and /dev/nvidia0
	dev := func(p string) string { return root.Path("dev/" + p) }
	cases := []struct {
		name string
		gpus []fsm.GPU
		open map[string]string // path -> "ok", "denied" or "allowed" (opened past the cgroup, no driver)
		env  []string
	}{
		{"none", nil,
			map[string]string{"nvidia0": "denied", "nvidia1": "denied", "nvidiactl": "denied", "nvidia-uvm": "denied", "nvidia-uvm-tools": "denied"},
			[]string{"CUDA_VISIBLE_DEVICES=", "NVIDIA_VISIBLE_DEVICES=void", "FOREMAN_GPU_COUNT=0"}},
		{"index1", []fsm.GPU{g1},
			map[string]string{"nvidia0": "ok", "nvidia1": "denied", "nvidiactl": "allowed", "nvidia-uvm": "allowed", "nvidia-uvm-tools": "allowed"},
			[]string{"CUDA_VISIBLE_DEVICES=0", "CUDA_DEVICE_ORDER=PCI_BUS_ID", "NVIDIA_VISIBLE_DEVICES=" + g1.UUID, "FOREMAN_GPU_UUIDS=" + g1.UUID, "FOREMAN_GPU_COUNT=1"}},
		{"both", []fsm.GPU{g1, g0},
			map[string]string{"nvidia0": "ok", "nvidia1": "ok", "nvidiactl": "allowed"},
			[]string{"CUDA_VISIBLE_DEVICES=0,1", "NVIDIA_VISIBLE_DEVICES=" + g0.UUID + "," + g1.UUID}},
	}
	for mode, mount := range mounts {
		t.Run(mode, func(t *testing.T) {
			old := devicesMount
			devicesMount = mount
			t.Cleanup(func() { devicesMount = old })
			t.Cleanup(func() {
				dir, _, _ := mount()
				os.Remove(dir + "/foreman-test/process")
				os.Remove(dir + "/foreman-test")
			})
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					var paths []string
					for p := range c.open {
						paths = append(paths, dev(p))
					}
					slices.Sort(paths)
					script := gputest.OpenScript(paths...) + "env | grep -E '^(CUDA|NVIDIA|FOREMAN_GPU)' | sort\n"
					task := &Task{
						ID: "gpu-" + mode + "-" + c.name, Spec: fsm.JobSpec{Command: []string{"sh", "-c", script}},
						Env: []string{"PATH=" + defaultPath, "CUDA_VISIBLE_DEVICES=7"}, WorkDir: t.TempDir(),
						GPUs: c.gpus, GPURoot: root.Dir, DeviceCgroup: "/foreman-test/process",
					}
					out, dc := runProcess(t, task)
					for p, want := range c.open {
						line := dev(p) + " " + want
						switch want {
						case "denied":
							line = dev(p) + " Operation not permitted"
						case "allowed":
							line = dev(p) + " "
						}
						if !strings.Contains(out, line) || (want == "allowed" && strings.Contains(out, dev(p)+" Operation not permitted")) {
							t.Errorf("%s: want %s; job printed:\n%s", p, want, out)
						}
					}
					for _, kv := range c.env {
						if !slices.Contains(strings.Split(out, "\n"), kv) {
							t.Errorf("env %s missing; job printed:\n%s", kv, out)
						}
					}
					if strings.Contains(out, "CUDA_VISIBLE_DEVICES=7") {
						t.Errorf("the spec's CUDA_VISIBLE_DEVICES was kept:\n%s", out)
					}
					if _, err := os.Stat(dc); !os.IsNotExist(err) {
						t.Errorf("device cgroup %s left after Destroy (err %v)", dc, err)
					}
				})
			}
		})
	}
}

// TestWorkerGPUAttempt: an attempt whose Attempt.GPUs the leader set runs
// through the worker and a real supervisor (the job launcher, the task
// file) with exactly its device and the GPU environment.
func TestWorkerGPUAttempt(t *testing.T) {
	root := gputest.Devices(t)
	cfg := testConfig(t, dataDir(t))
	cfg.GPURoot = root.Dir
	cfg.JobsCgroup = "/foreman-test-worker"
	t.Cleanup(func() { // after the worker's cleanup: its supervisors exit, then the cgroups go
		cpu, _ := cpuCgroupRoot()
		dev, _, _ := gpu.DevicesMount()
		waitFor(t, waitShort, "the test's cgroups to be removable", func() bool {
			for _, d := range []string{cpu, dev} {
				os.Remove(d + cfg.JobsCgroup + "/process")
				os.Remove(d + cfg.JobsCgroup)
			}
			_, err := os.Stat(cpu + cfg.JobsCgroup)
			return err != nil
		})
	})
	// A device cgroup left by a supervisor that died: removed at start.
	dev, _, _ := gpu.DevicesMount()
	stale := filepath.Join(dev, cfg.JobsCgroup, "process", TaskID("job-dead", 1))
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	state := newFakeState()
	h := startWorker(t, state, cfg)
	g := root.GPUs[0] // minor 1
	script := gputest.OpenScript(root.Path("dev/nvidia1"), root.Path("dev/nvidia0")) + `echo "$CUDA_VISIBLE_DEVICES $FOREMAN_GPU_UUIDS"`
	state.assign("job-gpu", fsm.JobSpec{Command: sh(script)}, func(a *Assignment) { a.Attempt.GPUs = []fsm.GPU{g} })
	r := h.waitFinal(t, "job-gpu", waitShort)
	if r.State != fsm.AttemptSucceeded {
		t.Fatalf("job %s: %s", r.State, r.Reason)
	}
	out := readFile(t, filepath.Join(h.dir("job-gpu"), "stdout.log"))
	want := root.Path("dev/nvidia1") + " ok\n" + root.Path("dev/nvidia0") + " Operation not permitted\n0 " + g.UUID + "\n"
	if out != want {
		t.Errorf("job printed\n%s\nwant\n%s", out, want)
	}
	if _, err := os.Stat(filepath.Join(dev, cfg.JobsCgroup, "process", TaskID("job-gpu", 1))); !os.IsNotExist(err) {
		t.Errorf("the attempt's device cgroup is still there (err %v)", err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("a dead attempt's device cgroup is still there (err %v)", err)
	}
}

// TestProcessGPUNoDriver: on a host without NVIDIA devices a job's
// environment is left alone, and an attempt holding a GPU there fails.
func TestProcessGPUNoDriver(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "proc"), 0o755)
	os.WriteFile(filepath.Join(root, "proc/devices"), []byte("Character devices:\n  1 mem\n"), 0o644)
	env := []string{"PATH=" + defaultPath, "CUDA_VISIBLE_DEVICES=3"}
	got, dc, err := processGPU(&Task{ID: "x", Env: env, GPURoot: root, DeviceCgroup: "/foreman-test/process"})
	if err != nil || dc != nil || !slices.Equal(got, env) {
		t.Errorf("no NVIDIA host: env %v, cgroup %v, err %v; want the env unchanged", got, dc, err)
	}
	_, _, err = processGPU(&Task{ID: "x", Env: env, GPURoot: root, GPUs: []fsm.GPU{{UUID: "GPU-x"}}})
	if err == nil || !strings.Contains(err.Error(), "GPU-x") {
		t.Errorf("a GPU attempt on a host without NVIDIA devices: err %v, want one naming the GPU", err)
	}
}

// runProcess runs task with the process driver to its end and returns its
// output and the directory its device cgroup had.
func runProcess(t *testing.T, task *Task) (out, cgroupDir string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	task.Stdout, task.Stderr = w, w
	h, err := NewProcessDriver().Start(context.Background(), task)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if ph := h.(*processHandle); ph.dc != nil {
		cgroupDir = ph.dc.Dir
	} else {
		t.Fatal("no device cgroup on a GPU host")
	}
	b, _ := io.ReadAll(r)
	if st := h.Wait(); st.ExitCode != 0 {
		t.Errorf("job exit %d: %s", st.ExitCode, b)
	}
	if err := h.Destroy(); err != nil {
		t.Errorf("Destroy: %v", err)
	}
	return string(b), cgroupDir
}

func cgroup2(t *testing.T, dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
}

// BenchmarkProcessStartGPU is BenchmarkProcessStart's `true` on a fake GPU
// host: the device cgroup (made, its rules applied, joined, removed) is
// what a process job on an NVIDIA host pays over one elsewhere.
func BenchmarkProcessStartGPU(b *testing.B) {
	root := gputest.Devices(b)
	work := b.TempDir()
	for _, held := range []int{0, 1} {
		b.Run(strconv.Itoa(held)+"gpu", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				h, err := NewProcessDriver().Start(context.Background(), &Task{
					ID: "bench-gpu", Spec: fsm.JobSpec{Command: []string{"true"}}, Env: []string{"PATH=" + defaultPath},
					WorkDir: work, Stdout: os.Stderr, Stderr: os.Stderr,
					GPUs: root.GPUs[:held], GPURoot: root.Dir, DeviceCgroup: "/foreman-test/process",
				})
				if err != nil {
					b.Fatal(err)
				}
				h.Wait()
				if err := h.Destroy(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	dir, _, _ := gpu.DevicesMount()
	os.Remove(dir + "/foreman-test/process")
	os.Remove(dir + "/foreman-test")
}

// TestProcessGPUShareDmem: a share job on a host whose kernel lists its
// device in dmem.capacity gets dmem.max = its share in its own cgroup,
// before it starts. This kernel has no dmem controller, so the fake GPU
// root's cgroup files are plain files: what is checked is the decision and
// the path and value written, not the kernel's enforcement.
func TestProcessGPUShareDmem(t *testing.T) {
	root := gputest.Devices(t)
	g := root.GPUs[0]
	share := &fsm.GPUShare{GPU: g, MemoryMiB: 20480}
	cgDir := root.Path(gpu.CgroupRoot)
	if err := os.MkdirAll(cgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dir, _, _ := gpu.DevicesMount()
		os.Remove(dir + "/foreman-test-dmem/process")
		os.Remove(dir + "/foreman-test-dmem")
	})
	run := func(id string) string {
		task := &Task{
			ID: id, Spec: fsm.JobSpec{Command: []string{"sh", "-c", "true"}},
			Env: []string{"PATH=" + defaultPath}, WorkDir: t.TempDir(),
			GPUs: []fsm.GPU{g}, GPUShare: share, GPURoot: root.Dir, DeviceCgroup: "/foreman-test-dmem/process",
		}
		runProcess(t, task)
		return filepath.Join(cgDir, "foreman-test-dmem/process", id, "dmem.max")
	}
	// No dmem.capacity: nothing written (the watchdog's case).
	if p := run("share-nodmem"); fileExists(p) {
		t.Fatalf("%s written without dmem.capacity", p)
	}
	capLine := gpu.DmemRegion(g.BusID) + " 150754820096\n"
	if err := os.WriteFile(filepath.Join(cgDir, "dmem.capacity"), []byte(capLine), 0o644); err != nil {
		t.Fatal(err)
	}
	p := run("share-dmem")
	b, err := os.ReadFile(p)
	if want := gpu.DmemRegion(g.BusID) + " 21474836480"; err != nil || string(b) != want {
		t.Fatalf("%s = %q (%v), want %q", p, b, err, want)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
