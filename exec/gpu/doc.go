// Package gpu is the node's side of NVIDIA GPUs.
//
// It finds them (detection: /proc/driver/nvidia, sysfs, nvidia-smi) and
// gives a job exactly the devices the leader picked for its attempt
// (fsm.Attempt.GPUs): the environment (env.go), the device nodes and
// device-cgroup rules (devices.go, cgroup.go), the driver's user-space
// libraries for containers (libs.go, ldcache.go) and CDI specs (cdi.go).
//
// Everything reads below a root directory ("/" in production), so tests
// build a fake root whose "GPUs" are ordinary character devices and the
// kernel's device cgroup is exercised for real. No cgo: the binary stays
// static, so NVML is never linked.
package gpu
