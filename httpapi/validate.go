package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/foreman-sched/foreman/fsm"
)

// Bounds on a job spec. They keep one job's record (and one raft entry)
// small; docs/api.md lists them.
const (
	MaxNameLen        = 200
	MaxLabels         = 64
	MaxLabelKeyLen    = 63
	MaxLabelValueLen  = 255
	MaxEnv            = 256
	MaxArgs           = 4096
	MaxConstraints    = 32
	MaxPriority       = 100
	MaxMaxAttempts    = 100
	MaxIdemKeyLen     = 256
	MaxQueueNameLen   = 64
	MaxUserLen        = 64
	MaxImageLen       = 1024
	MaxBackoffFactor  = 100
	MaxKillTimeout    = time.Hour
	MaxDependsOn      = 1000
	reservedEnvPrefix = "FOREMAN_"
)

// Compiled on first use, not at package init, which every start of the
// binary (CLI, supervisor, container init) runs.
var (
	labelKeyRe  = lazyRegexp(`^[A-Za-z0-9]([A-Za-z0-9_.\-/]*[A-Za-z0-9])?$`)
	queueNameRe = lazyRegexp(`^[A-Za-z0-9][A-Za-z0-9_.\-]*$`)
	envKeyRe    = lazyRegexp(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// knownSignals are the kill signals a job may ask for.
var knownSignals = map[string]bool{
	"SIGTERM": true, "SIGINT": true, "SIGKILL": true, "SIGHUP": true, "SIGQUIT": true,
	"SIGUSR1": true, "SIGUSR2": true, "SIGALRM": true, "SIGWINCH": true, "SIGPWR": true,
}

// Normalize validates the spec and returns the fsm.JobSpec to commit with
// every default filled in. Errors wrap ErrInvalid and name the field.
func (in *JobSpecInput) Normalize() (fsm.JobSpec, error) {
	var out fsm.JobSpec
	var err error

	if in.Namespace != "" {
		if err := CheckNamespace("namespace", in.Namespace); err != nil {
			return out, err
		}
		out.Namespace = fsm.StoredNamespace(in.Namespace)
	}
	if in.HTTP != nil || in.Driver == HTTPDriver {
		if out.HTTP, err = in.normalizeHTTP(); err != nil {
			return out, err
		}
	} else if out.Command, err = parseCommand(in.Command); err != nil {
		return out, err
	}
	if out.Notify, err = normalizeNotify(in.Notify); err != nil {
		return out, err
	}
	if out.Inputs, err = normalizeInputs(in.Inputs); err != nil {
		return out, err
	}
	if n := utf8.RuneCountInString(in.Name); n > MaxNameLen {
		return out, invalid("name", "must be at most %d characters (got %d)", MaxNameLen, n)
	}
	if hasControl(in.Name) {
		return out, invalid("name", "must not contain control characters")
	}
	out.Name = in.Name

	if err := checkEnv("env", in.Env); err != nil {
		return out, err
	}
	out.Env = in.Env
	if err := checkEnv("secret_env", in.SecretEnv); err != nil {
		return out, err
	}
	if len(in.Env)+len(in.SecretEnv) > MaxEnv {
		return out, invalid("secret_env", "env and secret_env hold at most %d variables together (got %d)", MaxEnv, len(in.Env)+len(in.SecretEnv))
	}
	for k := range in.SecretEnv {
		if _, dup := in.Env[k]; dup {
			return out, invalid("secret_env."+k, "is also in env; set it in one of them")
		}
	}
	out.SecretEnv = in.SecretEnv
	if err := checkLabels("labels", in.Labels); err != nil {
		return out, err
	}
	out.Labels = in.Labels
	if out.Resources, err = in.Resources.normalize(); err != nil {
		return out, err
	}

	out.Priority = DefaultPriority
	if in.Priority != nil {
		if *in.Priority < 0 || *in.Priority > MaxPriority {
			return out, invalid("priority", "must be between 0 and %d (got %d)", MaxPriority, *in.Priority)
		}
		out.Priority = *in.Priority
	}
	out.MaxAttempts = DefaultMaxAttempts
	if in.MaxAttempts != nil {
		if *in.MaxAttempts < 1 || *in.MaxAttempts > MaxMaxAttempts {
			return out, invalid("max_attempts", "must be between 1 and %d (got %d)", MaxMaxAttempts, *in.MaxAttempts)
		}
		out.MaxAttempts = *in.MaxAttempts
	}
	defTimeout := time.Duration(0)
	if out.HTTP != nil {
		defTimeout = DefaultHTTPTimeout
	}
	if out.Timeout, err = parseDuration("timeout", in.Timeout, defTimeout); err != nil {
		return out, err
	}

	switch in.Driver {
	case "", "container", "process", HTTPDriver:
		out.Driver = in.Driver
	default:
		return out, invalid("driver", "must be \"container\", \"process\" or \"http\" (got %q)", in.Driver)
	}
	if out.HTTP != nil {
		out.Driver = HTTPDriver
	}
	if in.Image != "" && out.Driver != "container" && out.Driver != "" {
		return out, invalid("image", "the %s driver cannot run an image; use driver \"container\"", out.Driver)
	}
	if len(in.Image) > MaxImageLen || hasControl(in.Image) || strings.ContainsAny(in.Image, " \t") {
		return out, invalid("image", "must be an image reference of at most %d characters without spaces", MaxImageLen)
	}
	out.Image = in.Image
	if out.Network, err = either("network", in.Network, DefaultNetwork, "none", "host"); err != nil {
		return out, err
	}
	if len(in.User) > MaxUserLen || hasControl(in.User) || strings.ContainsAny(in.User, " \t") {
		return out, invalid("user", "must be a user name or uid[:gid] of at most %d characters", MaxUserLen)
	}
	out.User = in.User
	if out.KillSignal, err = normalizeSignal(in.KillSignal); err != nil {
		return out, err
	}
	if out.KillTimeout, err = parseDuration("kill_timeout", in.KillTimeout, DefaultKillTimeout); err != nil {
		return out, err
	}
	if out.KillTimeout.D() > MaxKillTimeout {
		return out, invalid("kill_timeout", "must be at most %s (got %s)", MaxKillTimeout, out.KillTimeout.D())
	}

	if in.Queue != "" {
		if err := CheckQueueName("queue", in.Queue); err != nil {
			return out, err
		}
	}
	out.Queue = in.Queue
	if len(in.Constraints) > MaxConstraints {
		return out, invalid("constraints", "at most %d constraints (got %d)", MaxConstraints, len(in.Constraints))
	}
	for i, c := range in.Constraints {
		if _, err := fsm.ParseConstraint(c); err != nil {
			return out, invalid(fmt.Sprintf("constraints[%d]", i), "%v", err)
		}
	}
	out.Constraints = in.Constraints
	if out.Placement, err = either("placement", in.Placement, DefaultPlacement, "binpack", "spread"); err != nil {
		return out, err
	}
	if out.Backoff, err = in.Backoff.normalize(); err != nil {
		return out, err
	}
	for i, c := range in.NoRetryExitCodes {
		if c < 0 || c > 255 {
			return out, invalid(fmt.Sprintf("no_retry_exit_codes[%d]", i), "must be an exit code between 0 and 255 (got %d)", c)
		}
	}
	out.NoRetryExitCodes = in.NoRetryExitCodes
	if out.RunAt, err = parseTime("run_at", in.RunAt); err != nil {
		return out, err
	}
	if out.Deadline, err = parseTime("deadline", in.Deadline); err != nil {
		return out, err
	}
	if out.RunAt != nil && out.Deadline != nil && !out.Deadline.After(*out.RunAt) {
		return out, invalid("deadline", "must be after run_at (%s)", out.RunAt.Format(time.RFC3339))
	}
	out.AllowUnplaceable = in.AllowUnplaceable
	if in.Singleton {
		switch {
		case in.Name == "":
			return out, invalid("singleton", "needs a name: the singleton jobs of one name run one at a time")
		case in.Condition != "" || len(in.DependsOn) > 0 && len(in.After) == 0:
			return out, invalid("singleton", "set with depends_on or condition: give the job's other parents in after")
		}
		out.Singleton = true
	}
	for i, v := range in.Volumes {
		m, err := v.parse()
		if err != nil {
			return out, invalid(fmt.Sprintf("volumes[%d]", i), "%v", err)
		}
		out.Volumes = append(out.Volumes, m)
	}
	if err := fsm.CheckVolumeMounts("volumes", out.Volumes); err != nil {
		field, reason, _ := strings.Cut(err.Error(), ": ")
		return out, invalid(field, "%s", reason)
	}
	if len(in.After) > 0 {
		if out.DependsOn, out.After, err = normalizeAfter(in); err != nil {
			return out, err
		}
	} else {
		if err := checkDepends(in.DependsOn, in.Condition); err != nil {
			return out, err
		}
		out.DependsOn, out.Condition = in.DependsOn, fsm.Condition(in.Condition)
	}
	if in.Array != nil {
		a, err := in.Array.parse()
		if err != nil {
			return out, invalid("array", "%v", err)
		}
		if in.Gang != nil {
			return out, invalid("array", "a gang cannot be an array (each task of an array is placed on its own)")
		}
		out.Array = &a
	}
	if g := in.Gang; g != nil {
		switch {
		case g.Size < 2:
			return out, invalid("gang.size", "must be at least 2 (got %d; a single task is a plain job)", g.Size)
		case g.Size > fsm.MaxGangSize:
			return out, invalid("gang.size", "must be at most %d (got %d)", fsm.MaxGangSize, g.Size)
		case out.HTTP != nil:
			return out, invalid("gang", "an http job cannot be a gang")
		}
		out.Gang = &fsm.GangSpec{Size: g.Size, Spread: g.Spread}
	}
	out.Preemptible = in.Preemptible
	switch in.OnGPUError {
	case "", fsm.GPUErrorKeep, fsm.GPUErrorRequeue:
		out.OnGPUError = in.OnGPUError
	default:
		return out, invalid("on_gpu_error", "must be %s or %s (got %q)", fsm.GPUErrorKeep, fsm.GPUErrorRequeue, in.OnGPUError)
	}

	if len(in.IdempotencyKey) > MaxIdemKeyLen || hasControl(in.IdempotencyKey) {
		return out, invalid("idempotency_key", "must be at most %d printable characters", MaxIdemKeyLen)
	}
	return out, nil
}

// parseCommand accepts an argv array or a shell string.
func parseCommand(raw json.RawMessage) ([]string, error) {
	if isNull(raw) {
		return nil, invalid("command", "must not be empty")
	}
	raw = bytes.TrimSpace(raw)
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, invalid("command", "malformed string: %v", err)
		}
		if strings.TrimSpace(s) == "" {
			return nil, invalid("command", "must not be empty")
		}
		if strings.ContainsRune(s, 0) {
			return nil, invalid("command", "must not contain NUL bytes")
		}
		return []string{"/bin/sh", "-c", s}, nil
	case '[':
		var argv []string
		if err := json.Unmarshal(raw, &argv); err != nil {
			return nil, invalid("command", "must be an array of strings or a string")
		}
		if len(argv) == 0 {
			return nil, invalid("command", "must not be empty")
		}
		if len(argv) > MaxArgs {
			return nil, invalid("command", "at most %d arguments (got %d)", MaxArgs, len(argv))
		}
		if strings.TrimSpace(argv[0]) == "" {
			return nil, invalid("command[0]", "must name a program")
		}
		for i, a := range argv {
			if strings.ContainsRune(a, 0) {
				return nil, invalid(fmt.Sprintf("command[%d]", i), "must not contain NUL bytes")
			}
		}
		return argv, nil
	}
	return nil, invalid("command", "must be an array of strings or a string")
}

func (r *ResourcesInput) normalize() (fsm.Resources, error) {
	var out fsm.Resources
	if r == nil {
		return out, nil
	}
	var err error
	if out.CPU, err = parseQuantity("resources.cpu", r.CPU, ParseCPU, MaxCPUMillis, "millicores"); err != nil {
		return out, err
	}
	if out.MemoryMB, err = parseQuantity("resources.memory", r.Memory, ParseMemory, MaxMemoryMiB, "MiB"); err != nil {
		return out, err
	}
	for _, k := range slices.Sorted(maps.Keys(r.Named)) {
		v := r.Named[k]
		f := "resources.named." + k
		if !labelKeyRe().MatchString(k) || len(k) > MaxLabelKeyLen {
			return out, invalid(f, "resource names use letters, digits, '_', '-', '.', '/' (at most %d characters)", MaxLabelKeyLen)
		}
		if v < 0 || v > MaxNamed {
			return out, invalid(f, "must be between 0 and %d (got %d)", MaxNamed, v)
		}
	}
	if len(r.Named) > 0 {
		out.Named = maps.Clone(r.Named)
	}
	if r.GPUs != nil {
		g := *r.GPUs
		if g < 0 || g > MaxNamed {
			return out, invalid("resources.gpus", "must be between 0 and %d (got %d)", MaxNamed, g)
		}
		if v, ok := r.Named["gpu"]; ok && v != g {
			return out, invalid("resources.gpus", "%d conflicts with resources.named.gpu %d: give one", g, v)
		}
		if g > 0 {
			if out.Named == nil {
				out.Named = map[string]int64{}
			}
			out.Named["gpu"] = g
		}
	}
	if err := r.normalizeGPUMemory(&out); err != nil {
		return out, err
	}
	return out, nil
}

// normalizeGPUMemory reads resources.gpu_memory, a share of one GPU's
// memory (issue 24). gpus: 1 beside it means the same one device and is
// dropped (a share holds no whole GPU); more GPUs are refused, since a
// share is of one device.
func (r *ResourcesInput) normalizeGPUMemory(out *fsm.Resources) error {
	if isNull(r.GPUMemory) {
		return nil
	}
	mib, err := parseQuantity("resources.gpu_memory", r.GPUMemory, ParseMemory, MaxMemoryMiB, "MiB")
	if err != nil {
		return err
	}
	g := out.Named["gpu"]
	switch {
	case mib == 0 && g == 0:
		return invalid("resources.gpu_memory", "must be more than 0 (a share of one GPU's memory, e.g. 20GiB)")
	case mib == 0:
		return nil // whole GPUs, no share
	case g > 1:
		return invalid("resources.gpu_memory", "a share is of one GPU; with gpus %d ask for whole GPUs only (or gpus 1)", g)
	}
	delete(out.Named, "gpu")
	if len(out.Named) == 0 {
		out.Named = nil
	}
	out.GPUMemoryMiB = mib
	return nil
}

// parseQuantity reads a number (already in unit) or a string with units.
func parseQuantity(field string, raw json.RawMessage, parse func(string) (int64, error), limit int64, unit string) (int64, error) {
	if isNull(raw) {
		return 0, nil
	}
	var v int64
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if v, err = parse(s); err != nil {
			return 0, invalid(field, "%v", err)
		}
	} else {
		var f float64
		if err := json.Unmarshal(raw, &f); err != nil {
			return 0, invalid(field, "must be a number of %s or a string with units", unit)
		}
		if f != math.Trunc(f) {
			return 0, invalid(field, "a bare number is whole %s (got %v); use a string such as \"0.5\" for units", unit, f)
		}
		if f < 0 || f > float64(limit) {
			return 0, invalid(field, "must be between 0 and %d %s (got %v)", limit, unit, f)
		}
		v = int64(f)
	}
	if v < 0 || v > limit {
		return 0, invalid(field, "must be between 0 and %d %s (got %d)", limit, unit, v)
	}
	return v, nil
}

func (b *BackoffInput) normalize() (fsm.Backoff, error) {
	out := DefaultBackoff
	if b == nil {
		return out, nil
	}
	var err error
	if out.Initial, err = parseDuration("backoff.initial", b.Initial, DefaultBackoff.Initial.D()); err != nil {
		return out, err
	}
	if out.Max, err = parseDuration("backoff.max", b.Max, max(DefaultBackoff.Max.D(), out.Initial.D())); err != nil {
		return out, err
	}
	if out.Max < out.Initial {
		return out, invalid("backoff.max", "must be at least backoff.initial (%s)", out.Initial.D())
	}
	if b.Multiplier != nil {
		if *b.Multiplier < 1 || *b.Multiplier > MaxBackoffFactor {
			return out, invalid("backoff.multiplier", "must be between 1 and %d (got %v)", MaxBackoffFactor, *b.Multiplier)
		}
		out.Multiplier = *b.Multiplier
	}
	if b.Jitter != nil {
		if *b.Jitter < 0 || *b.Jitter > 1 {
			return out, invalid("backoff.jitter", "must be a fraction between 0 and 1 (got %v)", *b.Jitter)
		}
		out.Jitter = *b.Jitter
	}
	return out, nil
}

// parseDuration reads a Go duration string or a number of seconds; absent
// gives def. Negative durations are refused.
func parseDuration(field string, raw json.RawMessage, def time.Duration) (fsm.Duration, error) {
	if isNull(raw) {
		return fsm.Duration(def), nil
	}
	var d fsm.Duration
	if err := json.Unmarshal(raw, &d); err != nil {
		return 0, invalid(field, "%v", err)
	}
	if d < 0 {
		return 0, invalid(field, "must not be negative (got %s)", d.D())
	}
	return d, nil
}

// parseTime reads an RFC 3339 timestamp; absent gives nil.
func parseTime(field string, raw json.RawMessage) (*time.Time, error) {
	if isNull(raw) {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, invalid(field, "must be an RFC 3339 time string such as \"2030-01-02T15:04:05Z\"")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, invalid(field, "must be an RFC 3339 time such as \"2030-01-02T15:04:05Z\" (got %q)", s)
	}
	t = t.UTC()
	return &t, nil
}

// normalizeSignal accepts "TERM", "sigterm" or "SIGTERM"; empty is the default.
func normalizeSignal(s string) (string, error) {
	if s == "" {
		return DefaultKillSignal, nil
	}
	up := strings.ToUpper(s)
	if !strings.HasPrefix(up, "SIG") {
		up = "SIG" + up
	}
	if !knownSignals[up] {
		return "", invalid("kill_signal", "unknown signal %q (use e.g. SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGKILL)", s)
	}
	return up, nil
}

func checkEnv(field string, env map[string]string) error {
	if len(env) > MaxEnv {
		return invalid(field, "at most %d variables (got %d)", MaxEnv, len(env))
	}
	for _, k := range slices.Sorted(maps.Keys(env)) { // the first error in a stable order
		v := env[k]
		if !envKeyRe().MatchString(k) {
			return invalid(field+"."+k, "variable names use letters, digits and '_' and do not start with a digit")
		}
		if strings.HasPrefix(strings.ToUpper(k), reservedEnvPrefix) {
			return invalid(field+"."+k, "names starting with %s are set by foreman", reservedEnvPrefix)
		}
		if strings.ContainsRune(v, 0) {
			return invalid(field+"."+k, "must not contain NUL bytes")
		}
	}
	return nil
}

// checkLabels bounds a label map (job labels, list filters).
func checkLabels(field string, labels map[string]string) error {
	if len(labels) > MaxLabels {
		return invalid(field, "at most %d labels (got %d)", MaxLabels, len(labels))
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		v := labels[k]
		if len(k) > MaxLabelKeyLen || !labelKeyRe().MatchString(k) {
			return invalid(field+"."+k, "label keys are 1 to %d letters, digits, '_', '-', '.', '/' and start and end with a letter or digit", MaxLabelKeyLen)
		}
		if len(v) > MaxLabelValueLen || hasControl(v) {
			return invalid(field+"."+k, "label values are at most %d printable characters", MaxLabelValueLen)
		}
	}
	return nil
}

// CheckQueueName validates a queue name (shared by the spec and PUT /v1/queues).
func CheckQueueName(field, name string) error {
	if len(name) > MaxQueueNameLen || !queueNameRe().MatchString(name) {
		return invalid(field, "queue names are 1 to %d letters, digits, '_', '-', '.' and start with a letter or digit (got %q)", MaxQueueNameLen, name)
	}
	return nil
}

// either is v when it is a or b, def when it is empty; anything else is
// refused, naming field.
func either(field, v, def, a, b string) (string, error) {
	switch v {
	case "":
		return def, nil
	case a, b:
		return v, nil
	}
	return "", invalid(field, "must be %q or %q (got %q)", a, b, v)
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, unicode.IsControl)
}

// normalizeAfter turns after into the parents (depends_on, in order) and
// their requirements (fsm.AfterDep).
func normalizeAfter(in *JobSpecInput) ([]string, []fsm.AfterDep, error) {
	switch {
	case len(in.DependsOn) > 0 && !sameParents(in.DependsOn, in.After):
		return nil, nil, invalid("after", "set with other parents in depends_on: list each parent once, in after (each with its requirement) or in depends_on (all under one condition)")
	case in.Condition != "":
		return nil, nil, invalid("after", "set with condition: each entry of after carries its own requirement (ID:ok|any|failed|cancelled)")
	}
	ids := make([]string, len(in.After))
	deps := make([]fsm.AfterDep, len(in.After))
	for i, a := range in.After {
		d, err := a.parse()
		if err != nil {
			return nil, nil, invalid(fmt.Sprintf("after[%d]", i), "%v", err)
		}
		ids[i], deps[i] = d.Job, d
	}
	if err := checkDepends(ids, ""); err != nil {
		return nil, nil, renameField(err, "depends_on", "after")
	}
	return ids, deps, nil
}

// sameParents reports whether deps names after's jobs in after's order: a
// job's spec as returned (both filled), submitted again.
func sameParents(deps []string, after []AfterInput) bool {
	if len(deps) != len(after) {
		return false
	}
	for i, a := range after {
		d, err := a.parse()
		if err != nil || d.Job != deps[i] {
			return false
		}
	}
	return true
}

// checkDepends checks the shape of depends_on and condition; that the
// parents exist (and form no cycle) is checked where they are resolved.
func checkDepends(deps []string, cond string) error {
	if len(deps) > MaxDependsOn {
		return invalid("depends_on", "at most %d parents (got %d)", MaxDependsOn, len(deps))
	}
	seen := make(map[string]bool, len(deps))
	for i, d := range deps {
		if d == "" || len(d) > MaxNameLen || hasControl(d) {
			return invalid(fmt.Sprintf("depends_on[%d]", i), "must be a job ID or name of at most %d printable characters", MaxNameLen)
		}
		if seen[d] {
			return invalid(fmt.Sprintf("depends_on[%d]", i), "%q is listed twice", d)
		}
		seen[d] = true
	}
	if !fsm.Condition(cond).Valid() {
		return invalid("condition", "must be one of %v (got %q)", fsm.Conditions, cond)
	}
	if cond != "" && len(deps) == 0 {
		return invalid("condition", "needs depends_on")
	}
	return nil
}

// CheckNamespace validates a namespace name (the same rule as queue and
// schedule names).
func CheckNamespace(field, ns string) error {
	switch {
	case ns == "":
		return invalid(field, "is empty")
	case len(ns) > MaxNameLen:
		return invalid(field, "must be at most %d characters", MaxNameLen)
	case !queueNameRe().MatchString(ns):
		return invalid(field, "%q: use letters, digits, '.', '_' and '-', starting with a letter or digit", ns)
	}
	return nil
}
