package workload

import (
	"context"
	"errors"
	"hash/fnv"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/foreman-sched/foreman/jepsen/checker"
)

// GPUProbeScript is the body of every GPU-workload job. It appends
// "<kind> <job> <attempt> <token> <node> <uuids> <share> <ns>" to
// gpu-<node>.log (uuids: its FOREMAN_GPU_UUIDS, "-" when empty; share:
// its FOREMAN_GPU_MEMORY_MIB, "-" for whole GPUs): start, a tick every
// 0.5 s, end. It writes the execution checker's records too (exec-<node>.log
// and the fencing sink), so the run is checked per job as well as per
// device.
const GPUProbeScript = `d="$JEPSEN_DIR"; n="$FOREMAN_NODE"
r="$FOREMAN_JOB_ID $FOREMAN_ATTEMPT $FOREMAN_FENCING_TOKEN $n"
g="${FOREMAN_GPU_UUIDS:--} ${FOREMAN_GPU_MEMORY_MIB:--}"
echo "start $r $g $(date +%s%N)" >> "$d/gpu-$n.log"
echo "start $r $(date +%s%N)" >> "$d/exec-$n.log"
i=0
while [ "$i" -lt "$JEPSEN_TICKS" ]; do
  sleep 0.5; echo "tick $r $g $(date +%s%N)" >> "$d/gpu-$n.log"; echo "tick $r $(date +%s%N)" >> "$d/exec-$n.log"; i=$((i+1))
done
echo "end $r $g $(date +%s%N)" >> "$d/gpu-$n.log"
echo "end $r $(date +%s%N)" >> "$d/exec-$n.log"
echo "effect $r $(date +%s%N)" >> "$d/sink.log"
`

// GPU is the submit workload with jobs that ask for 1, 2 or 4 whole GPUs,
// or a VRAM share of one (10 to 40 GiB), on agents that each run on a fake
// GPU host (rig.Cluster.GPUs devices of their own, 80 GB each). Every job records the UUIDs it was handed and runs 1–3 s
// (10 s one time in six), so devices are freed and handed on many times a
// run, across the fault.
// Its checkers: submit-queue, gpu (no device held whole by two live
// executions at once, nor whole beside a share; the shares live on a
// device at once never past its memory; each execution's devices and
// share are its attempt's record), execution and the reads.
type GPU struct {
	*Submit
	// NodeGPUs lists a node's UUIDs (the rig's fake hosts).
	NodeGPUs func(node string) []string
	// DeviceMiB is every fake device's memory (0: shares' sums unchecked).
	DeviceMiB int64
}

// GPUsPerNode is the size of each node's fake GPU host in the gpu
// workload: 4, so 4-GPU jobs take a whole node and 1- and 2-GPU jobs pack.
const GPUsPerNode = 4

// NewGPU returns the GPU workload.
func NewGPU(nodeGPUs func(node string) []string) *GPU {
	g := &GPU{Submit: NewSubmit(), NodeGPUs: nodeGPUs}
	g.Submit.Interval, g.Submit.SubmitRatio = 500*time.Millisecond, 0.5
	g.Submit.Spec = g.spec
	return g
}

func (g *GPU) Name() string { return "gpu" }

// gpusFor derives a key's request from the key (a retry sends the same
// spec): a third of the jobs ask for a VRAM share of 10, 20, 30 or 40 GiB
// (so two to eight share an 80 GB device and sizes mix), the others 1 GPU
// half the time, 2 a third, 4 the rest; 1, 2 or 3 s, and 10 s one time in
// six, so some jobs outlive the 6 s lease of a killed or cut off node and
// must be fenced before their devices (or memory) go to someone else.
func gpusFor(key string) (gpus, ticks int, shareMiB int64) {
	h := fnv.New64a()
	h.Write([]byte("gpu/" + key))
	v := h.Sum64()
	gpus = []int{1, 1, 1, 2, 2, 4}[v%6]
	ticks = []int{2, 4, 6, 2, 4, 20}[(v/6)%6]
	if (v/36)%3 == 0 {
		gpus, shareMiB = 1, int64([]int{10, 20, 30, 40}[(v/108)%4])*1024
	}
	return gpus, ticks, shareMiB
}

func (g *GPU) spec(env *Env, key string) map[string]any {
	gpus, ticks, share := gpusFor(key)
	name, res := "jepsen-gpu"+strconv.Itoa(gpus)+"-"+key, map[string]any{"gpus": gpus}
	if share > 0 {
		name, res = "jepsen-gpushare"+strconv.FormatInt(share>>10, 10)+"-"+key, map[string]any{"gpu_memory": share}
	}
	return map[string]any{
		"name":         name,
		"command":      []string{"/bin/sh", "-c", GPUProbeScript},
		"driver":       "process",
		"max_attempts": 5,
		"resources":    res,
		"env": map[string]string{
			"JEPSEN_DIR":   env.Dir,
			"JEPSEN_TICKS": strconv.Itoa(ticks),
			"PATH":         "/usr/local/bin:/usr/bin:/bin",
		},
	}
}

func (g *GPU) Run(ctx context.Context, env *Env) { g.Submit.Run(ctx, env) }

func (g *GPU) Drain(ctx context.Context, env *Env, d time.Duration) error {
	return g.Submit.Drain(ctx, env, d)
}

// Check runs submit-queue, gpu, execution and the reads.
func (g *GPU) Check(env *Env, opt CheckOptions) []checker.Result {
	ops := env.Rec.Ops()
	reads := checker.Reads(ops, checker.LinearOptions{Timeout: opt.Timeout, HTMLPath: opt.HTMLPath, Events: opt.Events})
	if g.NoFinal() {
		return []checker.Result{reads}
	}
	final := g.Final()
	requested, shares := map[string]int{}, map[string]int64{}
	want := func(id, key string) {
		n, _, share := gpusFor(key)
		if share > 0 {
			shares[id] = share
			return
		}
		requested[id] = n
	}
	for key, id := range g.Acked() {
		want(id, key)
	}
	for _, j := range final { // recovered jobs (never acknowledged) too
		if j.IdempotencyKey != "" && !strings.HasPrefix(j.IdempotencyKey, checker.LoadKeyPrefix) {
			want(j.ID, j.IdempotencyKey)
		}
	}
	end := env.Rec.Base().Add(time.Duration(g.EndNs())).UnixNano()
	tick := TickEvery + 500*time.Millisecond
	recs, torn, err := checker.ReadFiles(filepath.Join(env.Dir, "gpu-*.log"), checker.ParseGPURecords)
	gr := checker.GPU(recs, final, checker.GPUOptions{ClockBound: opt.ClockBound, EndOfTest: end, TickBound: tick,
		Requested: requested, NodeGPUs: g.NodeGPUs, RequestedShare: shares, DeviceMiB: g.deviceMiB})
	if err != nil {
		gr.Valid = false
		gr.Errors = append(gr.Errors, "reading records: "+err.Error())
	}
	gr.Stats["torn_records"] = torn
	if len(recs) == 0 {
		gr.Valid = false
		gr.Errors = append(gr.Errors, errors.New("no GPU records at all: the probes never ran").Error())
	}
	exec, torn1, err1 := checker.ReadRecordFiles(filepath.Join(env.Dir, "exec-*.log"))
	sink, torn2, err2 := checker.ReadRecordFiles(filepath.Join(env.Dir, "sink.log"))
	ex := checker.Execution(exec, sink, final, checker.ExecOptions{ClockBound: opt.ClockBound, EndOfTest: end, TickBound: tick})
	if err := errors.Join(err1, err2); err != nil {
		ex.Valid = false
		ex.Errors = append(ex.Errors, "reading records: "+err.Error())
	}
	ex.Stats["torn_records"] = torn1 + torn2
	sizes := map[int]int{}
	for _, n := range requested {
		sizes[n]++
	}
	gr.Stats["jobs_1gpu"], gr.Stats["jobs_2gpu"], gr.Stats["jobs_4gpu"], gr.Stats["jobs_share"] = sizes[1], sizes[2], sizes[4], len(shares)
	return []checker.Result{checker.Queue(ops, final), gr, ex, reads}
}

func (g *GPU) deviceMiB(string) int64 { return g.DeviceMiB }
