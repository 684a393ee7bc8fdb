package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/httpapi"
)

// multi is a repeatable string flag that never splits on commas, so
// "--constraint 'gpu in (a,b)'" and "--env LIST=a,b" stay whole.
type multi []string

func (m *multi) Set(s string) error { *m = append(*m, s); return nil }
func (m *multi) String() string     { return strings.Join(*m, " ") }

// specFlags are the job flags shared by submit and run. They are built
// fresh for each command so repeatable values never leak between runs.
func specFlags() []ucli.Flag {
	return append([]ucli.Flag{
		&ucli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "job spec file (YAML or JSON); flags override its fields"},
		&ucli.StringFlag{Name: "name", Usage: "job name"},
		&ucli.StringFlag{Name: "cpu", Usage: "CPU: 500m, 0.5 or 2 (cores), 500 (millicores; bare integers from 64 up)"},
		&ucli.StringFlag{Name: "memory", Usage: "memory: 256MiB, 1GiB, or 256 (MiB)"},
		&ucli.IntFlag{Name: "gpus", Usage: "whole NVIDIA GPUs; the leader picks which (the best-linked free set on the node)"},
		&ucli.StringFlag{Name: "gpu-memory", Usage: "a share of one GPU's memory, e.g. 20GiB: jobs with shares run side by side on a device (FOREMAN_GPU_MEMORY_MIB)"},
		&ucli.IntFlag{Name: "priority", Usage: "0..100", DefaultText: "50"},
		&ucli.IntFlag{Name: "max-attempts", Usage: "attempts before the job fails", DefaultText: "3"},
		&ucli.StringFlag{Name: "timeout", Usage: "per-attempt time limit, e.g. 10m"},
		&ucli.GenericFlag{Name: "env", Value: &multi{}, Usage: "K=V environment variable (repeatable)"},
		&ucli.GenericFlag{Name: "secret-env", Value: &multi{}, Usage: "K (value from this shell's $K, kept out of argv) or K=V: set in the job's environment, never shown by the API (repeatable)"},
		&ucli.GenericFlag{Name: "label", Value: &multi{}, Usage: "k=v label (repeatable)"},
		&ucli.StringFlag{Name: "driver", Usage: "container, process or http (default: the node's; http with --url)"},
		&ucli.StringFlag{Name: "image", Usage: "OCI image for the container driver"},
		&ucli.StringFlag{Name: "network", Usage: "none (default) or host"},
		&ucli.StringFlag{Name: "user", Usage: "user to run as (name or uid[:gid])"},
		&ucli.StringFlag{Name: "kill-signal", Usage: "signal sent on cancel or timeout (default SIGTERM)"},
		&ucli.StringFlag{Name: "kill-timeout", Usage: "grace period before SIGKILL (default 10s)"},
		&ucli.StringFlag{Name: "queue", Usage: "queue name"},
		&ucli.GenericFlag{Name: "constraint", Value: &multi{}, Usage: "node label constraint, e.g. 'zone == a', or on the GPUs: 'gpu.memory >= 40GiB', 'gpu.model == h100', 'gpu.compute >= 8.0' (repeatable)"},
		&ucli.StringFlag{Name: "placement", Usage: "binpack (default) or spread"},
		&ucli.StringFlag{Name: "run-at", Usage: "start no earlier than this RFC 3339 time"},
		&ucli.StringFlag{Name: "in", Usage: "start no earlier than this long from now, e.g. 10m"},
		&ucli.StringFlag{Name: "deadline", Usage: "fail the job if not done by this RFC 3339 time (or duration from now)"},
		&ucli.StringFlag{Name: "idempotency-key", Usage: "deduplicate retried submits"},
		&ucli.BoolFlag{Name: "allow-unplaceable", Usage: "accept resources larger than any node has now (or a gang larger than the cluster)"},
		&ucli.IntFlag{Name: "gang", Usage: "run N tasks placed together, each on its own node (GANG_* variables)"},
		&ucli.BoolFlag{Name: "gang-pack", Usage: "with --gang: allow several tasks on one node"},
		&ucli.BoolFlag{Name: "preemptible", Usage: "may be preempted by higher priorities; --preemptible=false opts out", DefaultText: "true below priority 50"},
		&ucli.StringFlag{Name: "on-gpu-error", Usage: "keep (default: a running attempt is left alone when a GPU it holds fails) or requeue (stop it and queue the job again, not counted as an attempt; a gang restarts whole)"},
		&ucli.GenericFlag{Name: "depends-on", Value: &multi{}, Usage: "run after these jobs: ID[,ID] (repeatable)"},
		&ucli.GenericFlag{Name: "volume", Value: &multi{}, Usage: "mount the host volume NAME (an agent's --host-volume) at DEST: NAME:DEST[:ro] (repeatable; the job runs only on nodes that declare it)"},
		&ucli.StringFlag{Name: "array", Usage: "run an array of tasks, one per index, each a job of its own (ID JOB.INDEX, $FOREMAN_ARRAY_INDEX): START-END[:STEP][%PARALLEL], e.g. 0-999%50 (at most 50 live at once)"},
		&ucli.BoolFlag{Name: "singleton", Usage: "with --name: run after the singleton job of that name submitted before it in the namespace has ended (one at a time, in submit order)"},
		&ucli.GenericFlag{Name: "after", Value: &multi{}, Usage: "run after this job ends as ok (succeeded, the default), any (any end), failed or cancelled: ID[:ok|any|failed|cancelled][,...] (repeatable; a requirement that can no longer be met cancels this job)"},
		&ucli.GenericFlag{Name: "input", Value: &multi{}, Usage: "SRC[:DEST]: fetch SRC (http(s):// or s3://bucket/key) into the job's directory before it starts, as DEST (default: its file name; a DEST ending in / is a directory) (repeatable)"},
		&ucli.StringFlag{Name: "condition", Usage: "with --depends-on: success (default: all succeeded), failure (one failed), always (all finished), one_success"},
	}, httpJobFlags()...)
}

// specFromFlags builds a job spec from base (the -f file's, or nil) and
// the flags, and the command from the arguments after "--". The
// idempotency key is returned apart because it travels in a header.
func specFromFlags(c *ucli.Context, now time.Time, base *httpapi.JobSpecInput) (httpapi.JobSpecInput, string, error) {
	var spec httpapi.JobSpecInput
	if base != nil {
		spec = *base
	}
	if err := applyFlags(c, &spec, now); err != nil {
		return spec, "", err
	}
	key := spec.IdempotencyKey
	spec.IdempotencyKey = ""
	if len(spec.Command) == 0 && spec.HTTP == nil {
		return spec, "", fmt.Errorf("no command: put it after --, e.g. foreman %s -- echo hello", c.Command.Name)
	}
	return spec, key, nil
}

// singleSpec reads -f (if given) as one job spec; a batch file is refused.
func singleSpec(c *ucli.Context) (*httpapi.JobSpecInput, error) {
	f := c.String("file")
	if f == "" {
		return nil, nil
	}
	specs, batch, err := readSpecFile(f)
	if err != nil {
		return nil, err
	}
	if batch {
		return nil, fmt.Errorf("%s is a batch of %d jobs; use foreman submit -f for batches", f, len(specs))
	}
	return &specs[0], nil
}

// applyFlags overrides spec fields with the flags that were given.
func applyFlags(c *ucli.Context, spec *httpapi.JobSpecInput, now time.Time) error {
	if args := c.Args().Slice(); len(args) > 0 {
		if len(args) == 1 && strings.ContainsAny(args[0], " \t|&;<>$") {
			spec.Command = httpapi.JSONString(args[0]) // one quoted shell line
		} else {
			spec.Command = httpapi.Argv(args...)
		}
	}
	set := func(name string, fn func(string) error) error {
		if !c.IsSet(name) {
			return nil
		}
		if err := fn(c.String(name)); err != nil {
			return fmt.Errorf("--%s: %w", name, err)
		}
		return nil
	}
	str := func(dst *string) func(string) error { return func(s string) error { *dst = s; return nil } }
	dur := func(dst *json.RawMessage) func(string) error {
		return func(s string) error {
			d, err := time.ParseDuration(s)
			if err != nil {
				return fmt.Errorf("%q is not a duration (e.g. 30s, 10m, 2h)", s)
			}
			*dst = httpapi.JSONString(d.String())
			return nil
		}
	}
	res := func() *httpapi.ResourcesInput {
		if spec.Resources == nil {
			spec.Resources = &httpapi.ResourcesInput{}
		}
		return spec.Resources
	}
	steps := []error{
		set("name", str(&spec.Name)),
		set("cpu", func(s string) error {
			m, err := httpapi.ParseCPU(s)
			res().CPU = json.RawMessage(strconv.FormatInt(m, 10))
			return err
		}),
		set("memory", func(s string) error {
			m, err := httpapi.ParseMemory(s)
			res().Memory = json.RawMessage(strconv.FormatInt(m, 10))
			return err
		}),
		set("gpu-memory", func(s string) error {
			m, err := httpapi.ParseMemory(s)
			res().GPUMemory = json.RawMessage(strconv.FormatInt(m, 10))
			return err
		}),
		set("timeout", dur(&spec.Timeout)),
		set("kill-timeout", dur(&spec.KillTimeout)),
		set("driver", str(&spec.Driver)),
		set("image", str(&spec.Image)),
		set("network", str(&spec.Network)),
		set("user", str(&spec.User)),
		set("kill-signal", str(&spec.KillSignal)),
		set("queue", str(&spec.Queue)),
		set("placement", str(&spec.Placement)),
		set("idempotency-key", str(&spec.IdempotencyKey)),
		set("run-at", func(s string) error { return rfc3339(s, &spec.RunAt) }),
		set("in", func(s string) error {
			d, err := time.ParseDuration(s)
			if err != nil || d < 0 {
				return fmt.Errorf("%q is not a positive duration (e.g. 10m)", s)
			}
			if c.IsSet("run-at") {
				return fmt.Errorf("give --run-at or --in, not both")
			}
			spec.RunAt = httpapi.JSONString(now.Add(d).UTC().Format(time.RFC3339Nano))
			return nil
		}),
		set("deadline", func(s string) error {
			if d, err := time.ParseDuration(s); err == nil {
				spec.Deadline = httpapi.JSONString(now.Add(d).UTC().Format(time.RFC3339Nano))
				return nil
			}
			return rfc3339(s, &spec.Deadline)
		}),
	}
	for _, err := range steps {
		if err != nil {
			return err
		}
	}
	if c.IsSet("gpus") {
		g := int64(c.Int("gpus"))
		if g < 0 {
			return fmt.Errorf("--gpus: must be 0 or more (got %d)", g)
		}
		res().GPUs = &g
	}
	if c.IsSet("priority") {
		p := c.Int("priority")
		spec.Priority = &p
	}
	if c.IsSet("max-attempts") {
		n := c.Int("max-attempts")
		spec.MaxAttempts = &n
	}
	if c.IsSet("allow-unplaceable") {
		spec.AllowUnplaceable = c.Bool("allow-unplaceable")
	}
	if c.IsSet("gang") {
		if spec.Gang == nil {
			spec.Gang = &httpapi.GangInput{}
		}
		spec.Gang.Size = c.Int("gang")
	}
	if c.IsSet("gang-pack") {
		if spec.Gang == nil {
			return fmt.Errorf("--gang-pack needs --gang N")
		}
		spread := !c.Bool("gang-pack")
		spec.Gang.Spread = &spread
	}
	if c.IsSet("preemptible") {
		p := c.Bool("preemptible")
		spec.Preemptible = &p
	}
	if c.IsSet("on-gpu-error") {
		spec.OnGPUError = c.String("on-gpu-error")
	}
	var err error
	if spec.Env, err = keyValues(spec.Env, "env", "KEY=VALUE", multiValues(c, "env")); err != nil {
		return err
	}
	for _, kv := range multiValues(c, "secret-env") {
		k, v, ok := strings.Cut(kv, "=")
		if k == "" {
			return fmt.Errorf("--secret-env: want KEY or KEY=VALUE")
		}
		if !ok {
			if v, ok = os.LookupEnv(k); !ok {
				return fmt.Errorf("--secret-env %s: $%s is not set in this shell", k, k)
			}
		}
		if spec.SecretEnv == nil {
			spec.SecretEnv = map[string]string{}
		}
		spec.SecretEnv[k] = v
	}
	if spec.Labels, err = keyValues(spec.Labels, "label", "key=value", multiValues(c, "label")); err != nil {
		return err
	}
	spec.Constraints = append(spec.Constraints, multiValues(c, "constraint")...)
	for _, v := range multiValues(c, "depends-on") {
		for _, id := range strings.Split(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				spec.DependsOn = append(spec.DependsOn, id)
			}
		}
	}
	if c.IsSet("condition") {
		spec.Condition = c.String("condition")
	}
	for _, v := range multiValues(c, "volume") {
		spec.Volumes = append(spec.Volumes, httpapi.Volume(v))
	}
	if c.IsSet("singleton") {
		spec.Singleton = c.Bool("singleton")
	}
	if c.IsSet("array") {
		spec.Array = httpapi.Array(c.String("array"))
	}
	for _, v := range multiValues(c, "after") {
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				spec.After = append(spec.After, httpapi.After(a))
			}
		}
	}
	for _, v := range multiValues(c, "input") {
		spec.Inputs = append(spec.Inputs, parseInputFlag(v))
	}
	return applyHTTPFlags(c, spec)
}

// parseInputFlag reads --input SRC[:DEST]. DEST follows the last ':' of
// SRC's path (after scheme://host[:port]/), so a port is never taken for
// it; a key holding ':' needs an explicit DEST. The server checks both.
func parseInputFlag(v string) httpapi.InputSourceInput {
	pathAt := 0
	if i := strings.Index(v, "://"); i >= 0 {
		if j := strings.IndexByte(v[i+3:], '/'); j >= 0 {
			pathAt = i + 3 + j
		} else {
			return httpapi.InputSourceInput{Source: v}
		}
	}
	if k := strings.LastIndexByte(v[pathAt:], ':'); k >= 0 {
		return httpapi.InputSourceInput{Source: v[:pathAt+k], Dest: v[pathAt+k+1:]}
	}
	return httpapi.InputSourceInput{Source: v}
}

// keyValues adds the k=v values of a repeatable flag to m (made on the
// first); want is the form the error names.
func keyValues(m map[string]string, flag, want string, values []string) (map[string]string, error) {
	for _, kv := range values {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return m, fmt.Errorf("--%s %q: want %s", flag, kv, want)
		}
		if m == nil {
			m = map[string]string{}
		}
		m[k] = v
	}
	return m, nil
}

func multiValues(c *ucli.Context, name string) []string {
	if m, ok := c.Generic(name).(*multi); ok && m != nil {
		return *m
	}
	return nil
}

func rfc3339(s string, dst *json.RawMessage) error {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("%q is not an RFC 3339 time (e.g. 2030-01-02T15:04:05Z)", s)
	}
	*dst = httpapi.JSONString(t.UTC().Format(time.RFC3339Nano))
	return nil
}

// readSpecFile reads one job spec, or a batch ({"jobs": [...]}), from a
// YAML or JSON file ("-" is stdin). Unknown fields are refused here, with
// the field named, before anything is sent.
func readSpecFile(path string) (specs []httpapi.JobSpecInput, batch bool, err error) {
	b, err := readFileOrStdin(path)
	if err != nil {
		return nil, false, err
	}
	return parseSpecFile(path, b)
}

// readFileOrStdin reads the file a flag names; "-" is stdin.
func readFileOrStdin(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}

func parseSpecFile(path string, b []byte) (specs []httpapi.JobSpecInput, batch bool, err error) {
	trimmed := bytes.TrimSpace(b)
	isJSON := len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[')
	if ext := strings.ToLower(filepath.Ext(path)); ext == ".yaml" || ext == ".yml" || !isJSON {
		if b, err = httpapi.YAMLToJSON(b); err != nil {
			return nil, false, fmt.Errorf("%s: %w", path, err)
		}
	}
	var probe struct {
		Jobs []json.RawMessage `json:"jobs"`
	}
	raws := []json.RawMessage{b}
	if json.Unmarshal(b, &probe) == nil && probe.Jobs != nil {
		raws = probe.Jobs
	}
	out := make([]httpapi.JobSpecInput, len(raws))
	for i, raw := range raws {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&out[i]); err != nil {
			where := path
			if len(raws) > 1 || probe.Jobs != nil {
				where = fmt.Sprintf("%s: jobs[%d]", path, i)
			}
			return nil, false, fmt.Errorf("%s: %s", where, strings.TrimPrefix(err.Error(), "json: "))
		}
	}
	return out, probe.Jobs != nil, nil
}
