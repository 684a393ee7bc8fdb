package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/exec"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// Roles of an agent (--role; cluster/DESIGN.md "Clients").
const (
	RoleServer  = "server"  // a raft member: votes, schedules when leader, serves the API, runs jobs
	RoleReplica = "replica" // a raft non-voter never promoted: serves reads, the API and client streams, runs jobs
	RoleClient  = "client"  // outside raft: runs the jobs a server's work stream gives it
)

// runClient runs an agent as a client: no raft, no gossip, no copy of the
// cluster state. Its executor learns its work from one server's work
// stream (workclient.go), reports through a server (clientReports), and
// keeps only its own attempts' directories on disk, which a restart
// re-adopts. Its HTTP port serves what servers proxy to it (its attempts'
// logs and artifacts) and its health; every other API call is refused
// with the servers to ask instead.
func runClient(parent context.Context, cfg *agentConfig) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	slog.SetDefault(logger)
	ctx, stop := signal.NotifyContext(parent, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	exec.RegisterMetrics(cfg.self.Drivers...)

	cc := &cfg.cluster
	servers, err := cluster.ServerURLs(cc.Join, cfg.tls != nil)
	if err != nil {
		return err
	}
	httpAddr, err := cc.HTTPAdvertise()
	if err != nil {
		return err
	}
	self := cfg.self
	self.Name, self.HTTPAddr, self.Role = cc.Name, httpAddr, fsm.RoleClient
	if self.Slots == 0 {
		self.Slots = cc.Slots
	}
	hc := cluster.NewPeerClient(cc)
	wc := newWorkClient(self, servers, hc, bearerAuth(cfg.clientToken), cluster.ClientContactWindow, logger.With("component", "workclient"))
	store, err := openObjectStore(ctx, cfg.objectStore, logger)
	if err != nil {
		return err
	}
	worker, err := exec.NewWorker(cfg.worker, exec.WorkerDeps{
		Artifacts:     serverArtifacts{wc: wc, hc: hc},
		Checkpoints:   serverCheckpoints{wc: wc, hc: hc},
		Outputs:       outputStore(store),
		Assignments:   wc,
		Reporter:      exec.NewBatchingReporter(clientReports{wc: wc, hc: hc}),
		LeaderContact: wc,
		Logger:        logger,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(bindHost(*cc), strconv.Itoa(cc.Port)))
	if err != nil {
		return fmt.Errorf("listen for HTTP: %w", err)
	}
	ln = wrapListener(ln, cfg.maxConnsPerIP, cfg.tls, cfg.requireClientCert, logger)
	if cfg.tls != nil {
		go reloadOnSIGHUP(ctx, cfg.tls, logger)
	}
	srv := newHTTPServer(clientRoutes(self.Name, servers, worker, wc, cfg.api.ACL), logger)
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(ln) }()

	streamCtx, stopStream := context.WithCancel(context.Background())
	streamDone := make(chan struct{})
	go func() { _ = wc.Run(streamCtx); close(streamDone) }()
	workerCtx, stopWorker := context.WithCancel(context.Background())
	workerDone := make(chan error, 1)
	go func() { workerDone <- worker.Run(workerCtx) }()
	// A client has no state of its own: resets come on its work stream,
	// the first one possibly from before this start (redoing it clears
	// nothing the new process saw, bar faults of its first seconds).
	go watchGPUs(ctx, cfg.gpu, cfg.gpuOverride, cfg.gpuStart, wc.gpuResets, 0, func(_ context.Context, st gpuState) error {
		s := wc.selfNode()
		st.apply(&s)
		wc.SetSelf(s)
		return nil
	}, logger)
	logger.Info("agent started", "component", "agent", "role", RoleClient, "node", self.Name, "http", self.HTTPAddr,
		"servers", strings.Join(servers, ","), "data_dir", cc.DataDir, "drivers", strings.Join(self.Drivers, ","),
		"default_driver", cfg.worker.DefaultDriver)

	runErr, workerRunning := waitForStop(ctx, srvErr, workerDone, logger)
	// As a server does: a last renewal while still in contact, then the
	// stream and the worker stop; running jobs keep going under their
	// supervisors and a restart within the lease re-adopts them.
	shutCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	worker.RenewLeases()
	wc.Leave(5 * time.Second)
	stopStream()
	<-streamDone
	stopWorker()
	awaitWorker(shutCtx, workerRunning, workerDone, logger)
	return runErr
}

// clientReports is a client's exec.BatchReporter: reports go to the
// server of its open stream (any server while it has none), which checks
// they are this node's and commits them through the leader.
type clientReports struct {
	wc *workClient
	hc *http.Client
}

func (r clientReports) ReportBatch(ctx context.Context, reps []fsm.ReportAttempt) ([]error, error) {
	server := r.wc.Server()
	if server == "" {
		server = r.wc.servers[rand.IntN(len(r.wc.servers))]
	}
	return cluster.SendReports(ctx, r.hc, server, r.wc.name, r.wc.Index(), reps, r.wc.auth)
}

// clientRoutes is a client's HTTP port: its health, and the logs and
// artifacts of its attempts that servers proxy here (they name the
// attempt); anything else is refused with the servers to ask instead.
// The routes go through an ACL that is off (a client refuses --acl until
// it can hold the cluster-internal secret), which checks them against the
// route table like every agent's.
func clientRoutes(node string, servers []string, w *exec.Worker, wc *workClient, aclOn bool) http.Handler {
	mux := http.NewServeMux()
	acl := httpapi.NewACL(false, nil, nil, nil)
	handle := func(pattern string, h http.HandlerFunc) { acl.Handle(mux, pattern, serversOnly(h, wc, aclOn)) }
	acl.Handle(mux, "GET /v1/health", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		// server: the server of its open stream ("" between servers);
		// leader_contact: the leader confirmed a recent beat (its leases
		// are being renewed).
		writeClientJSON(rw, http.StatusOK, map[string]any{"status": "ok", "node": node, "role": RoleClient,
			"server": wc.Server(), "leader_contact": wc.InContactWithLeader()})
	}))
	handle("GET /v1/jobs/{id}/logs", func(rw http.ResponseWriter, r *http.Request) {
		attempt, ok := proxiedAttempt(rw, r)
		if !ok {
			return
		}
		stream := r.URL.Query().Get("stream")
		if stream == "" {
			stream = "stdout"
		}
		follow := r.URL.Query().Get("follow") == "true"
		if follow {
			_ = http.NewResponseController(rw).SetWriteDeadline(time.Time{})
		}
		fw := &clientFlushWriter{w: rw, rc: http.NewResponseController(rw)}
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rw.Header().Set(httpapi.HeaderLogSource, "node")
		err := workerLogs{w}.StreamLog(r.Context(), r.PathValue("id"), attempt, stream, follow, fw)
		if err != nil && !fw.wrote {
			clientError(rw, err)
			return
		}
		if !fw.wrote {
			rw.WriteHeader(http.StatusOK)
		}
	})
	serveArtifact := func(rw http.ResponseWriter, r *http.Request) {
		attempt, ok := proxiedAttempt(rw, r)
		if !ok {
			return
		}
		path := r.PathValue("path")
		if err := fsm.ValidArtifactPath(path); err != nil {
			writeClientJSON(rw, http.StatusBadRequest, httpapi.ErrorBody{Error: "path: " + err.Error(), Code: "invalid"})
			return
		}
		f, err := workerArtifacts{w}.OpenArtifact(r.PathValue("id"), attempt, path)
		if err != nil {
			clientError(rw, err)
			return
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil {
			rw.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
		}
		rw.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.Copy(rw, f)
	}
	handle("GET /v1/jobs/{id}/artifacts/{path...}", serveArtifact)
	// What a server proxies when a child elsewhere fetches its inputs.
	handle("GET "+httpapi.InternalArtifactsPath+"{id}/{path...}", serveArtifact)
	// What a server proxies for job status and the UI: GPU use measured here.
	handle("GET /v1/jobs/{id}/gpu-usage", func(rw http.ResponseWriter, r *http.Request) {
		attempt, ok := proxiedAttempt(rw, r)
		if !ok {
			return
		}
		id := r.PathValue("id")
		work, _ := wc.LiveAttempts(node)
		for _, a := range work {
			if a.Attempt.JobID == id && a.Attempt.Num == attempt {
				out, err := httpapi.MeasureJobGPUUsage(gpuUsage{node}, id, attempt, node, a.Attempt.Devices())
				if err != nil {
					writeClientJSON(rw, http.StatusServiceUnavailable, httpapi.ErrorBody{Error: err.Error(), Code: "unavailable"})
					return
				}
				writeClientJSON(rw, http.StatusOK, out)
				return
			}
		}
		writeClientJSON(rw, http.StatusNotFound, httpapi.ErrorBody{Error: fmt.Sprintf("attempt %d of job %s is not live on %s", attempt, id, node), Code: "not_found"})
	})
	// What a server proxies for foreman exec, after checking the token
	// and that the attempt runs here.
	handle("POST /v1/jobs/{id}/exec", func(rw http.ResponseWriter, r *http.Request) {
		attempt, ok := proxiedAttempt(rw, r)
		if !ok {
			return
		}
		var req httpapi.ExecRequest
		dec := json.NewDecoder(http.MaxBytesReader(rw, r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || len(req.Command) == 0 {
			writeClientJSON(rw, http.StatusBadRequest, httpapi.ErrorBody{Error: fmt.Sprintf("body: an exec request with a command (%v)", err), Code: "invalid"})
			return
		}
		httpapi.ServeExec(rw, r, workerExec{w}, r.PathValue("id"), attempt, req, slog.Default().With("component", "exec"))
	})
	// What a server relays when a task's next attempt elsewhere resumes.
	handle(CheckpointsPath, checkpointHandler(w, nil, node).ServeHTTP)
	acl.Handle(mux, "/", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		writeClientJSON(rw, http.StatusMisdirectedRequest, httpapi.ErrorBody{
			Error: fmt.Sprintf("%s is a client agent (outside raft): it serves no API; ask a server: %s", node, strings.Join(servers, ", ")),
			Code:  "client_agent",
		})
	}))
	return mux
}

// proxiedAttempt is the attempt a server's proxied request names.
func proxiedAttempt(rw http.ResponseWriter, r *http.Request) (int, bool) {
	n, err := strconv.Atoi(r.URL.Query().Get("attempt"))
	if err != nil || n < 1 {
		writeClientJSON(rw, http.StatusBadRequest, httpapi.ErrorBody{
			Error: "attempt: a client serves its attempts' files to servers, which name the attempt (ask a server)", Code: "invalid"})
		return 0, false
	}
	return n, true
}

func clientError(rw http.ResponseWriter, err error) {
	status, code := http.StatusInternalServerError, "internal"
	if errors.Is(err, fs.ErrNotExist) {
		status, code = http.StatusNotFound, "not_found"
	}
	writeClientJSON(rw, status, httpapi.ErrorBody{Error: err.Error(), Code: code})
}

func writeClientJSON(rw http.ResponseWriter, status int, v any) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	_ = json.NewEncoder(rw).Encode(v)
}

// clientFlushWriter flushes after every write, so a follower sees log
// bytes as they come.
type clientFlushWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	wrote bool
}

func (f *clientFlushWriter) Write(p []byte) (int, error) {
	f.wrote = true
	n, err := f.w.Write(p)
	if err == nil {
		_ = f.rc.Flush()
	}
	return n, err
}

// bearerAuth sends a client agent's token (nil without one).
func bearerAuth(token string) func(http.Header) {
	if token == "" {
		return nil
	}
	return func(h http.Header) { h.Set("Authorization", "Bearer "+token) }
}

// serversOnly lets through, under ACL, only requests that present a key
// a server sent this client (fsm.ClientKey): servers proxy users' log
// and artifact reads here after checking their tokens, and fetch inputs
// and checkpoints. Without ACL every request goes through, as on a
// server's port.
func serversOnly(h http.HandlerFunc, wc *workClient, aclOn bool) http.HandlerFunc {
	if !aclOn {
		return h
	}
	return func(rw http.ResponseWriter, r *http.Request) {
		if !wc.ServerKey(r.Header.Get(httpapi.HeaderClientKey)) {
			rw.Header().Set("WWW-Authenticate", `Bearer realm="foreman"`)
			writeClientJSON(rw, http.StatusUnauthorized, httpapi.ErrorBody{
				Error: "unauthenticated: a client agent's port answers its servers only (they present the key they sent it); ask a server: " + strings.Join(wc.servers, ", "),
				Code:  "unauthenticated",
			})
			return
		}
		h(rw, r)
	}
}
