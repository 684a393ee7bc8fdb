package exec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/foreman-sched/foreman/fsm"
)

// Outputs in an object store (issue 25). With WorkerDeps.Outputs set, the
// finish report of every attempt this node reports says its outputs are
// pending, and the worker then uploads the artifacts and the logs (stdout
// and stderr, each the rotated part and the current file as one object)
// in the background: every file is retried with backoff until it is
// stored or UploadRetryFor has passed since the finish; at most
// UploadConcurrency files of the node are in flight at once. Then a
// second report (state fsm.ReportOutputs) records where each object is,
// or which files were not stored. Only that report makes the outputs
// durable in the record, so nothing is claimed stored that is not.
//
// The finish is not held back by the upload: a slow or stopped store must
// not keep attempts running (holding their resources) or their children
// waiting. While the upload runs, readers use the node, as without a
// store. A restarted agent resumes the uploads it had not reported
// (UploadName without OutputsName).
//
// Object keys are <prefix>/<namespace>/<job>/<attempt>/artifacts/<path>
// and .../logs/stdout, .../logs/stderr ("default" for the default
// namespace): a reader goes through foreman, which reads only the keys
// recorded with an attempt of a job the caller may read.

// OutputStore is the node's object store (main adapts objstore.Store).
// Put and Open are called from many goroutines at once and may block for
// a transfer; Location and Key must be cheap.
type OutputStore interface {
	// Location is s3://bucket/prefix, as recorded with the attempt.
	Location() string
	// Key is the bucket key of a key relative to the prefix.
	Key(rel string) string
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	Open(ctx context.Context, key string) (io.ReadCloser, int64, error)
	// OpenObject reads any bucket's object with the store's endpoint and
	// credentials (s3:// job inputs, inputs.go).
	OpenObject(ctx context.Context, bucket, key string) (io.ReadCloser, int64, error)
}

// Files in the attempt directory.
const (
	// UploadName marks an attempt whose finish said outputs pending; its
	// mtime is when the upload began (UploadRetryFor counts from it).
	UploadName = "upload"
	// OutputsName holds the outputs record once it was reported.
	OutputsName = "outputs.json"
)

// Defaults of the upload.
const (
	DefaultUploadConcurrency = 4
	DefaultUploadRetryFor    = time.Hour
	uploadBackoffMin         = time.Second
	uploadBackoffMax         = 30 * time.Second
)

// outputFile is one artifact, or a log's two parts, to upload.
type outputFile struct {
	name       string   // fsm name: artifacts/<path>, logs/stdout, logs/stderr, checkpoint
	artifact   string   // the artifact's path, opened inside its directory (os.Root)
	parts      []string // a log's host paths, read in order
	checkpoint string   // the checkpoint directory's name, uploaded as a tar
}

// outputFiles lists what an attempt directory holds for the store, and
// the task's checkpoint directory when it had one.
func outputFiles(dir string, artifacts []fsm.Artifact, tf *TaskFile) []outputFile {
	var out []outputFile
	for _, a := range artifacts {
		if fsm.ValidArtifactPath(a.Path) == nil {
			out = append(out, outputFile{name: fsm.OutputArtifact(a.Path), artifact: a.Path})
		}
	}
	for _, l := range []struct{ name, file string }{{fsm.OutputStdout, StdoutName}, {fsm.OutputStderr, StderrName}} {
		p := filepath.Join(dir, l.file)
		out = append(out, outputFile{name: l.name, parts: []string{p + ".1", p}})
	}
	if tf.CheckpointDir != "" {
		out = append(out, outputFile{name: fsm.OutputCheckpoint, checkpoint: CheckpointName(&tf.Attempt)})
	}
	return out
}

// outputKey is the key (relative to the store's prefix) of an attempt's file.
func outputKey(namespace, jobID string, attempt int, name string) string {
	if namespace == "" {
		namespace = fsm.DefaultNamespace
	}
	return namespace + "/" + jobID + "/" + strconv.Itoa(attempt) + "/" + name
}

// pendingOutputs is what a finish report says with a store configured.
func (w *Worker) pendingOutputs() *fsm.Outputs {
	if w.deps.Outputs == nil {
		return nil
	}
	return &fsm.Outputs{Store: w.deps.Outputs.Location(), State: fsm.OutputsPending}
}

// startUpload uploads the outputs of the attempt in dir in the background
// and reports where they went.
func (w *Worker) startUpload(ctx context.Context, dir string, tf *TaskFile, res *Result) {
	since := time.Now()
	if fi, err := os.Stat(filepath.Join(dir, UploadName)); err == nil {
		since = fi.ModTime()
	}
	w.wg.Add(1)
	outputMetrics().pending.Inc()
	go func() {
		defer w.wg.Done()
		defer outputMetrics().pending.Dec()
		w.upload(ctx, dir, tf, res, since)
	}()
}

func (w *Worker) upload(ctx context.Context, dir string, tf *TaskFile, res *Result, since time.Time) {
	st := w.deps.Outputs
	deadline := since.Add(w.cfg.UploadRetryFor)
	files := outputFiles(dir, res.Artifacts, tf)
	root, err := os.OpenRoot(artifactsDir(dir))
	if err == nil {
		defer root.Close()
	}
	type outcome struct {
		obj *fsm.StoredObject
		err error
	}
	got := make([]outcome, len(files))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Go(func() {
			key := st.Key(outputKey(tf.Spec.Namespace, tf.Attempt.JobID, tf.Attempt.Num, f.name))
			size, err := w.putRetrying(ctx, root, key, f, deadline)
			if err == nil {
				got[i].obj = &fsm.StoredObject{Name: f.name, Key: key, Size: size}
				outputMetrics().bytes.Add(float64(size))
				outputMetrics().objects.Inc()
			}
			got[i].err = err
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // stopping: the next agent resumes (no OutputsName yet)
	}
	out := &fsm.Outputs{Store: st.Location(), State: fsm.OutputsStored}
	for i, g := range got {
		switch {
		case g.obj != nil:
			out.Objects = append(out.Objects, *g.obj)
		case errors.Is(g.err, errNothingToUpload):
		default:
			out.NotStored = append(out.NotStored, files[i].name)
			outputMetrics().notStored.Inc()
			if out.Error == "" {
				out.Error = g.err.Error()
			}
		}
	}
	if len(out.NotStored) > 0 {
		out.State = fsm.OutputsPartial
		w.log.Warn("outputs not stored", "job", tf.Attempt.JobID, "attempt", tf.Attempt.Num, "files", out.NotStored, "err", out.Error)
	}
	rep := fsm.ReportAttempt{JobID: tf.Attempt.JobID, Attempt: tf.Attempt.Num, FencingToken: tf.Attempt.FencingToken, Node: tf.Node, State: fsm.ReportOutputs, Outputs: out}
	if err := w.report(ctx, rep); err != nil && ctx.Err() != nil {
		return
	}
	writeJSONAtomic(filepath.Join(dir, OutputsName), out)
	w.log.Info("outputs stored", "job", tf.Attempt.JobID, "attempt", tf.Attempt.Num, "state", out.State, "objects", len(out.Objects), "took", time.Since(since).Round(time.Millisecond))
}

// errNothingToUpload: a log stream the job never wrote (no file at all).
// errGone: the file is no longer on this node (the node's artifact cap
// evicted it): retrying cannot bring it back.
var (
	errNothingToUpload = errors.New("nothing to upload")
	errGone            = errors.New("no longer on this node")
)

// putRetrying uploads f under key, retrying with backoff until deadline.
// At most UploadConcurrency puts of the node run at once.
func (w *Worker) putRetrying(ctx context.Context, root *os.Root, key string, f outputFile, deadline time.Time) (int64, error) {
	delay := uploadBackoffMin
	for {
		size, err := w.putOnce(ctx, root, key, f)
		if err == nil || errors.Is(err, errNothingToUpload) {
			return size, err
		}
		if errors.Is(err, errGone) {
			return 0, fmt.Errorf("%s: %w", f.name, err)
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		outputMetrics().failures.Inc()
		if !time.Now().Add(delay).Before(deadline) {
			return 0, fmt.Errorf("%s: %w (gave up after %v)", f.name, err, w.cfg.UploadRetryFor)
		}
		w.log.Warn("upload failed; retrying", "key", key, "err", err, "in", delay)
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, uploadBackoffMax)
	}
}

func (w *Worker) putOnce(ctx context.Context, root *os.Root, key string, f outputFile) (int64, error) {
	if f.checkpoint != "" {
		return w.putCheckpoint(ctx, key, f.checkpoint)
	}
	var rs []io.Reader
	var size int64
	found := false
	open := func(p string) (*os.File, error) {
		return os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	}
	parts := f.parts
	if f.artifact != "" {
		if root == nil {
			return 0, fmt.Errorf("the artifacts directory: %w", errGone)
		}
		// Inside the directory: no "..", no symlink out of it.
		open = func(p string) (*os.File, error) {
			return root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		}
		parts = []string{filepath.FromSlash(f.artifact)}
	}
	for _, p := range parts {
		fh, err := open(p)
		if errors.Is(err, os.ErrNotExist) && f.artifact == "" {
			continue
		}
		if errors.Is(err, os.ErrNotExist) {
			return 0, errGone
		}
		if err != nil {
			return 0, err
		}
		defer fh.Close()
		fi, err := fh.Stat()
		if err != nil {
			return 0, err
		}
		if !fi.Mode().IsRegular() {
			return 0, fmt.Errorf("%s is not a regular file", p)
		}
		found = true
		size += fi.Size()
		rs = append(rs, io.LimitReader(fh, fi.Size()))
	}
	if !found {
		return 0, errNothingToUpload
	}
	return size, w.put(ctx, key, io.MultiReader(rs...), size)
}

// resumeUploads restarts the uploads a previous agent left unreported.
func (w *Worker) resumeUploads(ctx context.Context) {
	if w.deps.Outputs == nil {
		return
	}
	entries, _ := os.ReadDir(w.attemptsDir)
	for _, e := range entries {
		dir := filepath.Join(w.attemptsDir, e.Name())
		if !exists(filepath.Join(dir, UploadName)) || exists(filepath.Join(dir, OutputsName)) || !exists(filepath.Join(dir, ReportedName)) {
			continue
		}
		tf, err := ReadTaskFile(dir)
		if err != nil {
			continue
		}
		res, err := ReadResult(dir)
		if err != nil {
			continue
		}
		w.startUpload(ctx, dir, tf, res)
	}
}

// openStored opens an input's artifact from the store (a parent whose
// node cannot serve it any more).
func (w *Worker) openStored(ctx context.Context, in Input, path string) (io.ReadCloser, error) {
	obj := in.Outputs.Object(fsm.OutputArtifact(path))
	switch {
	case obj == nil:
		return nil, errors.New("not in the object store")
	case w.deps.Outputs == nil:
		return nil, fmt.Errorf("stored in %s, but this agent has no --object-store", in.Outputs.Store)
	case in.Outputs.Store != w.deps.Outputs.Location():
		return nil, fmt.Errorf("stored in %s, not in this agent's store %s", in.Outputs.Store, w.deps.Outputs.Location())
	}
	r, _, err := w.deps.Outputs.Open(ctx, obj.Key)
	return r, err
}

// The store's use by this node (GET /v1/metrics), registered on first use
// like the package's other metrics.
type outputsMetrics struct {
	bytes, objects, failures, notStored prometheus.Counter
	pending                             prometheus.Gauge
}

var outputMetrics = sync.OnceValue(func() *outputsMetrics {
	return &outputsMetrics{
		bytes: promauto.NewCounter(prometheus.CounterOpts{Name: "foreman_outputs_uploaded_bytes_total",
			Help: "Bytes of attempts' artifacts and logs this node stored in the object store."}),
		objects: promauto.NewCounter(prometheus.CounterOpts{Name: "foreman_outputs_uploaded_objects_total",
			Help: "Objects (artifacts, logs) this node stored in the object store."}),
		failures: promauto.NewCounter(prometheus.CounterOpts{Name: "foreman_outputs_upload_failures_total",
			Help: "Uploads to the object store that failed (each is retried with backoff)."}),
		notStored: promauto.NewCounter(prometheus.CounterOpts{Name: "foreman_outputs_not_stored_total",
			Help: "Files whose upload was given up on (the attempt lists them in outputs.not_stored)."}),
		pending: promauto.NewGauge(prometheus.GaugeOpts{Name: "foreman_outputs_uploads_pending",
			Help: "Finished attempts of this node whose outputs are being uploaded."}),
	}
})

// StoredCheckpoint is a task's checkpoint directory in the object store:
// the tar uploaded with the outputs of its attempt Attempt.
type StoredCheckpoint struct {
	Store   string
	Key     string
	Attempt int
}

// fetchStoredCheckpoint replaces dir's contents with the stored tar.
func (w *Worker) fetchStoredCheckpoint(ctx context.Context, a Assignment, dir string) (int64, error) {
	sc := a.CheckpointStored
	switch {
	case w.deps.Outputs == nil:
		return 0, fmt.Errorf("stored in %s, but this agent has no --object-store", sc.Store)
	case sc.Store != w.deps.Outputs.Location():
		return 0, fmt.Errorf("stored in %s, not in this agent's store %s", sc.Store, w.deps.Outputs.Location())
	}
	return w.fetchCheckpointFrom(ctx, CheckpointName(&a.Attempt), dir, func(ctx context.Context, out io.Writer) error {
		r, _, err := w.deps.Outputs.Open(ctx, sc.Key)
		if err != nil {
			return err
		}
		defer r.Close()
		_, err = io.Copy(out, r)
		return err
	})
}

// put stores size bytes of r under key once one of the node's upload
// slots is free.
func (w *Worker) put(ctx context.Context, key string, r io.Reader, size int64) error {
	select {
	case w.uploadSlots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-w.uploadSlots }()
	return w.deps.Outputs.Put(ctx, key, r, size)
}

// putCheckpoint uploads the checkpoint directory name as a tar, spooled
// to a file first (S3 wants the size; the directory is bounded by
// CheckpointDirMax). A directory that is gone or empty is nothing to
// upload.
func (w *Worker) putCheckpoint(ctx context.Context, key, name string) (int64, error) {
	if ents, err := os.ReadDir(filepath.Join(w.checkpointsRoot(), name)); errors.Is(err, os.ErrNotExist) || err == nil && len(ents) == 0 {
		return 0, errNothingToUpload // no checkpoint, or an empty one: most jobs
	}
	tmp, err := os.CreateTemp(w.checkpointsRoot(), ".upload-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := w.WriteCheckpoint(name, tmp); err != nil {
		return 0, err
	}
	size, err := tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	return size, w.put(ctx, key, tmp, size)
}
