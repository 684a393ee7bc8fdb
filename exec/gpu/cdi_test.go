package gpu_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/exec/gpu"
	"github.com/foreman-sched/foreman/fsm"
)

// nvidiaCDI is shaped like `nvidia-ctk cdi generate` output: every GPU by
// index and UUID, spec-wide nodes, env, mounts and a hook.
const nvidiaCDI = `cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia1
- name: GPU-aaaa
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia1
- name: "1"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
      major: 195
      minor: 0
containerEdits:
  env:
  - NVIDIA_VISIBLE_DEVICES=void
  deviceNodes:
  - path: /dev/nvidiactl
  mounts:
  - hostPath: /usr/lib/libcuda.so.1
    containerPath: /usr/lib/libcuda.so.1
    options: [ro, nosuid, nodev, bind]
  hooks:
  - hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook
    args: [nvidia-cdi-hook, update-ldcache, --folder, /usr/lib]
`

func cdiRoot(t *testing.T, files map[string]string) string {
	root := t.TempDir()
	for p, body := range files {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.WriteFile(full, []byte(body), 0o644)
	}
	return root
}

func TestCDI(t *testing.T) {
	root := cdiRoot(t, map[string]string{
		"etc/cdi/nvidia.yaml":   nvidiaCDI,
		"etc/cdi/other.json":    `{"cdiVersion":"0.6.0","kind":"vendor.com/net","devices":[{"name":"x","containerEdits":{}}]}`,
		"var/run/cdi/README.md": "not a spec",
	})
	specs, err := gpu.LoadCDI(root, gpu.CDIKind)
	if err != nil || len(specs) != 1 {
		t.Fatalf("specs %v, err %v: want the one nvidia.com/gpu spec", specs, err)
	}
	a := fsm.GPU{UUID: "GPU-aaaa", Index: 0}
	b := fsm.GPU{UUID: "GPU-bbbb", Index: 1}
	if n := gpu.CDIName(specs, a); n != "GPU-aaaa" {
		t.Errorf("name of a = %q, want its UUID", n)
	}
	if n := gpu.CDIName(specs, b); n != "1" {
		t.Errorf("name of b (not listed by UUID) = %q, want its index", n)
	}
	// The spec-wide nvidiactl has no numbers and this root has no such
	// node: an error naming it (TestContainerGPUCDI resolves on real nodes).
	_, err = gpu.ResolveCDI(root, specs, []string{"1"})
	if err == nil || !strings.Contains(err.Error(), "/dev/nvidiactl") {
		t.Errorf("a node with no numbers and no host node: err %v", err)
	}
	_, err = gpu.ResolveCDI(root, specs, []string{"GPU-cccc"})
	if err == nil || !strings.Contains(err.Error(), "nvidia.com/gpu=GPU-cccc: no such device in "+filepath.Join(root, "etc/cdi/nvidia.yaml")+" (it has: 0, GPU-aaaa, 1)") {
		t.Errorf("unknown device: err %v", err)
	}
	bad := cdiRoot(t, map[string]string{"etc/cdi/broken.yaml": "kind: [nvidia.com/gpu\n"})
	if _, err := gpu.LoadCDI(bad, gpu.CDIKind); err == nil || !strings.Contains(err.Error(), "broken.yaml") {
		t.Errorf("broken spec: err %v, want one naming the file", err)
	}
	noVersion := cdiRoot(t, map[string]string{"etc/cdi/a.json": `{"kind":"nvidia.com/gpu","devices":[]}`})
	if _, err := gpu.LoadCDI(noVersion, gpu.CDIKind); err == nil || !strings.Contains(err.Error(), "cdiVersion") {
		t.Errorf("spec without cdiVersion: err %v", err)
	}
	if specs, err := gpu.LoadCDI(t.TempDir(), gpu.CDIKind); specs != nil || err != nil {
		t.Errorf("no specs: %v %v", specs, err)
	}
}
