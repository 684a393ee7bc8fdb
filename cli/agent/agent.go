package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/certs"
	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/exec"
	"github.com/foreman-sched/foreman/exec/gpu"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
	"github.com/foreman-sched/foreman/objstore"
	"github.com/foreman-sched/foreman/sched"
	"github.com/foreman-sched/foreman/wallclock"
)

// agentConfig is every subsystem's Config, filled from flags in one place
// (agentConfigFrom).
type agentConfig struct {
	cluster   cluster.Config
	worker    exec.WorkerConfig
	sched     sched.Config
	api       httpapi.Config
	self      fsm.Node
	logLevel  slog.Level
	tempData  bool // --dev without --data-dir: removed at exit
	container containerSettings
	pprof     bool // serve net/http/pprof under /debug/pprof
	// tls is the agent's certificate, key and CA (nil: no TLS); reloaded
	// on SIGHUP.
	tls               *certs.Store
	requireClientCert bool // the API port requires a client certificate
	maxConnsPerIP     int
	role              string // RoleServer, RoleReplica, RoleClient, or RoleAuto until resolveRole
	clientToken       string // --token-file's secret: a client agent's credential under --acl
	// GPU detection (gpus.go): where it looks, --resource gpu=N when
	// given, and what it found at start (already in self).
	gpu         gpu.Config
	gpuOverride *int64
	gpuStart    gpuState
	objectStore *objstore.Config // nil: outputs stay on the node
}

// Command is `foreman agent`; version is what this node advertises.
func Command(version string) *ucli.Command {
	return &ucli.Command{
		Name:  "agent",
		Usage: "run an agent: a server (a raft member that schedules when leader) or a client; both run jobs",
		Description: `Every host runs one agent. --dev starts a throwaway single-node cluster on 127.0.0.1.
For a real cluster start the first servers with --bootstrap-expect N and --join one another;
later agents only --join the servers: they become clients, outside raft, holding no copy of the
cluster state and running what one of the servers streams to them (the way to grow past a few
dozen hosts). --role server or --role replica makes a later agent a raft member instead.
--config FILE reads any of these flags from a YAML file (key = flag name without --, e.g.
"data-dir: /var/lib/foreman", "join: [10.0.0.10, 10.0.0.11]"); flags on the command line win.`,
		Flags: append([]ucli.Flag{
			configFlag(),
			&ucli.StringFlag{Name: "role", Value: RoleAuto, Usage: "auto (a server with --dev, --bootstrap-expect, --acl or no --join; else a server while the cluster lacks voters and a client once it has them; kept in the data dir), server (a raft member: schedules when leader, serves the API, runs jobs), replica (a raft non-voter never promoted: serves reads, the API and client streams; needs --join) or client (outside raft: runs what a server's work stream gives it; needs --join)"},
			&ucli.BoolFlag{Name: "dev", Usage: "single node on 127.0.0.1 with a temporary data dir (unless --data-dir)"},
			&ucli.StringFlag{Name: "data-dir", Usage: "where raft, state, logs and attempts live", EnvVars: []string{"FOREMAN_DATA_DIR"}},
			&ucli.StringFlag{Name: "name", Usage: "unique node name (default: hostname)"},
			&ucli.StringFlag{Name: "bind", Usage: "IP to listen on (default 127.0.0.1 with --dev, else 0.0.0.0)"},
			&ucli.StringFlag{Name: "advertise", Usage: "IP peers use to reach this node (default: --bind, or the first private IP)"},
			&ucli.IntFlag{Name: "port", Value: cluster.DefaultPort, Usage: "base port: HTTP = BASE, raft = BASE+1, gossip = BASE+2"},
			&ucli.StringSliceFlag{Name: "join", Usage: "HOST[:BASE] of any member to join (repeatable)"},
			&ucli.IntFlag{Name: "bootstrap-expect", Usage: "bootstrap raft once this many fresh servers see each other"},
			&ucli.IntFlag{Name: "voters", Value: 3, Usage: "number of raft voters (1, 3 or 5); later servers are non-voters, later --role auto agents clients"},
			&ucli.StringSliceFlag{Name: "label", Usage: "node label k=v for constraints (repeatable)"},
			&ucli.StringSliceFlag{Name: "host-volume", Usage: "lend the directory PATH to jobs as volume NAME: NAME=PATH[:ro] (repeatable; jobs ask --volume NAME:DEST)"},
			&ucli.StringSliceFlag{Name: "resource", Usage: "named countable resource, e.g. gpu=4 (repeatable); gpu defaults to the healthy NVIDIA GPUs detected"},
			&ucli.StringFlag{Name: "nvidia-smi", Usage: "nvidia-smi to ask about GPUs (default: on PATH, else /usr/local/nvidia/bin/nvidia-smi)"},
			&ucli.StringFlag{Name: "gpu-memory-over", Value: "report", Usage: "what the VRAM watchdog does about a job over its --gpu-memory share where the kernel's dmem controller does not cap it: report (an attempt.gpu_memory_over event) or kill (also stop the attempt)"},
			&ucli.StringFlag{Name: "gpu-root", Hidden: true, Usage: "read /proc, /sys and /dev for GPUs below this directory (tests: a fake host)"},
			&ucli.StringFlag{Name: "cpu", Usage: "override the advertised CPU capacity (e.g. 4, 3500m)"},
			&ucli.StringFlag{Name: "memory", Usage: "override the advertised memory capacity (e.g. 8GiB, 4096)"},
			&ucli.StringFlag{Name: "reserve-cpu", Value: "0", Usage: "CPU kept back from jobs (e.g. 500m)"},
			&ucli.StringFlag{Name: "reserve-memory", Value: "256MiB", Usage: "memory kept back from jobs"},
			&ucli.StringFlag{Name: "default-driver", Usage: "driver for jobs that name none (default: container when available, else process)"},
			&ucli.DurationFlag{Name: "lease", Value: exec.DefaultLeaseDuration, Usage: "attempt lease: a cut-off node's jobs are killed after this long"},
			&ucli.IntFlag{Name: "slots", Value: cluster.DefaultConfig().Slots, Usage: "live attempts this node takes at once; the leader queues the rest (0: unbounded)"},
			&ucli.StringFlag{Name: "default-cpu", Value: "100m", Usage: "CPU a job that requests none is placed as (not a limit)"},
			&ucli.StringFlag{Name: "default-memory", Value: "64MiB", Usage: "memory a job that requests none is placed as (not a limit)"},
			&ucli.IntFlag{Name: "job-nice", Aliases: []string{"supervisor-nice"}, Value: exec.DefaultWorkerConfig().JobNice, Usage: "nice value of process jobs (0-19); supervisors keep the agent's"},
			&ucli.IntFlag{Name: "jobs-cpu-weight", Value: exec.DefaultWorkerConfig().JobsCPUWeight, Usage: "cpu weight of all jobs against the agent's 100 (root only; 0: no cgroup)"},
			&ucli.DurationFlag{Name: "raft-heartbeat-timeout", Value: cluster.DefaultConfig().Raft.HeartbeatTimeout, Usage: "raft heartbeat and election timeout (a follower elects after 1-2x this of silence)"},
			&ucli.DurationFlag{Name: "raft-commit-timeout", Value: cluster.DefaultConfig().Raft.CommitTimeout, Usage: "how often an idle leader sends each follower an empty AppendEntries (1-2x this); commits are pushed sooner (at once for placements, after 6 ms of quiet for the rest), so lower only costs idle CPU"},
			&ucli.DurationFlag{Name: "raft-leader-lease", Value: cluster.DefaultConfig().Raft.LeaderLeaseTimeout, Usage: "a leader without quorum contact for this long steps down (<= --raft-heartbeat-timeout)"},
			&ucli.IntFlag{Name: "max-pending-jobs", Value: httpapi.DefaultConfig().MaxPendingJobs, Usage: "submits get 429 while this node holds this many submitted jobs not yet committed"},
			&ucli.IntFlag{Name: "max-queued-jobs", Value: httpapi.DefaultConfig().MaxQueuedJobs, Usage: "submits get 429 while this many jobs are queued (not placed)"},
			&ucli.IntFlag{Name: "max-concurrent-starts", Value: exec.DefaultWorkerConfig().MaxConcurrentStarts, Usage: "supervisors starting at once on this node; more attempts wait in order"},
			&ucli.IntFlag{Name: "warm-supervisors", Value: exec.DefaultWorkerConfig().WarmSupervisors, Usage: "spare supervisors kept started ahead of the next attempts (0: start each cold)"},
			&ucli.IntFlag{Name: "idle-supervisors", Value: exec.DefaultWorkerConfig().MaxIdleSupervisors, Usage: "supervisors kept idle for reuse once their attempt is over (0: one process per attempt; else >= --warm-supervisors)"},
			&ucli.IntFlag{Name: "saturated-run-queue", Value: exec.DefaultWorkerConfig().SaturatedRunQueue, Usage: "runnable tasks per host CPU above which a start waits for one of this node's busy supervisors to come back instead of starting another process (0: never wait)"},
			&ucli.DurationFlag{Name: "keep-finished", Value: exec.DefaultKeepFinished, Usage: "how long a finished attempt's logs and artifacts stay on this node"},
			&ucli.StringFlag{Name: "artifacts-max", Value: "1GiB", Usage: "artifacts kept of one attempt (files past it, in path order, are deleted with a warning)"},
			&ucli.StringFlag{Name: "artifacts-node-max", Value: "10GiB", Usage: "artifacts kept of all finished attempts on this node (the oldest are evicted first; 0: no cap)"},
			&ucli.DurationFlag{Name: "retention", Value: 7 * 24 * time.Hour, Usage: "how long terminal jobs are kept"},
			&ucli.DurationFlag{Name: "gc-interval", Value: sched.DefaultConfig().GCInterval, Usage: "how often the leader drops terminal jobs past --retention and rolls usage records up"},
			&ucli.StringFlag{Name: "usage-labels", Usage: "job label keys usage accounting splits its records by, comma-separated (at most 4; e.g. team,project)"},
			&ucli.DurationFlag{Name: "idempotency-window", Value: 24 * time.Hour, Usage: "how long idempotency keys are remembered"},
			&ucli.IntFlag{Name: "preemption-margin", Value: sched.DefaultPreemptionMargin, Usage: "smallest priority difference (0-100) that lets a queued job preempt a preemptible one"},
			&ucli.BoolFlag{Name: "no-preemption", Usage: "never preempt running attempts for higher priorities"},
			&ucli.DurationFlag{Name: "fair-share-half-life", Value: sched.DefaultFairShareHalfLife, Usage: "half-life of the recent usage fair share weighs (namespace shares)"},
			&ucli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
			&ucli.BoolFlag{Name: "pprof", Usage: "serve Go runtime profiles under /debug/pprof on the HTTP port (needs an operator token with --acl)"},
			&ucli.StringFlag{Name: "token-file", Usage: "a client agent's token under --acl (role client:NAME, from foreman acl token create): it opens the work stream and sends reports with it"},
			&ucli.BoolFlag{Name: "acl", Usage: "require a token on every API route but health (turn it on for every agent; then run foreman acl bootstrap)"},
			&ucli.StringFlag{Name: "tls-cert", Usage: "this agent's certificate (PEM, from 'foreman tls cert create --server'): turns on HTTPS for the API and mutual TLS between agents"},
			&ucli.StringFlag{Name: "tls-key", Usage: "the key of --tls-cert"},
			&ucli.StringFlag{Name: "tls-ca", Usage: "the cluster CA (PEM) every agent's and client's certificate must be signed by"},
			&ucli.BoolFlag{Name: "tls-require-client-cert", Usage: "the API port refuses clients without a certificate of the CA (agent-only paths always require an agent certificate)"},
			&ucli.StringSliceFlag{Name: "gossip-key", EnvVars: []string{"FOREMAN_GOSSIP_KEY"}, Usage: "base64 key (16, 24 or 32 bytes; from 'foreman tls gossip-key') encrypting gossip; repeat to rotate: the first encrypts, all decrypt"},
			&ucli.StringSliceFlag{Name: "job-users", Value: ucli.NewStringSlice("nobody"), Usage: "users jobs may name in user: (repeatable; \"*\": any, root included); applies when the agent runs as root"},
			&ucli.StringFlag{Name: "job-default-user", Value: "nobody", Usage: "user of process-driver jobs that name none (\"\": the agent's own user); applies when the agent runs as root"},
			&ucli.IntFlag{Name: "max-conns-per-ip", Value: DefaultMaxConnsPerIP, Usage: "open HTTP connections one client IP may hold; more are closed at once (0: unlimited)"},
		}, objectStoreFlags()...),
		Action: func(c *ucli.Context) error {
			if err := applyConfigFile(c); err != nil {
				return ucli.Exit("foreman agent: "+err.Error(), 2)
			}
			// Before anything looks at the data dir (the role, the job
			// user's reach, the state): one a newer foreman wrote is left
			// as it is.
			if err := cluster.CheckDataDir(c.String("data-dir"), version); c.String("data-dir") != "" && err != nil {
				return ucli.Exit("foreman agent: "+err.Error(), 1)
			}
			cfg, err := agentConfigFrom(c, version)
			if err != nil {
				return ucli.Exit("foreman agent: "+err.Error(), 2)
			}
			if cfg.role == RoleAuto {
				logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
				if cfg.role, err = resolveRole(c.Context, &cfg.cluster, bearerAuth(cfg.clientToken), logger); err != nil {
					return ucli.Exit("foreman agent: "+err.Error(), 2)
				}
			}
			if cfg.role == RoleClient {
				return runClient(c.Context, cfg)
			}
			return runAgent(c.Context, cfg)
		},
	}
}

// agentConfigFrom maps flags onto the subsystems' configs.
func agentConfigFrom(c *ucli.Context, version string) (*agentConfig, error) {
	cfg := &agentConfig{
		cluster: cluster.DefaultConfig(),
		worker:  exec.DefaultWorkerConfig(),
		sched:   sched.DefaultConfig(),
		api:     httpapi.DefaultConfig(),
		pprof:   c.Bool("pprof"),
	}
	cfg.api.ACL = c.Bool("acl")
	switch cfg.role = c.String("role"); cfg.role {
	case RoleAuto:
		if r := autoRoleWithoutAsking(c.Bool("dev"), cfg.api.ACL && c.String("token-file") == "", c.Int("bootstrap-expect"), c.StringSlice("join")); r != "" {
			cfg.role = r
		}
	case RoleServer:
	case RoleReplica:
		if err := joinsServers(c, cfg.role, "a server", " (a replica joins once there is a cluster)"); err != nil {
			return nil, err
		}
	case RoleClient:
		if err := joinsServers(c, cfg.role, "at least one server", ""); err != nil {
			return nil, err
		}
		if cfg.api.ACL && c.String("token-file") == "" {
			return nil, errors.New("--role client --acl: --token-file must name a file holding a token with role client:NAME (foreman acl token create --role client:NAME); a client never holds the cluster-internal secret")
		}
	default:
		return nil, fmt.Errorf("--role: %q is not one of auto, server, replica, client", cfg.role)
	}
	if f := c.String("token-file"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		if cfg.clientToken = strings.TrimSpace(string(b)); cfg.clientToken == "" || strings.ContainsAny(cfg.clientToken, " \t\r\n") {
			return nil, fmt.Errorf("--token-file %s: want one token secret (fmn_...) on one line", f)
		}
	}
	if err := cfg.logLevel.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", c.String("log-level"))
	}
	cc := &cfg.cluster
	cc.Dev = c.Bool("dev")
	cc.DataDir = c.String("data-dir")
	if cc.DataDir == "" {
		if !cc.Dev {
			return nil, errors.New("--data-dir is required (or use --dev)")
		}
		d, err := os.MkdirTemp("", "foreman-dev-")
		if err != nil {
			return nil, err
		}
		cc.DataDir, cfg.tempData = d, true
	}
	abs, err := filepath.Abs(cc.DataDir)
	if err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	cc.DataDir = abs
	if n := c.String("name"); n != "" {
		cc.Name = n
	}
	cc.BindAddr = c.String("bind")
	cc.AdvertiseAddr = c.String("advertise")
	cc.Port = c.Int("port")
	cc.Join = c.StringSlice("join")
	cc.BootstrapExpect = c.Int("bootstrap-expect")
	cc.Voters = c.Int("voters")
	cc.Replica = cfg.role == RoleReplica
	cc.Slots = c.Int("slots")
	hb := c.Duration("raft-heartbeat-timeout")
	cc.Raft.HeartbeatTimeout, cc.Raft.ElectionTimeout = hb, hb
	cc.Raft.LeaderLeaseTimeout = c.Duration("raft-leader-lease")
	cc.Raft.CommitTimeout = c.Duration("raft-commit-timeout")
	if cfg.tls, err = loadTLS(c); err != nil {
		return nil, err
	}
	cc.TLS = cfg.tls
	cfg.requireClientCert = c.Bool("tls-require-client-cert")
	if cfg.requireClientCert && cfg.tls == nil {
		return nil, errors.New("--tls-require-client-cert needs --tls-cert, --tls-key and --tls-ca")
	}
	if cc.GossipKeys, err = gossipKeys(c.StringSlice("gossip-key")); err != nil {
		return nil, err
	}
	if cfg.maxConnsPerIP = c.Int("max-conns-per-ip"); cfg.maxConnsPerIP < 0 {
		return nil, errors.New("--max-conns-per-ip: must be >= 0 (0: unlimited)")
	}
	if err := cc.Validate(); err != nil {
		return nil, err
	}

	lease := c.Duration("lease")
	w := &cfg.worker
	w.Node = cc.Name
	w.DataDir = cc.DataDir
	w.LeaseDuration, w.RenewInterval = lease, lease/3
	w.ImageCache = filepath.Join(cc.DataDir, "images")
	w.MaxConcurrentStarts = c.Int("max-concurrent-starts")
	w.WarmSupervisors = c.Int("warm-supervisors")
	w.MaxIdleSupervisors = c.Int("idle-supervisors")
	w.SaturatedRunQueue = c.Int("saturated-run-queue")
	w.JobNice = c.Int("job-nice")
	w.JobsCPUWeight = c.Int("jobs-cpu-weight")
	w.KeepFinished = c.Duration("keep-finished")
	if cfg.objectStore, err = objectStoreConfig(c, w); err != nil {
		return nil, err
	}
	if err := inputConfig(c, w); err != nil {
		return nil, err
	}
	if err := sizeFlags(c, sizeFlag{"artifacts-max", &w.ArtifactsMaxBytes}, sizeFlag{"artifacts-node-max", &w.ArtifactsNodeMaxBytes}); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		// Only root can switch users; an unprivileged agent runs every job
		// as itself (and refuses a job naming another user).
		w.JobUsers, w.DefaultJobUser = c.StringSlice("job-users"), c.String("job-default-user")
		if err := exec.CheckJobUsers(w.JobUsers, w.DefaultJobUser); err != nil {
			return nil, err
		}
	}

	cfg.container = containerSettingsFor(cc.DataDir, cc.Name)
	cfg.container.export()
	RegisterContainerDriver() // again, now with this agent's state root and cgroup parent
	usable, unusable := exec.DetectDrivers()
	usable = withoutUnreachableProcess(w, usable, unusable)
	w.DefaultDriver = c.String("default-driver")
	if w.DefaultDriver == "" {
		w.DefaultDriver = exec.ProcessDriverName
		for _, d := range usable {
			if d == containerDriverName {
				w.DefaultDriver = containerDriverName
			}
		}
		if err, bad := unusable[w.DefaultDriver]; bad {
			return nil, fmt.Errorf("jobs that name no driver would be process jobs here (containers are unavailable): %v", err)
		}
	} else if err, bad := unusable[w.DefaultDriver]; bad {
		return nil, fmt.Errorf("--default-driver %s: %v", w.DefaultDriver, err)
	}
	if err := w.Validate(); err != nil {
		return nil, err
	}

	s := &cfg.sched
	s.LeaseDuration = lease
	// A client renews for up to its contact window after its last
	// confirmed beat: the leader's margin for clients covers it and a second.
	s.ClientSafetyMargin = cluster.ClientContactWindow + time.Second
	s.Retention = c.Duration("retention")
	s.GCInterval = c.Duration("gc-interval")
	s.IdempotencyWindow = c.Duration("idempotency-window")
	if l := strings.TrimSpace(c.String("usage-labels")); l != "" {
		for _, k := range strings.Split(l, ",") {
			s.UsageLabels = append(s.UsageLabels, strings.TrimSpace(k))
		}
	}
	s.PreemptionMargin = c.Int("preemption-margin")
	s.Preemption = !c.Bool("no-preemption")
	s.FairShareHalfLife = c.Duration("fair-share-half-life")
	if s.DefaultRequest.CPU, err = httpapi.ParseCPU(c.String("default-cpu")); err != nil {
		return nil, fmt.Errorf("--default-cpu: %w", err)
	}
	if s.DefaultRequest.MemoryMB, err = httpapi.ParseMemory(c.String("default-memory")); err != nil {
		return nil, fmt.Errorf("--default-memory: %w", err)
	}
	if err := s.Validate(); err != nil {
		if s.FairShareHalfLife <= 0 {
			return nil, fmt.Errorf("--fair-share-half-life %s: must be positive", s.FairShareHalfLife)
		}
		if errors.Is(err, sched.ErrInvalidConfig) && strings.Contains(err.Error(), "UsageLabels") {
			return nil, fmt.Errorf("--usage-labels %q: %v", c.String("usage-labels"), err)
		}
		if s.PreemptionMargin < 0 || s.PreemptionMargin > sched.MaxPriority {
			return nil, fmt.Errorf("--preemption-margin %d: must be between 0 and %d", s.PreemptionMargin, sched.MaxPriority)
		}
		return nil, err
	}

	a := &cfg.api
	a.MaxPendingJobs = c.Int("max-pending-jobs")
	a.MaxQueuedJobs = c.Int("max-queued-jobs")
	if err := a.Validate(); err != nil {
		return nil, fmt.Errorf("--max-pending-jobs/--max-queued-jobs: %w", err)
	}

	cfg.gpu = gpu.DefaultConfig()
	cfg.gpu.NvidiaSMI = c.String("nvidia-smi")
	w.NvidiaSMI = cfg.gpu.NvidiaSMI
	switch over := c.String("gpu-memory-over"); over {
	case exec.GPUMemoryReport, exec.GPUMemoryKill:
		w.GPUMemoryOver = over
		cfg.gpu.KillOverShare = over == exec.GPUMemoryKill
	default:
		return nil, fmt.Errorf("--gpu-memory-over: %q (want report or kill)", over)
	}
	if r := c.String("gpu-root"); r != "" {
		if cfg.gpu.Root, err = filepath.Abs(r); err != nil {
			return nil, fmt.Errorf("--gpu-root: %w", err)
		}
		w.GPURoot = cfg.gpu.Root
	}
	self, err := selfDescription(c, usable, version)
	if err != nil {
		return nil, err
	}
	if v, ok := self.Capacity.Named["gpu"]; ok {
		cfg.gpuOverride = &v
	}
	cfg.gpuStart = detectGPUs(context.Background(), cfg.gpu, cfg.gpuOverride, slog.Default())
	cfg.gpuStart.apply(&self)
	// Advertise the allow-list so the scheduler places a job naming a user
	// only where it may run (an agent not running as root runs every job as
	// itself and advertises none).
	self.JobUsers = w.JobUsers
	w.HostVolumes = self.Volumes // the executor mounts only these
	cfg.self = self
	return cfg, nil
}

// joinsServers refuses what a role that joins servers (replica, client)
// cannot do: --dev, no --join (which must name joinWhat), and
// --bootstrap-expect (bootstrapWhy says why, after "is for servers").
func joinsServers(c *ucli.Context, role, joinWhat, bootstrapWhy string) error {
	switch {
	case c.Bool("dev"):
		return fmt.Errorf("--role %s: not with --dev (a %s joins servers)", role, role)
	case len(c.StringSlice("join")) == 0:
		return fmt.Errorf("--role %s: --join must name %s", role, joinWhat)
	case c.Int("bootstrap-expect") != 0:
		return fmt.Errorf("--role %s: --bootstrap-expect is for servers%s", role, bootstrapWhy)
	}
	return nil
}

// selfDescription is what this node advertises: capacity (detected minus
// the reserve, or overridden), labels, named resources and drivers.
func selfDescription(c *ucli.Context, drivers []string, version string) (fsm.Node, error) {
	capacity, err := exec.DetectCapacity()
	if err != nil {
		return fsm.Node{}, fmt.Errorf("detect capacity: %w", err)
	}
	if v := c.String("cpu"); v != "" {
		if capacity.CPU, err = httpapi.ParseCPU(v); err != nil {
			return fsm.Node{}, fmt.Errorf("--cpu: %w", err)
		}
	}
	if v := c.String("memory"); v != "" {
		if capacity.MemoryMB, err = httpapi.ParseMemory(v); err != nil {
			return fsm.Node{}, fmt.Errorf("--memory: %w", err)
		}
	}
	rc, err := httpapi.ParseCPU(c.String("reserve-cpu"))
	if err != nil {
		return fsm.Node{}, fmt.Errorf("--reserve-cpu: %w", err)
	}
	rm, err := httpapi.ParseMemory(c.String("reserve-memory"))
	if err != nil {
		return fsm.Node{}, fmt.Errorf("--reserve-memory: %w", err)
	}
	capacity.CPU = max(capacity.CPU-rc, 0)
	capacity.MemoryMB = max(capacity.MemoryMB-rm, 0)

	labels, err := keyValues(c.StringSlice("label"), "--label")
	if err != nil {
		return fsm.Node{}, err
	}
	named, err := keyValues(c.StringSlice("resource"), "--resource")
	if err != nil {
		return fsm.Node{}, err
	}
	for k, v := range named {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return fsm.Node{}, fmt.Errorf("--resource %s=%s: the amount must be a non-negative integer", k, v)
		}
		if capacity.Named == nil {
			capacity.Named = map[string]int64{}
		}
		capacity.Named[k] = n
	}
	vols, err := parseHostVolumes(c.StringSlice("host-volume"))
	if err != nil {
		return fsm.Node{}, err
	}
	return fsm.Node{Capacity: capacity, Labels: labels, Drivers: drivers, Version: version, Volumes: vols}, nil
}

// sizeFlag is a size flag (256MiB, 10GiB, or a bare number of MiB) and
// the field it sets, in bytes.
type sizeFlag struct {
	name string
	dst  *int64
}

// sizeFlags reads size flags into their fields, in order.
func sizeFlags(c *ucli.Context, flags ...sizeFlag) error {
	for _, f := range flags {
		mb, err := httpapi.ParseMemory(c.String(f.name))
		if err != nil {
			return fmt.Errorf("--%s: %w", f.name, err)
		}
		*f.dst = mb << 20
	}
	return nil
}

func keyValues(list []string, flag string) (map[string]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(list))
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s %q: want key=value", flag, kv)
		}
		m[k] = v
	}
	return m, nil
}

// runAgent starts every subsystem and blocks until SIGINT/SIGTERM or a
// fatal error, then shuts down gracefully.
func runAgent(parent context.Context, cfg *agentConfig) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	slog.SetDefault(logger)
	if cfg.tempData {
		defer os.RemoveAll(cfg.cluster.DataDir)
	}

	// Early: finding sysmon counts on thread ids that have not gone round
	// pid_max since the process started (exec/sysmon.go).
	if err := exec.RelaxSysmon(exec.AgentSysmonSlack); err != nil {
		logger.Debug("sysmon keeps its timer slack", "err", err)
	}
	ctx, stop := signal.NotifyContext(parent, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	// The packages register their metrics here rather than in package
	// inits, which every CLI call and container init of the binary runs.
	fsm.RegisterMetrics()
	cluster.RegisterMetrics()
	sched.RegisterMetrics()
	exec.RegisterMetrics(cfg.self.Drivers...)

	// Before anything else: a store this agent cannot use stops it here.
	store, err := openObjectStore(ctx, cfg.objectStore, logger)
	if err != nil {
		return err
	}
	f, err := cluster.OpenFSM(cfg.cluster.DataDir, fsm.Options{NoSync: true, Logger: logger, Version: cfg.self.Version}, logger)
	if err != nil {
		return fmt.Errorf("open state: %w", err)
	}
	acl := httpapi.NewACL(cfg.api.ACL, f, nil, logger)
	cfg.cluster.InternalAuth = acl.SetInternalAuth
	cfg.cluster.Work = newWorkSource(f)
	node, err := cluster.New(cfg.cluster, f, cfg.self, logger)
	if err != nil {
		f.Close()
		return err
	}

	// The HTTP listener comes up before the node joins so that peers (and
	// forwarded writes) can reach it as soon as gossip announces us.
	self := node.Self()
	ln, err := net.Listen("tcp", net.JoinHostPort(bindHost(cfg.cluster), strconv.Itoa(cfg.cluster.Port)))
	if err != nil {
		_ = node.Shutdown(context.Background())
		return fmt.Errorf("listen for HTTP: %w", err)
	}
	ln = wrapListener(ln, cfg.maxConnsPerIP, cfg.tls, cfg.requireClientCert, logger)
	var peerTLS *tls.Config
	if cfg.tls != nil {
		peerTLS = cfg.tls.PeerClientConfig()
		go reloadOnSIGHUP(ctx, cfg.tls, logger)
	}

	worker, err := exec.NewWorker(cfg.worker, exec.WorkerDeps{
		Outputs:       outputStore(store),
		Assignments:   newAssignments(f),
		Reporter:      exec.NewBatchingReporter(reportBatch{n: node, now: wallclock.Now}),
		LeaderContact: node,
		Artifacts:     newArtifactFetcher(f, acl, peerTLS),
		Checkpoints:   newCheckpointFetcher(f, acl, peerTLS),
		Logger:        logger,
	})
	if err != nil {
		ln.Close()
		_ = node.Shutdown(context.Background())
		return err
	}

	node.OnLeadership(func(lctx context.Context) {
		s, err := sched.New(cfg.sched, sched.Deps{Raft: node, State: f, Outputs: storeDeleter(store)}, logger)
		if err != nil {
			logger.Error("scheduler not started", "err", err)
			return
		}
		if err := s.Run(lctx); err != nil && lctx.Err() == nil {
			logger.Error("scheduler stopped", "err", err)
		}
	})

	if acl.Enabled() {
		node.OnLeadership(func(lctx context.Context) { ensureInternalSecret(lctx, node, f, logger) })
	}
	api := httpapi.New(cfg.api, httpapi.Deps{
		ACL:      acl,
		Cluster:  clusterAdapter{node},
		State:    f,
		Logs:     workerLogs{worker},
		Exec:     workerExec{worker},
		Operator: operatorAdapter{node},
		Logger:   logger,

		Artifacts:  workerArtifacts{worker},
		Objects:    objectReader(store),
		Usage:      nodeUsage{},
		GPUUsage:   gpuUsage{cfg.cluster.Name},
		Shares:     fairShares{cfg.sched.FairShareHalfLife},
		PeerTLS:    peerTLS,
		GossipKeys: keyringAdapter{node},
	})
	srv := newHTTPServer(routes(acl, api, node.InternalHandler(), checkpointHandler(worker, newCheckpointFetcher(f, acl, peerTLS), cfg.cluster.Name), cfg.pprof, cfg.tls != nil), logger)
	srv.RegisterOnShutdown(node.StopWorkStreams) // clients move at once; Shutdown would wait for their streams
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(ln) }()

	// The worker first: it re-adopts the attempts a previous agent left
	// while the gossip join runs (seconds on a loaded host), and renews their
	// leases as soon as raft hears from the leader. It starts nothing before
	// this node is in sync.
	workerCtx, stopWorker := context.WithCancel(context.Background())
	workerDone := make(chan error, 1)
	go func() { workerDone <- worker.Run(workerCtx) }()
	if err := node.Start(ctx); err != nil {
		_ = srv.Close()
		_ = node.Shutdown(context.Background())
		stopWorker()
		<-workerDone
		return err
	}

	gpuResets := make(chan fsm.GPUReset, 1)
	doneReset := watchGPUResets(ctx, f, self.Name, gpuResets)
	go watchGPUs(ctx, cfg.gpu, cfg.gpuOverride, cfg.gpuStart, gpuResets, doneReset, func(ctx context.Context, st gpuState) error {
		return node.SetGPUs(ctx, st.GPUs, st.Driver, st.CUDA, st.MemoryMode, st.Capacity)
	}, logger)
	logger.Info("agent started", "component", "agent", "node", self.Name, "http", self.HTTPAddr, "tls", cfg.tls != nil,
		"gossip_encrypted", node.GossipEncrypted(),
		"data_dir", cfg.cluster.DataDir, "drivers", strings.Join(cfg.self.Drivers, ","), "default_driver", cfg.worker.DefaultDriver)
	if slices.Contains(cfg.self.Drivers, containerDriverName) {
		warnIfBinaryHoldsState(cfg.container.stateRoot, logger)
	}

	runErr, workerRunning := waitForStop(ctx, srvErr, workerDone, logger)

	// Order matters: stop taking requests, leave the cluster, and only then
	// stop the worker, so leases keep being renewed for as long as this node
	// is still in contact with the leader. Running jobs keep going under
	// their supervisors; a restart within the lease re-adopts them.
	shutCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	// A last renewal while still in contact: a restart then has the whole
	// lease to re-adopt the running attempts in, not what the last periodic
	// renewal left of it.
	worker.RenewLeases()
	if err := node.Shutdown(shutCtx); err != nil && runErr == nil {
		runErr = err
	}
	stopWorker()
	awaitWorker(shutCtx, workerRunning, workerDone, logger)
	return runErr
}

// awaitWorker waits, until ctx ends, for a worker still running to exit:
// a start it was in the middle of is then handed to its supervisor or not
// begun. Cut short, it left a task file with no supervisor, which the next
// agent reported as failed ("supervisor exited without a result").
func awaitWorker(ctx context.Context, running bool, done <-chan error, logger *slog.Logger) {
	if !running {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
		logger.Warn("the worker did not stop in time", "component", "agent")
	}
}

// waitForStop blocks until a signal (ctx), the HTTP server or the worker
// ends the agent; workerRunning is false when the worker is what ended.
func waitForStop(ctx context.Context, srvErr, workerDone <-chan error, logger *slog.Logger) (runErr error, workerRunning bool) {
	select {
	case <-ctx.Done():
		logger.Info("shutting down", "component", "agent")
		return nil, true
	case err := <-srvErr:
		return fmt.Errorf("http server: %w", err), true
	case err := <-workerDone:
		return fmt.Errorf("worker: %w", err), false
	}
}

func bindHost(c cluster.Config) string {
	if c.BindAddr != "" {
		return c.BindAddr
	}
	if c.Dev {
		return "127.0.0.1"
	}
	return "0.0.0.0"
}

// routes puts the API, the internal raft-forwarding endpoints and the UI on
// one mux, and the Go profiles under /debug/pprof/ only when withPprof.
// Every route goes through acl.Handle, which guards it by the route table
// (httpapi/acl_routes.go) and refuses a pattern missing there.
// With tlsOn the followers' grouped submits need an agent certificate (the
// internal handler checks its own).
func routes(acl *httpapi.ACL, api, internal, checkpoints http.Handler, withPprof, tlsOn bool) http.Handler {
	mux := http.NewServeMux()
	if withPprof {
		acl.Handle(mux, "/debug/pprof/", http.HandlerFunc(pprof.Index)) // also serves heap, goroutine, allocs, block, mutex…
		acl.Handle(mux, "/debug/pprof/cmdline", http.HandlerFunc(pprof.Cmdline))
		acl.Handle(mux, "/debug/pprof/profile", http.HandlerFunc(pprof.Profile))
		acl.Handle(mux, "/debug/pprof/symbol", http.HandlerFunc(pprof.Symbol))
		acl.Handle(mux, "/debug/pprof/trace", http.HandlerFunc(pprof.Trace))
	}
	acl.Handle(mux, "/v1/internal/", internal)
	// A client agent's calls: its token (client role, for its own node)
	// or the cluster-internal secret.
	acl.Handle(mux, "POST /v1/internal/work/{node}", internal)
	acl.Handle(mux, "POST /v1/internal/reports/{node}", internal)
	acl.Handle(mux, "GET /v1/internal/voters", internal)                  // a fresh --acl agent with a client token choosing its role
	acl.Handle(mux, httpapi.ForwardedSubmitsPath, agentOnly(api, tlsOn))  // followers' grouped submits: the API's, not raft's
	acl.Handle(mux, httpapi.InternalArtifactsPath, agentOnly(api, tlsOn)) // artifacts fetched for a child's inputs
	acl.Handle(mux, CheckpointsPath, agentOnly(checkpoints, tlsOn))       // a task's checkpoint for its next attempt elsewhere
	acl.Handle(mux, "/ui/", uiHandler())
	acl.Handle(mux, "GET /{$}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusFound)
	}))
	acl.Handle(mux, "/", api) // the API guards its own routes
	return mux
}
