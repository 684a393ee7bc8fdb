package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Headers the API reads or sets.
const (
	// HeaderForwarded marks a request one node proxied to another; a node
	// never proxies such a request again, so a leadership change cannot
	// bounce a request around the cluster.
	HeaderForwarded = "X-Foreman-Forwarded"
	// HeaderNode names the node that served the response.
	HeaderNode = "X-Foreman-Node"
	// HeaderIndex is the applied raft index the read was served at.
	HeaderIndex = "X-Foreman-Index"
	// HeaderIdempotencyKey deduplicates a single-job submit.
	HeaderIdempotencyKey = "Idempotency-Key"
)

// server holds the handler's dependencies; one per agent.
type server struct {
	cfg     Config
	cluster Cluster
	state   State
	// nodeLimits memoizes the node part of submits' capacity checks.
	nodeLimits atomic.Pointer[nodeLimitsMemo]
	logs       Logs
	exec       Exec
	artifacts  Artifacts
	objects    Objects
	keyring    GossipKeyring
	usage      Usage
	gpuUsage   GPUUsage
	shares     Shares
	ops        Operator
	clock      Clock
	ids        IDs
	log        *slog.Logger
	transport  *http.Transport
	scheme     string // of other nodes' API: "https" with Deps.PeerTLS
	mux        *http.ServeMux
	submits    *groupCommit
	over       overload

	beat        heartbeat   // shared by every event stream
	waker       streamWaker // wakes every event stream after appends
	shutdown    streamShutdown
	subscribers subscribers // open event streams
	metrics     *metrics
	acl         *ACL
}

// handle registers h behind the ACL route table (acl_routes.go).
func (s *server) handle(m *http.ServeMux, pattern string, h http.HandlerFunc) {
	s.acl.Handle(m, pattern, h)
}

// New returns the /v1/ API handler. It panics when cfg does not validate or
// deps lacks Cluster or State: both are wiring mistakes in main, which
// calls cfg.Validate() itself to report a bad configuration nicely.
func New(cfg Config, deps Deps) http.Handler {
	if err := cfg.Validate(); err != nil {
		panic(fmt.Sprintf("httpapi.New: %v", err))
	}
	if deps.Cluster == nil || deps.State == nil {
		panic("httpapi.New: Deps.Cluster and Deps.State are required")
	}
	s := &server{
		cfg:     cfg,
		cluster: deps.Cluster,
		state:   deps.State,
		logs:    deps.Logs,
		exec:    deps.Exec,
		ops:     deps.Operator,
		clock:   deps.Clock,
		ids:     deps.IDs,
		log:     deps.Logger,
	}
	s.artifacts = deps.Artifacts
	s.objects = deps.Objects
	s.keyring = deps.GossipKeys
	s.usage = deps.Usage
	s.gpuUsage = deps.GPUUsage
	s.shares = deps.Shares
	if s.clock == nil {
		s.clock = systemClock{}
	}
	if s.ids == nil {
		s.ids = NewULIDs(s.clock)
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = slog.New(requestIDHandler{s.log.Handler()}).With("component", "httpapi")
	s.transport = &http.Transport{
		Proxy:       nil, // node-to-node traffic never goes through an HTTP proxy
		DialContext: (&net.Dialer{Timeout: cfg.ProxyDialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		// Writes from a follower all go to the leader: keep a connection per
		// concurrent client alive, or every reply beyond the pool closes one
		// and the next request dials again (64 clients proxying through a
		// follower cost 640 µs of agent CPU per request with 16 here, 450
		// with 256).
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
	s.acl = deps.ACL
	if s.acl == nil {
		s.acl = NewACL(cfg.ACL, s.state, s.clock, s.log)
	}
	s.scheme = "http"
	if deps.PeerTLS != nil {
		s.transport.TLSClientConfig = deps.PeerTLS
		s.transport.TLSHandshakeTimeout = cfg.ProxyDialTimeout + 5*time.Second
		s.scheme = "https"
	}
	s.submits = newGroupCommit(s)
	s.beat.every = cfg.EventHeartbeat
	s.waker.perStream, s.waker.max = cfg.EventDelayPerStream, cfg.EventMaxDelay
	s.metrics = newMetrics(s)
	s.routes()
	return s
}

// routes registers every endpoint. read, write and local say how a route
// behaves on a follower: read serves locally (or via the leader with
// ?consistent=true), write is proxied to the leader, local always runs
// here.
func (s *server) routes() {
	m := http.NewServeMux()
	s.handle(m, "POST /v1/jobs", s.submitWrite(s.submitJobs))
	s.handle(m, "GET /v1/jobs", s.read(s.listJobs))
	s.handle(m, "GET /v1/jobs/counts", s.read(s.jobCounts))
	s.handle(m, "GET /v1/jobs/{id}", s.read(s.jobScoped(PermRead, getByPath(s, "id", s.jobDetail))))
	s.handle(m, "POST /v1/jobs/{id}/cancel", s.write(s.jobScoped(PermSubmit, s.cancelJob)))
	s.handle(m, "POST /v1/jobs/{id}/retry", s.write(s.jobScoped(PermSubmit, s.retryJob)))
	s.handle(m, "GET /v1/jobs/{id}/logs", s.read(s.jobScoped(PermRead, s.jobLogs)))
	s.handle(m, "POST /v1/jobs/{id}/exec", s.read(s.jobScoped(PermExec, s.execJob)))
	s.handle(m, "GET /v1/jobs/{id}/gpu-usage", s.read(s.jobScoped(PermRead, s.jobGPUUsage)))
	s.handle(m, "GET /v1/jobs/{id}/events", s.read(s.jobScoped(PermRead, s.jobEvents)))
	s.handle(m, "GET /v1/events", s.local(s.events))
	s.handle(m, "GET /v1/metrics", s.local(s.metrics.serve))
	s.handle(m, "GET /v1/jobs/{id}/result", s.read(s.jobScoped(PermRead, s.jobResult)))
	s.handle(m, "GET /v1/jobs/{id}/artifacts", s.read(s.jobScoped(PermRead, s.listArtifacts)))
	s.handle(m, "GET /v1/jobs/{id}/artifacts/{path...}", s.read(s.jobScoped(PermRead, s.getArtifact)))
	s.handle(m, "GET "+InternalArtifactsPath+"{id}/{path...}", s.local(s.getArtifact))
	s.handle(m, "GET /v1/jobs/{id}/tasks", s.read(s.jobScoped(PermRead, s.jobTasks)))
	s.handle(m, "POST /v1/jobs/{id}/checkpoint", s.write(s.jobScoped(PermSubmit, s.putCheckpoint)))
	s.handle(m, "GET /v1/jobs/{id}/checkpoint", s.read(s.jobScoped(PermRead, s.getCheckpoint)))

	s.handle(m, "POST /v1/workflows", s.write(s.submitWorkflow))
	s.handle(m, "GET /v1/workflows", s.read(s.listWorkflows))
	s.handle(m, "GET /v1/workflows/{id}", s.read(s.workflowScoped(PermRead, s.getWorkflow)))
	s.handle(m, "DELETE /v1/workflows/{id}", s.write(s.workflowScoped(PermWrite, s.cancelWorkflow)))
	s.handle(m, "POST /v1/workflows/{id}/retry", s.write(s.workflowScoped(PermWrite, s.retryWorkflow)))

	s.handle(m, "GET /v1/nodes", s.read(s.listNodes))
	s.handle(m, "GET /v1/nodes/{name}", s.read(getByPath(s, "name", s.nodeDetail)))
	s.handle(m, "GET /v1/nodes/{name}/usage", s.nodeUsage)
	s.handle(m, "POST /v1/nodes/{name}/drain", s.write(s.drainNode))
	s.handle(m, "POST /v1/nodes/{name}/eligibility", s.write(s.setEligibility))
	s.handle(m, "POST /v1/nodes/{name}/down", s.write(s.markDown))
	s.handle(m, "POST /v1/nodes/down", s.write(s.nodesDown))
	s.handle(m, "POST /v1/nodes/drain", s.write(s.nodesDrain))
	s.handle(m, "POST /v1/nodes/eligibility", s.write(s.nodesEligibility))
	s.handle(m, "POST /v1/nodes/{name}/gpus/reset", s.write(s.resetNodeGPUs))

	s.scheduleRoutes(m)

	s.handle(m, "GET /v1/queues", s.read(s.listQueues))
	s.handle(m, "PUT /v1/queues/{name}", s.write(s.setQueue))

	s.handle(m, "GET /v1/namespaces", s.read(s.listNamespaces))
	s.handle(m, "GET /v1/namespaces/shares", s.read(s.namespaceShares))
	s.handle(m, "GET /v1/usage", s.read(s.usageReport))
	s.handle(m, "GET /v1/namespaces/{name}", s.read(s.getNamespace))
	s.handle(m, "PUT /v1/namespaces/{name}", s.write(s.setNamespace))
	s.handle(m, "DELETE /v1/namespaces/{name}", s.write(s.deleteNamespace))

	s.handle(m, "GET /v1/cluster/members", s.local(s.members))
	s.handle(m, "GET /v1/cluster/raft", s.local(s.raftInfo))
	s.handle(m, "POST /v1/cluster/join", s.local(s.join))
	s.handle(m, "POST /v1/cluster/leave", s.local(s.leave))
	s.handle(m, "GET /v1/cluster/hash", s.local(s.hash))
	s.handle(m, "DELETE /v1/cluster/raft/peers/{name}", s.write(s.removePeer))
	s.handle(m, "POST /v1/cluster/raft/transfer-leadership", s.write(s.transferLeadership))

	s.handle(m, "GET /v1/operator/snapshot", s.write(s.saveSnapshot))
	s.handle(m, "GET /v1/operator/gossip-keys", s.local(s.listGossipKeys))
	s.handle(m, "POST /v1/operator/gossip-keys", s.local(s.changeGossipKeys))
	s.handle(m, "PUT /v1/operator/snapshot", s.write(s.restoreSnapshot))
	s.handle(m, "POST /v1/operator/snapshot", s.write(s.restoreSnapshot))
	s.handle(m, "POST "+submitsPath, s.local(s.forwardedSubmits))
	s.handle(m, "GET /v1/health", s.local(s.health))
	s.handle(m, "GET /v1/ready", s.local(s.ready))
	s.handle(m, "GET "+OpenAPIPath, s.local(s.openAPI))

	s.aclRoutes(m)
	s.handle(m, "/", s.notFound(m))
	s.mux = m
}

func (s *server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	id := requestID(r)
	r.Header.Set(HeaderRequestID, id) // a proxied request carries it on
	r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
	rw.Header().Set(HeaderRequestID, id)
	w := &statusRecorder{ResponseWriter: rw}
	start := time.Now()
	defer func() {
		status := w.status
		if status == 0 {
			status = http.StatusOK
		}
		s.metrics.observe(r, status, time.Since(start))
	}()
	defer func() {
		// A handler bug must not take the connection down silently; the
		// reply may be cut if the handler had started writing.
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.ErrorContext(r.Context(), "handler panic", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			writeJSON(w, http.StatusInternalServerError, ErrorBody{Error: "internal error", Code: CodeInternal})
		}
	}()
	w.Header().Set(HeaderNode, s.cluster.NodeName())
	s.mux.ServeHTTP(w, r)
}

// local runs h on this node whatever its role.
func (s *server) local(h http.HandlerFunc) http.HandlerFunc { return h }

// write runs h on the leader and proxies the request there from a follower.
func (s *server) write(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cluster.IsLeader() {
			h(w, r)
			return
		}
		s.proxyToLeader(w, r)
	}
}

// submitWrite runs the submit handler on every node (a follower forwards
// its submits to the leader in groups, see groupforward.go), refusing what
// a proxied write would be refused: a request that was already forwarded,
// or any when no leader is known.
func (s *server) submitWrite(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cluster.IsLeader() {
			h(w, r)
			return
		}
		name, addr := s.cluster.Leader()
		switch {
		case addr == "":
			s.writeError(w, r, fmt.Errorf("%w: this node (%s) is not the leader and no leader is known; retry shortly", ErrNoLeader, s.cluster.NodeName()))
		case r.Header.Get(HeaderForwarded) != "":
			s.writeError(w, r, fmt.Errorf("%w: request was forwarded here but this node (%s) is not the leader (it thinks %s is); retry", ErrLoop, s.cluster.NodeName(), name))
		default:
			h(w, r)
		}
	}
}

// getByPath handles a GET that replies with what get reads for the
// request's path value key (GET /v1/jobs/{id}: the job's detail).
func getByPath[T any](s *server, key string, get func(string) (T, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := get(r.PathValue(key))
		s.reply(w, r, v, err)
	}
}

// read serves h from the local state, or with ?consistent=true from the
// leader after a barrier: on the leader that is ConsistentRead then h, on
// a follower a proxy to the leader.
func (s *server) read(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("consistent") == "true" {
			if !s.cluster.IsLeader() {
				s.proxyToLeader(w, r)
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ApplyTimeout)
			err := s.cluster.ConsistentRead(ctx)
			cancel()
			if err != nil {
				s.writeError(w, r, fmt.Errorf("consistent read: %w", err))
				return
			}
		}
		w.Header().Set(HeaderIndex, fmt.Sprint(s.state.AppliedIndex()))
		h(w, r)
	}
}

// notFound answers requests no route matched: 405 (with Allow) when the
// path exists under another method, else 404, both as JSON.
func (s *server) notFound(m *http.ServeMux) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
			if method == r.Method {
				continue
			}
			probe := r.Clone(r.Context())
			probe.Method = method
			if _, pattern := m.Handler(probe); pattern != "/" && pattern != "" {
				allow = append(allow, method)
			}
		}
		if len(allow) > 0 {
			for _, a := range allow {
				w.Header().Add("Allow", a)
			}
			writeJSON(w, http.StatusMethodNotAllowed, ErrorBody{
				Error: fmt.Sprintf("%s is not allowed on %s (allowed: %v)", r.Method, r.URL.Path, allow),
				Code:  CodeMethod,
			})
			return
		}
		writeJSON(w, http.StatusNotFound, ErrorBody{Error: fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path), Code: CodeNotFound})
	}
}

// apply commits one command stamped with the leader's clock and returns
// its result; a refused command comes back as the error.
func (s *server) apply(ctx context.Context, t fsm.CommandType, payload any) (*fsm.Result, error) {
	cmd, err := fsm.NewCommand(t, s.clock.Now(), payload)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ApplyTimeout)
	defer cancel()
	res, err := s.cluster.Apply(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, fmt.Errorf("apply %s: no result", t)
	}
	if res.Err != nil {
		return res, res.Err
	}
	return res, nil
}

// decodeBody reads the request's body (within MaxBodyBytes) and decodes
// it strictly into v.
func (s *server) decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	return decodeStrict(body, v)
}

// decodeOptional decodes a small JSON body into v; an empty body leaves v
// as it is.
func (s *server) decodeOptional(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	if len(json.RawMessage(body)) == 0 || isNull(body) {
		return nil
	}
	return decodeStrict(body, v)
}
