package exec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Artifacts (issue 15). A job writes files under /foreman/artifacts in a
// container, $FOREMAN_ARTIFACTS for the process driver: both are
// <attempt dir>/foreman/artifacts on the host. When the job has ended the
// supervisor lists them (regular files only; symlinks, devices and FIFOs
// are removed, so nothing served later can point outside the directory)
// and keeps at most TaskFile.ArtifactsMaxBytes of them, in path order:
// files past the cap are deleted and the attempt carries a warning. The
// list travels with the finish report into raft; the bytes stay here,
// served by OpenArtifact, for as long as the attempt dir is kept
// (WorkerConfig.KeepFinished) unless the node's cap
// (WorkerConfig.ArtifactsNodeMaxBytes) evicts the oldest first.
//
// A child gets each parent's artifacts under
// <inputs>/<parent name>/artifacts/<path>, copied before its supervisor
// starts: from this node's disk, or through the ArtifactFetcher from the
// node that holds them.

// Names and container paths.
const (
	ArtifactsName         = "artifacts"
	ContainerArtifactsDir = "/foreman/artifacts"
	// InputArtifactsName is the directory under <inputs>/<parent name>/
	// that holds the parent's artifacts.
	InputArtifactsName = "artifacts"
)

// Defaults of the artifact bounds.
const (
	DefaultArtifactsMaxBytes     = 1 << 30  // per attempt
	DefaultArtifactsNodeMaxBytes = 10 << 30 // all kept attempts of a node
)

// ErrNoSuchArtifact means the attempt holds no such artifact on this node
// (never listed, removed with the attempt dir, or evicted by the node cap).
var ErrNoSuchArtifact = errors.New("no such artifact on this node")

// ArtifactFetcher copies an artifact of another node's attempt (main
// adapts the HTTP API: the holding node serves it). Called from the
// goroutine that starts a child attempt; it may block for the transfer.
type ArtifactFetcher interface {
	FetchArtifact(ctx context.Context, node, jobID string, attempt int, path string, out io.Writer) error
}

func artifactsDir(dir string) string { return filepath.Join(dir, IODirName, ArtifactsName) }

// collectArtifacts lists the regular files under the attempt's artifacts
// directory in path order, keeps those that fit in maxBytes and
// fsm.ArtifactsMaxFiles, removes everything else, and says what it dropped.
func collectArtifacts(dir string, maxBytes int64) ([]fsm.Artifact, string) {
	root := artifactsDir(dir)
	if fi, err := os.Lstat(root); err != nil {
		return nil, ""
	} else if !fi.IsDir() { // replaced by a symlink or a file: keep nothing
		os.Remove(root)
		return nil, "the artifacts directory was replaced by a non-directory; nothing kept"
	}
	// Deletions go through os.Root: a process the job left behind could
	// swap a directory for a symlink during the walk, and a plain
	// os.Remove would then follow it out of the directory (as root).
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Sprintf("artifacts not read: %v", err)
	}
	defer r.Close()
	type file struct {
		rel  string
		size int64
	}
	var files []file
	var notes []string
	var removed, over int
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			notes = append(notes, fmt.Sprintf("walk: %v", err))
			return nil
		}
		if p == root {
			return nil
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, root+string(filepath.Separator)))
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular() || fsm.ValidArtifactPath(rel) != nil:
			r.Remove(filepath.FromSlash(rel))
			removed++
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		files = append(files, file{rel, fi.Size()})
		return nil
	})
	sort.Slice(files, func(i, j int) bool { return files[i].rel < files[j].rel })
	var out []fsm.Artifact
	var total int64
	for _, f := range files {
		if len(out) >= fsm.ArtifactsMaxFiles || total+f.size > maxBytes {
			r.Remove(filepath.FromSlash(f.rel))
			over++
			continue
		}
		total += f.size
		out = append(out, fsm.Artifact{Path: f.rel, Size: f.size})
	}
	if removed > 0 {
		notes = append(notes, fmt.Sprintf("%d artifacts removed: not regular files (symlinks, devices, FIFOs) or bad names", removed))
	}
	if over > 0 {
		notes = append(notes, fmt.Sprintf("%d artifacts removed: over the per-attempt cap of %d bytes or %d files", over, maxBytes, fsm.ArtifactsMaxFiles))
	}
	return out, strings.Join(notes, "; ")
}

// OpenArtifact opens one artifact of an attempt that ran on this node.
// The path must be a clean relative path; it is resolved inside the
// artifacts directory (os.Root: no "..", no symlink out of it) and must be
// a regular file. ErrNoSuchArtifact when it is not here.
func (w *Worker) OpenArtifact(jobID string, attempt int, path string) (*os.File, error) {
	if err := fsm.ValidArtifactPath(path); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoSuchArtifact, err)
	}
	dir := w.AttemptDir(jobID, attempt)
	root, err := os.OpenRoot(artifactsDir(dir))
	if err != nil {
		return nil, fmt.Errorf("%w: job %s attempt %d has no artifacts directory here", ErrNoSuchArtifact, jobID, attempt)
	}
	defer root.Close()
	f, err := root.OpenFile(filepath.FromSlash(path), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %s of job %s attempt %d: %v", ErrNoSuchArtifact, path, jobID, attempt, err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s of job %s attempt %d is not a regular file", ErrNoSuchArtifact, path, jobID, attempt)
	}
	return f, nil
}

// fetchInputArtifacts copies each parent's artifacts into
// <inputs>/<parent>/artifacts/ before the child starts. A parent whose
// node cannot serve them fails the start: a child must not run on part of
// its inputs.
func (w *Worker) fetchInputArtifacts(ctx context.Context, dir string, inputs []Input) error {
	for _, in := range inputs {
		if len(in.Artifacts) == 0 || !safeInputName(in.Name) {
			continue
		}
		base := filepath.Join(inputsDir(dir), in.Name, InputArtifactsName)
		for _, a := range in.Artifacts {
			if fsm.ValidArtifactPath(a.Path) != nil {
				continue
			}
			dst := filepath.Join(base, filepath.FromSlash(a.Path))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			if err := w.copyArtifact(ctx, in, a.Path, dst); err != nil {
				return fmt.Errorf("artifact %s of parent %s (job %s attempt %d, kept on node %s): %w", a.Path, in.Name, in.JobID, in.Attempt, in.Node, err)
			}
		}
	}
	return nil
}

// copyArtifact copies one input artifact from the node that holds it or,
// when that fails (the node is dead, gone or evicted it), from the object
// store it was uploaded to.
func (w *Worker) copyArtifact(ctx context.Context, in Input, path, dst string) error {
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	nerr := w.copyArtifactFromNode(ctx, in, path, f)
	if nerr == nil || in.Outputs.Object(fsm.OutputArtifact(path)) == nil {
		return nerr
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, artifactFetchTimeout)
	defer cancel()
	r, err := w.openStored(ctx, in, path)
	if err == nil {
		_, err = io.Copy(f, r)
		r.Close()
	}
	if err != nil {
		return fmt.Errorf("%v; from the object store: %w", nerr, err)
	}
	w.log.Info("input artifact read from the object store", "job", in.JobID, "attempt", in.Attempt, "path", path, "node_err", nerr)
	return nil
}

func (w *Worker) copyArtifactFromNode(ctx context.Context, in Input, path string, f *os.File) error {
	if in.Node == w.cfg.Node {
		src, err := w.OpenArtifact(in.JobID, in.Attempt, path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(f, src)
		return err
	}
	if w.deps.Artifacts == nil {
		return errors.New("this agent has no way to fetch artifacts from other nodes")
	}
	ctx, cancel := context.WithTimeout(ctx, artifactFetchTimeout)
	defer cancel()
	return w.deps.Artifacts.FetchArtifact(ctx, in.Node, in.JobID, in.Attempt, path, f)
}

// artifactFetchTimeout bounds one input artifact's transfer.
const artifactFetchTimeout = 10 * time.Minute

func safeInputName(n string) bool {
	return n != "" && n != "." && n != ".." && filepath.Base(n) == n
}

// enforceNodeCap removes the artifacts of the oldest reported attempts
// until those kept on this node fit in ArtifactsNodeMaxBytes. Attempts
// still running are never touched. It walks only attempts that have an
// artifacts directory with something in it.
func (w *Worker) enforceNodeCap() {
	limit := w.cfg.ArtifactsNodeMaxBytes
	if limit <= 0 {
		return
	}
	entries, err := os.ReadDir(w.attemptsDir)
	if err != nil {
		return
	}
	type kept struct {
		dir  string
		at   time.Time
		size int64
	}
	var all []kept
	var total int64
	for _, e := range entries {
		dir := filepath.Join(w.attemptsDir, e.Name())
		fi, err := os.Stat(filepath.Join(dir, ReportedName))
		if err != nil {
			continue
		}
		var size int64
		_ = filepath.WalkDir(artifactsDir(dir), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if i, err := d.Info(); err == nil {
					size += i.Size()
				}
			}
			return nil
		})
		if size > 0 {
			all = append(all, kept{dir, fi.ModTime(), size})
			total += size
		}
	}
	if total <= limit {
		return
	}
	sort.Slice(all, func(i, j int) bool { return all[i].at.Before(all[j].at) })
	for _, k := range all {
		if total <= limit {
			break
		}
		if err := os.RemoveAll(artifactsDir(k.dir)); err != nil {
			w.log.Warn("evict artifacts", "dir", k.dir, "err", err)
			continue
		}
		total -= k.size
		w.log.Info("artifacts evicted (node cap)", "dir", k.dir, "bytes", k.size, "cap", limit)
	}
}
