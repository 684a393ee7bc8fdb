package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"

	"github.com/foreman-sched/foreman/fsm"
)

// submitJobs handles POST /v1/jobs: one spec, or {"jobs":[...]}. Every job
// is validated before anything is applied, and a batch is one member of one
// raft entry, so a batch lands whole or not at all. Concurrent submits
// share entries (groupcommit.go); on a follower they are validated here and
// forwarded to the leader in groups (groupforward.go).
func (s *server) submitJobs(w http.ResponseWriter, r *http.Request) {
	body, err := s.readBody(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	jobs, batch, err := s.parseSubmit(body, r.Header.Get(HeaderIdempotencyKey))
	if err == nil {
		err = s.settleNamespaces(r, jobs, batch)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	release, err := s.admit(len(jobs))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, node, err := s.submits.submit(r.Context(), jobs, batch)
	release()
	if node != "" {
		w.Header().Set(HeaderNode, node) // the leader committed it
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]SubmitResponse, len(res))
	created := false
	for i, j := range res {
		out[i] = SubmitResponse{ID: j.ID, Duplicate: j.Duplicate}
		created = created || !j.Duplicate
	}
	status := http.StatusOK // every job was already known
	if created {
		status = http.StatusCreated
	}
	if !batch {
		w.Header().Set("Location", "/v1/jobs/"+out[0].ID)
	}
	writeSubmitResponse(w, status, out, batch)
}

// writeSubmitResponse writes what writeJSON writes for a SubmitResponse
// (single) or a BatchSubmitResponse, byte for byte, without reflection: it
// was 7% of the leader's CPU under many single-job submits.
func writeSubmitResponse(w http.ResponseWriter, status int, out []SubmitResponse, batch bool) {
	for _, o := range out {
		if !plainID(o.ID) {
			if batch {
				writeJSON(w, status, BatchSubmitResponse{Jobs: out})
			} else {
				writeJSON(w, status, out[0])
			}
			return
		}
	}
	b := make([]byte, 0, 32+len(out)*64)
	one := func(b []byte, indent string, o SubmitResponse) []byte {
		b = append(b, "{\n"...)
		b = append(b, indent+`  "id": "`...)
		b = append(b, o.ID...)
		b = append(b, "\",\n"...)
		b = append(b, indent+`  "duplicate": `...)
		b = strconv.AppendBool(b, o.Duplicate)
		b = append(b, "\n"...)
		return append(b, indent+"}"...)
	}
	if batch {
		b = append(b, "{\n  \"jobs\": ["...)
		for i, o := range out {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, "\n    "...)
			b = one(b, "    ", o)
		}
		if len(out) > 0 {
			b = append(b, "\n  "...)
		}
		b = append(b, "]\n}"...)
	} else {
		b = one(b, "", out[0])
	}
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b) // the client went away; nothing useful to do
}

// plainID reports whether id needs no JSON escaping (job IDs are ULIDs).
func plainID(id string) bool {
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// parseSubmit decodes and normalises a submit body. batch reports whether
// the body was {"jobs":[...]}.
//
// The body is parsed once, straight into the specs (parseSubmitFast). Any
// body that path is not sure about (a decode error, "jobs" next to spec
// fields, a null job, an empty batch) is parsed again by parseSubmitExact,
// which names the offending field; the two agree on every body
// (TestParseSubmitPathsAgree).
func (s *server) parseSubmit(body []byte, headerKey string) (jobs []fsm.NewJob, batch bool, err error) {
	if jobs, batch, ok, err := s.parseSubmitFast(body, headerKey); ok {
		return jobs, batch, err
	}
	return s.parseSubmitExact(body, headerKey)
}

// submitBody is every shape of a submit body at once: the fields of one
// spec, or jobs.
type submitBody struct {
	JobSpecInput
	Jobs []JobSpecInput `json:"jobs"`
}

// parseSubmitFast handles the common bodies in one decode; ok is false
// when parseSubmitExact must decide (and word the error).
func (s *server) parseSubmitFast(body []byte, headerKey string) (jobs []fsm.NewJob, batch, ok bool, err error) {
	var in submitBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if dec.Decode(&in) != nil {
		return nil, false, false, nil
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, false, false, nil
	}
	if in.Jobs == nil {
		// A "jobs": null (which decodes like no jobs at all) makes the
		// body a batch; escapes could spell the key, so they go the
		// exact way too.
		if containsFoldASCII(body, `"jobs"`) || bytes.Contains(body, []byte(`\u`)) {
			return nil, false, false, nil
		}
		jobs, err := s.singleJob(in.JobSpecInput, headerKey)
		return jobs, false, true, err
	}
	if len(in.Jobs) == 0 || !reflect.ValueOf(in.JobSpecInput).IsZero() || headerKey != "" || len(in.Jobs) > s.cfg.MaxBatchJobs {
		return nil, true, false, nil
	}
	out := make([]fsm.NewJob, len(in.Jobs))
	for i := range in.Jobs {
		if reflect.ValueOf(in.Jobs[i]).IsZero() { // null or {}: the exact path words it
			return nil, true, false, nil
		}
		spec, err := in.Jobs[i].Normalize()
		if err != nil {
			return nil, true, true, prefixField(fmt.Sprintf("jobs[%d]", i), err)
		}
		out[i] = fsm.NewJob{Spec: spec, IdempotencyKey: in.Jobs[i].IdempotencyKey}
	}
	return out, true, true, nil
}

// containsFoldASCII reports whether b contains sub, ignoring ASCII case
// (encoding/json matches keys that way).
func containsFoldASCII(b []byte, sub string) bool {
	for i := 0; i+len(sub) <= len(b); i++ {
		if bytes.EqualFold(b[i:i+len(sub)], []byte(sub)) {
			return true
		}
	}
	return false
}

// parseSubmitExact decodes a submit body step by step, so that an error
// names the field (jobs[3].command) it is about.
func (s *server) parseSubmitExact(body []byte, headerKey string) (jobs []fsm.NewJob, batch bool, err error) {
	var probe struct {
		Jobs json.RawMessage `json:"jobs"`
	}
	if json.Unmarshal(body, &probe) == nil && probe.Jobs != nil {
		return s.parseBatch(body, headerKey)
	}
	var in JobSpecInput
	if err := decodeStrict(body, &in); err != nil {
		return nil, false, err
	}
	jobs, err = s.singleJob(in, headerKey)
	return jobs, false, err
}

// singleJob normalises the spec of a single-job submit and settles its
// idempotency key (body field or header).
func (s *server) singleJob(in JobSpecInput, headerKey string) ([]fsm.NewJob, error) {
	spec, err := in.Normalize()
	if err != nil {
		return nil, err
	}
	key := in.IdempotencyKey
	if headerKey != "" {
		if key != "" && key != headerKey {
			return nil, invalid("idempotency_key", "differs from the %s header; send one or the other", HeaderIdempotencyKey)
		}
		if len(headerKey) > MaxIdemKeyLen || hasControl(headerKey) {
			return nil, invalid(HeaderIdempotencyKey, "must be at most %d printable characters", MaxIdemKeyLen)
		}
		key = headerKey
	}
	return []fsm.NewJob{{Spec: spec, IdempotencyKey: key}}, nil
}

func (s *server) parseBatch(body []byte, headerKey string) ([]fsm.NewJob, bool, error) {
	if headerKey != "" {
		return nil, true, invalid(HeaderIdempotencyKey, "applies to single-job submits; give each job of a batch its own idempotency_key")
	}
	var req struct {
		Jobs []json.RawMessage `json:"jobs"`
	}
	if err := decodeStrict(body, &req); err != nil {
		return nil, true, err
	}
	if len(req.Jobs) == 0 {
		return nil, true, invalid("jobs", "must contain at least one job")
	}
	if len(req.Jobs) > s.cfg.MaxBatchJobs {
		return nil, true, fmt.Errorf("%w: jobs: at most %d jobs per batch (got %d); split the batch", ErrBatchTooLarge, s.cfg.MaxBatchJobs, len(req.Jobs))
	}
	out := make([]fsm.NewJob, len(req.Jobs))
	for i, raw := range req.Jobs {
		prefix := fmt.Sprintf("jobs[%d]", i)
		if isNull(raw) {
			return nil, true, invalid(prefix, "must be a job spec, not null")
		}
		var in JobSpecInput
		if err := decodeStrict(raw, &in); err != nil {
			return nil, true, prefixField(prefix, err)
		}
		spec, err := in.Normalize()
		if err != nil {
			return nil, true, prefixField(prefix, err)
		}
		out[i] = fsm.NewJob{Spec: spec, IdempotencyKey: in.IdempotencyKey}
	}
	return out, true, nil
}

// capacityLimits are the largest capacities among the nodes, against which
// a submit's jobs are checked (see check).
type capacityLimits struct {
	cpu, mem *fsm.Node            // largest CPU / memory; nil: no nodes yet
	named    map[string]*fsm.Node // largest of each named resource
	// gpuMem is the node with the largest GPU (by memory), gpuMemMiB that
	// memory; nil: no node reports GPU memory.
	gpuMem    *fsm.Node
	gpuMemMiB int64
	nodes     []fsm.Node      // every node that has not left (gangs count them)
	volumes   map[string]bool // every volume a node that has not left declares
	agents    agentAddrs      // the nodes' API addresses (webhooks must not call them)
	// policies holds the namespace records (quota and policy) by display
	// name; a namespace without one has the default policy.
	policies map[string]*fsm.Namespace
}

// nodeLimitsMemo is the node part of capacityLimits for one version of
// the node records (fsm.Tx.NodesVersion): every submit batch checks
// against it, and with thousands of nodes building it was most of a
// leader's submit work, though node records rarely change. Shared and
// read-only.
type nodeLimitsMemo struct {
	version uint64
	limits  capacityLimits // policies unset
}

// capacityLimits reads the nodes' capacities from the local state.
func (s *server) capacityLimits() (*capacityLimits, error) {
	var l capacityLimits
	var nss []fsm.Namespace
	if err := s.state.View(func(tx *fsm.Tx) error {
		version, exact := tx.NodesVersion()
		if m := s.nodeLimits.Load(); exact && m != nil && m.version == version {
			l = m.limits
		} else {
			nodes, err := tx.Nodes()
			if err != nil {
				return err
			}
			l = nodeLimits(nodes)
			if exact {
				s.nodeLimits.Store(&nodeLimitsMemo{version: version, limits: l})
			}
		}
		var err error
		nss, err = tx.Namespaces()
		return err
	}); err != nil {
		return nil, err
	}
	for i := range nss {
		if l.policies == nil {
			l.policies = map[string]*fsm.Namespace{}
		}
		l.policies[nss[i].Name] = &nss[i]
	}
	return &l, nil
}

// nodeLimits is the node part of capacityLimits.
func nodeLimits(nodes []fsm.Node) capacityLimits {
	l := capacityLimits{named: map[string]*fsm.Node{}, agents: newAgentAddrs(nodes)}
	for i := range nodes {
		n := &nodes[i]
		if n.Gossip == fsm.NodeLeft {
			continue
		}
		l.nodes = append(l.nodes, *n)
		for _, v := range n.Volumes {
			if l.volumes == nil {
				l.volumes = map[string]bool{}
			}
			l.volumes[v.Name] = true
		}
		if l.cpu == nil || n.Capacity.CPU > l.cpu.Capacity.CPU {
			l.cpu = n
		}
		if l.mem == nil || n.Capacity.MemoryMB > l.mem.Capacity.MemoryMB {
			l.mem = n
		}
		for k, v := range n.Capacity.Named {
			if b := l.named[k]; b == nil || v > b.Capacity.Named[k] {
				l.named[k] = n
			}
		}
		for _, g := range n.GPUs {
			if g.MemoryMiB > l.gpuMemMiB {
				l.gpuMem, l.gpuMemMiB = n, g.MemoryMiB
			}
		}
	}
	return l
}

// check refuses jobs that ask for more than the largest node has (unless
// allow_unplaceable): such a job would sit queued forever. With no nodes
// registered yet there is nothing to compare with, so all pass. batch
// says whether to name fields jobs[i].x.
func (l *capacityLimits) check(jobs []fsm.NewJob, batch bool) error {
	if err := l.agents.check(jobs, batch); err != nil {
		return err
	}
	for i := range jobs {
		if err := checkPolicy(l.policies[fsm.NamespaceOf(jobs[i].Spec.Namespace)], &jobs[i].Spec, i, batch); err != nil {
			return err
		}
	}
	if l.cpu == nil {
		return nil
	}
	const hint = "; set allow_unplaceable to queue it anyway"
	for i, j := range jobs {
		if j.Spec.AllowUnplaceable {
			continue
		}
		field := func(f string) string {
			if batch {
				return fmt.Sprintf("jobs[%d].%s", i, f)
			}
			return f
		}
		res := j.Spec.Resources
		if res.CPU > l.cpu.Capacity.CPU {
			return invalid(field("resources.cpu"), "%sm is more than any node has (largest: %s with %sm)%s",
				fmt.Sprint(res.CPU), l.cpu.Name, fmt.Sprint(l.cpu.Capacity.CPU), hint)
		}
		if res.MemoryMB > l.mem.Capacity.MemoryMB {
			return invalid(field("resources.memory"), "%s is more than any node has (largest: %s with %s)%s",
				FormatMemory(res.MemoryMB), l.mem.Name, FormatMemory(l.mem.Capacity.MemoryMB), hint)
		}
		if g := res.GPUMemoryMiB; g > 0 && g > l.gpuMemMiB {
			if l.gpuMem == nil {
				return invalid(field("resources.gpu_memory"), "no node has GPUs with known memory%s", hint)
			}
			return invalid(field("resources.gpu_memory"), "no GPU has %s of memory (largest: %s with %s)%s",
				FormatMemory(g), l.gpuMem.Name, FormatMemory(l.gpuMemMiB), hint)
		}
		for _, k := range slices.Sorted(maps.Keys(res.Named)) {
			v := res.Named[k]
			if v == 0 {
				continue
			}
			b := l.named[k]
			if b == nil && k == "gpu" {
				return invalid(field("resources.gpus"), "no node has GPUs%s", hint)
			}
			if b == nil {
				return invalid(field("resources.named."+k), "no node has %q%s", k, hint)
			}
			if k == "gpu" {
				if v > b.Capacity.Named[k] {
					return invalid(field("resources.gpus"), "no node has %d GPUs (largest: %s with %d)%s", v, b.Name, b.Capacity.Named[k], hint)
				}
				continue
			}
			if v > b.Capacity.Named[k] {
				return invalid(field("resources.named."+k), "%d is more than any node has (largest: %s with %d)%s", v, b.Name, b.Capacity.Named[k], hint)
			}
		}
		for k, v := range j.Spec.Volumes {
			if !l.volumes[v.Name] {
				return invalid(field(fmt.Sprintf("volumes[%d]", k)), "no node declares volume %q (agent --host-volume %s=PATH)%s", v.Name, v.Name, hint)
			}
		}
		if g := j.Spec.Gang; g != nil && g.SpreadTasks() {
			if hold := l.nodesHolding(&res); hold < g.Size {
				return invalid(field("gang.size"), "%d tasks on distinct nodes need %d nodes that can hold one task; the cluster has %d (of %d nodes)%s",
					g.Size, g.Size, hold, len(l.nodes), hint)
			}
		}
	}
	return nil
}

// queryNamespace reads ?namespace= in its stored form ("" = default);
// allowAll lets "*" (every namespace) through for listings.
func queryNamespace(r *http.Request, allowAll bool) (string, error) {
	ns := r.URL.Query().Get("namespace")
	switch {
	case ns == "":
		return "", nil
	case ns == AllNamespaces && allowAll:
		return AllNamespaces, nil
	}
	if err := CheckNamespace("namespace", ns); err != nil {
		return "", err
	}
	return fsm.StoredNamespace(ns), nil
}

// settleNamespaces gives every job the namespace of its spec or of
// ?namespace= (they must agree), checks the token may submit there, and
// scopes idempotency keys to the namespace, so one tenant cannot learn
// another's job IDs by reusing its keys.
func (s *server) settleNamespaces(r *http.Request, jobs []fsm.NewJob, batch bool) error {
	qns, err := queryNamespace(r, false)
	if err != nil {
		return err
	}
	q := r.URL.Query().Get("namespace")
	by := s.submitter(r)
	for i := range jobs {
		jobs[i].SubmittedBy = by
		sp := &jobs[i].Spec
		if q != "" && sp.Namespace != qns && sp.Namespace != "" {
			f := "namespace"
			if batch {
				f = fmt.Sprintf("jobs[%d].namespace", i)
			}
			return invalid(f, "%q differs from ?namespace=%s; give one or make them agree", fsm.NamespaceOf(sp.Namespace), q)
		}
		if sp.Namespace == "" {
			sp.Namespace = qns
		}
		if err := s.allow(r, PermSubmit, sp.Namespace); err != nil {
			return err
		}
		if sp.Namespace != "" && jobs[i].IdempotencyKey != "" {
			jobs[i].IdempotencyKey = sp.Namespace + "/" + jobs[i].IdempotencyKey
		}
	}
	return nil
}

// nodesHolding counts the nodes whose whole capacity could hold req.
func (l *capacityLimits) nodesHolding(req *fsm.Resources) int {
	n := 0
	for i := range l.nodes {
		c := &l.nodes[i].Capacity
		ok := req.CPU <= c.CPU && req.MemoryMB <= c.MemoryMB
		for k, v := range req.Named {
			ok = ok && v <= c.Named[k]
		}
		if ok {
			n++
		}
	}
	return n
}

// submitter is the name of the request's token, which its jobs' usage is
// accounted to ("" with ACL off, for a token without a name, or while
// some server cannot apply the field: the spec's user is used then).
func (s *server) submitter(r *http.Request) string {
	id := identityOf(r)
	if id == nil || id.token == nil || id.token.Name == "" {
		return ""
	}
	if s.cluster.FeatureGate().Check(fsm.FeatureUsage) != nil {
		return ""
	}
	return id.token.Name
}
