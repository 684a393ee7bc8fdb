package exec

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/foreman-sched/foreman/exec/gpu"
)

// GPU usage on GET /v1/metrics (issue 24): each node's agent asks
// nvidia-smi at scrape time (at most every gpuSampleEvery, each call
// bounded by gpuSampleTimeout: a hung driver costs a scrape its GPU
// series, never the scrape), per device and per job: the memory of every
// compute process, summed by the job its FOREMAN_JOB_ID names. Registered
// only on nodes with NVIDIA devices.
const (
	gpuSampleEvery   = 5 * time.Second
	gpuSampleTimeout = 3 * time.Second
)

var (
	descGPUUtil   = prometheus.NewDesc("foreman_gpu_utilization_ratio", "Fraction of the last sample period a kernel ran on the device (nvidia-smi utilization.gpu).", []string{"node", "uuid"}, nil)
	descGPUMem    = prometheus.NewDesc("foreman_gpu_memory_used_bytes", "Device memory in use.", []string{"node", "uuid"}, nil)
	descGPUTemp   = prometheus.NewDesc("foreman_gpu_temperature_celsius", "Device temperature.", []string{"node", "uuid"}, nil)
	descGPUPower  = prometheus.NewDesc("foreman_gpu_power_watts", "Device power draw.", []string{"node", "uuid"}, nil)
	descGPUECC    = prometheus.NewDesc("foreman_gpu_ecc_uncorrected_errors", "Uncorrected ECC errors since the driver loaded (volatile count).", []string{"node", "uuid"}, nil)
	descJobGPUMem = prometheus.NewDesc("foreman_job_gpu_memory_bytes", "Device memory held by a job's processes, per device.", []string{"node", "job", "uuid"}, nil)
	descJobGPUSM  = prometheus.NewDesc("foreman_job_gpu_sm_ratio", "Fraction of the device's SM time a job's processes used over the last pmon sample (about 1 s), per device.", []string{"node", "job", "uuid"}, nil)
)

// gpuUsage is the process's GPU collector; a Worker on an NVIDIA host adds
// its node.
var gpuUsage = sync.OnceValue(func() *gpuCollector {
	c := &gpuCollector{nodes: map[string]*gpuSource{}}
	prometheus.MustRegister(c)
	return c
})

type gpuCollector struct {
	mu    sync.Mutex
	nodes map[string]*gpuSource
}

// gpuSource is one node's nvidia-smi and its last sample.
type gpuSource struct {
	cfg   gpu.Config
	mu    sync.Mutex // one sample at a time
	at    time.Time
	usage []gpu.Usage
	apps  []gpu.AppUsage
	sm    map[string][]gpu.ProcSM // by device UUID
	err   error                   // why usage and apps are missing
	smErr error                   // why sm is missing
}

func (c *gpuCollector) watch(node string, cfg gpu.Config) (stop func()) {
	c.mu.Lock()
	c.nodes[node] = &gpuSource{cfg: cfg}
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.nodes, node)
		c.mu.Unlock()
	}
}

func (c *gpuCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descGPUUtil, descGPUMem, descGPUTemp, descGPUPower, descGPUECC, descJobGPUMem, descJobGPUSM} {
		ch <- d
	}
}

func (c *gpuCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	nodes := make(map[string]*gpuSource, len(c.nodes))
	for n, s := range c.nodes {
		nodes[n] = s
	}
	c.mu.Unlock()
	for node, s := range nodes {
		s.mu.Lock()
		s.sample()
		usage, apps, sm := s.usage, s.apps, s.sm
		s.mu.Unlock()
		gauge := func(d *prometheus.Desc, v float64, labels ...string) {
			if !math.IsNaN(v) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
			}
		}
		for _, u := range usage {
			gauge(descGPUUtil, u.UtilPct/100, node, u.UUID)
			gauge(descGPUMem, u.MemUsedMiB*(1<<20), node, u.UUID)
			gauge(descGPUTemp, u.TempC, node, u.UUID)
			gauge(descGPUPower, u.PowerW, node, u.UUID)
			gauge(descGPUECC, u.ECCUE, node, u.UUID)
		}
		type key struct{ job, uuid string }
		byJob := map[key]float64{}
		for _, a := range apps {
			if job := gpu.JobOfPID(s.cfg.Root, a.PID); job != "" && !math.IsNaN(a.MemMiB) {
				byJob[key{job, a.UUID}] += a.MemMiB * (1 << 20)
			}
		}
		for k, v := range byJob {
			gauge(descJobGPUMem, v, node, k.job, k.uuid)
		}
		smByJob := map[key]float64{}
		for uuid, procs := range sm {
			for _, p := range procs {
				if job := gpu.JobOfPID(s.cfg.Root, p.PID); job != "" {
					smByJob[key{job, uuid}] += p.SMPct / 100
				}
			}
		}
		for k, v := range smByJob {
			gauge(descJobGPUSM, v, node, k.job, k.uuid)
		}
	}
}

// sample refreshes the sample when it is older than gpuSampleEvery; a
// failed one leaves no series. The caller holds s.mu.
func (s *gpuSource) sample() {
	if time.Since(s.at) < gpuSampleEvery {
		return
	}
	cfg := s.cfg
	cfg.Timeout = gpuSampleTimeout
	s.usage, s.apps, s.err = gpu.Sample(context.Background(), cfg)
	if s.err == nil && len(s.apps) == 0 {
		// No compute process, so no process's SM time: pmon samples for
		// about a second, which an idle node need not spend.
		s.sm, s.smErr = nil, nil
	} else {
		s.sm, s.smErr = gpu.SampleSM(context.Background(), cfg)
	}
	s.at = time.Now()
}
