package gpu

import (
	"slices"
	"strconv"
	"strings"

	"github.com/foreman-sched/foreman/fsm"
)

// The variables a job on an NVIDIA host gets. The job's own values for
// these names are dropped: the devices are the leader's choice.
const (
	EnvCUDAVisible   = "CUDA_VISIBLE_DEVICES"
	EnvCUDAOrder     = "CUDA_DEVICE_ORDER"
	EnvNVIDIAVisible = "NVIDIA_VISIBLE_DEVICES"
	EnvUUIDs         = "FOREMAN_GPU_UUIDS"
	EnvCount         = "FOREMAN_GPU_COUNT"
)

// Names are the variables Env sets (for a job's spec they are reserved).
var Names = []string{EnvCUDAVisible, EnvCUDAOrder, EnvNVIDIAVisible, EnvUUIDs, EnvCount}

// Ordinals says how CUDA_VISIBLE_DEVICES numbers the devices a job holds.
type Ordinals int

const (
	// Relative numbers them 0..n-1: right when the job can open only its
	// own devices (a container's /dev, or a device cgroup that denies the
	// others), since CUDA then enumerates only those.
	Relative Ordinals = iota
	// HostIndex uses the host's indices: the job sees every device (a
	// process job the agent could not confine), so ordinal 0 would be the
	// host's first GPU, not the job's.
	HostIndex
)

// Env returns env with the GPU variables of a job holding gpus on a host
// with NVIDIA devices (nvidia: Majors.Present). The devices are listed in
// the host's index (PCI bus) order, so the i-th UUID of FOREMAN_GPU_UUIDS is
// CUDA device i. UUIDs never go into CUDA_VISIBLE_DEVICES: they break
// torch.cuda.device_count() (pytorch#90543) and vLLM.
//
// A job with no GPUs on an NVIDIA host gets CUDA_VISIBLE_DEVICES="" (CUDA
// and PyTorch then see no device instead of failing on a denied one) and
// NVIDIA_VISIBLE_DEVICES=void (what CDI specs and the device plugin set, so
// a nested NVIDIA runtime or an image's baked-in "all" injects nothing). On
// a host without NVIDIA devices env is returned as it is.
func Env(env []string, gpus []fsm.GPU, nvidia bool, ord Ordinals) []string {
	if !nvidia && len(gpus) == 0 {
		return env
	}
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(Names, k)
	})
	if len(gpus) == 0 {
		return append(out, EnvCUDAVisible+"=", EnvNVIDIAVisible+"=void", EnvCount+"=0")
	}
	var ords, uuids []string
	for i, g := range sorted(gpus) {
		if ord == HostIndex {
			i = g.Index
		}
		ords = append(ords, strconv.Itoa(i))
		uuids = append(uuids, g.UUID)
	}
	return append(out,
		EnvCUDAVisible+"="+strings.Join(ords, ","),
		EnvCUDAOrder+"=PCI_BUS_ID",
		EnvNVIDIAVisible+"="+strings.Join(uuids, ","),
		EnvUUIDs+"="+strings.Join(uuids, ","),
		EnvCount+"="+strconv.Itoa(len(gpus)),
	)
}
