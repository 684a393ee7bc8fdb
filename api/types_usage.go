package api

import "time"

// Usage is what attempts used, summed (GET /v1/usage): integers in
// milliseconds of wall time; "X_ms" fields are X held for that long.
type Usage struct {
	Attempts int64 `json:"attempts"`
	WallMs   int64 `json:"wall_ms"`
	// CPUUsedMs is the CPU time the nodes measured (cgroup usage).
	CPUUsedMs int64 `json:"cpu_used_ms"`
	// CPUReqMs is requested cores × wall, in core-milliseconds.
	CPUReqMs     int64 `json:"cpu_requested_ms"`
	MemReqMiBMs  int64 `json:"memory_requested_mib_ms"`
	MemUsedMiBMs int64 `json:"memory_used_mib_ms"` // peak MiB × wall: an upper bound
	PeakMemoryB  int64 `json:"peak_memory_bytes"`  // the largest peak, not a sum
	GPUMs        int64 `json:"gpu_ms"`             // whole GPUs × wall
	GPUMemMiBMs  int64 `json:"gpu_memory_mib_ms"`  // GPU memory share × wall
}

// UsageRow is one key's use in one period of a UsageReport, with the
// sums in human units beside the exact ones.
type UsageRow struct {
	// Start is the period's start (step=total: the report's since).
	Start time.Time `json:"start"`
	// Key is the namespace, user or label value the row is for ("" for
	// jobs without that label; "(other)" for combinations folded past the
	// per-hour bound).
	Key                       string  `json:"key"`
	Usage                     Usage   `json:"usage"`
	CPUSeconds                float64 `json:"cpu_seconds"`
	CPURequestedSeconds       float64 `json:"cpu_requested_seconds"`
	MemoryGiBSeconds          float64 `json:"memory_gib_seconds"`
	MemoryGiBSecondsRequested float64 `json:"memory_gib_seconds_requested"`
	GPUSeconds                float64 `json:"gpu_seconds"`
	GPUMemoryGiBSeconds       float64 `json:"gpu_memory_gib_seconds"`
	WallSeconds               float64 `json:"wall_seconds"`
}

// NewUsageRow fills the human units of a row from u.
func NewUsageRow(start time.Time, key string, u Usage) UsageRow {
	const s, gibS = 1e3, 1024 * 1e3
	return UsageRow{
		Start: start, Key: key, Usage: u,
		CPUSeconds: float64(u.CPUUsedMs) / s, CPURequestedSeconds: float64(u.CPUReqMs) / s,
		MemoryGiBSeconds: float64(u.MemUsedMiBMs) / gibS, MemoryGiBSecondsRequested: float64(u.MemReqMiBMs) / gibS,
		GPUSeconds: float64(u.GPUMs) / s, GPUMemoryGiBSeconds: float64(u.GPUMemMiBMs) / gibS,
		WallSeconds: float64(u.WallMs) / s,
	}
}

// UsageReport is the reply to GET /v1/usage.
type UsageReport struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	By    string    `json:"by"`
	Step  string    `json:"step"`
	// Namespace is the one namespace asked for ("": every one the token
	// may read).
	Namespace string `json:"namespace,omitempty"`
	// Enabled is whether accounting is on; Labels are the label keys it
	// splits by (by=label:KEY takes one of them).
	Enabled bool       `json:"enabled"`
	Labels  []string   `json:"labels"`
	Rows    []UsageRow `json:"rows"`
}

// UsageQuery selects a usage report; empty fields take the server's
// defaults (since 30d, until now, by namespace, step total).
type UsageQuery struct {
	// Since and Until are a duration back from now ("30d", "12h"), an
	// RFC 3339 time or a date (YYYY-MM-DD, UTC).
	Since, Until string
	// By is namespace, user or label:KEY.
	By string
	// Step is hour, day or total.
	Step string
	// Namespace limits the report to one namespace ("*": every one, which
	// needs a grant on every namespace).
	Namespace string
}
