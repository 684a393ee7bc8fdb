package exec

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Checkpoints across nodes (issue 18). A task's checkpoint directory lives
// on the node that ran it. When its next attempt is placed on another node,
// the worker there fetches the directory from the node of the task's
// latest started attempt (Assignment.CheckpointFrom) through that node's
// GET /v1/internal/checkpoints/{name} (cluster-internal secret under ACL,
// an agent certificate under TLS), as a tar stream of regular files and
// directories, and puts it in place of its own copy before the attempt
// starts. Bounded like a local directory (CheckpointDirMax, at most
// checkpointMaxFiles entries) and in time (checkpointFetchTimeout). A node
// that cannot answer (dead, partitioned, evicted the directory) leaves the
// attempt with what its own node has, logged.

// ErrNoCheckpoint: this node has no checkpoint directory of that name.
var ErrNoCheckpoint = errors.New("no checkpoint directory here")

// CheckpointFetcher copies another node's checkpoint directory, as the tar
// stream WriteCheckpoint makes, to out (main adapts the HTTP API).
// ErrNoCheckpoint (wrapped) when that node has none.
type CheckpointFetcher interface {
	FetchCheckpoint(ctx context.Context, node, name string, out io.Writer) error
}

const (
	checkpointFetchTimeout = 2 * time.Minute
	checkpointMaxFiles     = 10000
)

// ValidCheckpointName reports whether name can name a checkpoint directory
// (CheckpointName's output: one path element).
func ValidCheckpointName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, `/\`) && len(name) <= 255
}

// WriteCheckpoint writes the checkpoint directory name as a tar stream of
// its regular files and directories (symlinks and the rest are left out),
// at most CheckpointDirMax bytes of file content.
func (w *Worker) WriteCheckpoint(name string, out io.Writer) error {
	if !ValidCheckpointName(name) {
		return fmt.Errorf("%w: bad name %q", ErrNoCheckpoint, name)
	}
	root, err := os.OpenRoot(filepath.Join(w.checkpointsRoot(), name))
	if err != nil {
		return fmt.Errorf("%w: %s", ErrNoCheckpoint, name)
	}
	defer root.Close()
	tw := tar.NewWriter(out)
	var total int64
	files := 0
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return nil
		}
		files++
		if files > checkpointMaxFiles {
			return fmt.Errorf("checkpoint %s has more than %d entries", name, checkpointMaxFiles)
		}
		switch {
		case d.IsDir():
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: 0o777})
		case d.Type().IsRegular():
			f, err := root.Open(p)
			if err != nil {
				return nil // removed meanwhile
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil || !st.Mode().IsRegular() {
				return nil
			}
			total += st.Size()
			if total > CheckpointDirMax {
				return fmt.Errorf("checkpoint %s is over %d bytes", name, CheckpointDirMax)
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: 0o666, Size: st.Size(), ModTime: st.ModTime()}); err != nil {
				return err
			}
			_, err = io.CopyN(tw, f, st.Size())
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// fetchCheckpoint copies node's checkpoint directory name into dir,
// replacing its contents, and returns the bytes copied. Nothing changes in
// dir unless the whole directory arrived.
func (w *Worker) fetchCheckpoint(ctx context.Context, node, name, dir string) (int64, error) {
	return w.fetchCheckpointFrom(ctx, name, dir, func(ctx context.Context, out io.Writer) error {
		return w.deps.Checkpoints.FetchCheckpoint(ctx, node, name, out)
	})
}

// fetchCheckpointFrom is fetchCheckpoint from any source of the tar stream.
func (w *Worker) fetchCheckpointFrom(ctx context.Context, name, dir string, src func(context.Context, io.Writer) error) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, checkpointFetchTimeout)
	defer cancel()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(w.checkpointsRoot(), ".fetch-"+name+"-"+hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(src(ctx, pw)) }()
	n, err := extractCheckpoint(pr, tmp)
	pr.CloseWithError(err) // unblocks the fetcher if we stopped early
	if err != nil {
		return 0, err
	}
	// Swap: the fetched copy is the newer one (the task's latest attempt
	// ran there).
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
	got, err := os.ReadDir(tmp)
	if err != nil {
		return 0, err
	}
	for _, e := range got {
		if err := os.Rename(filepath.Join(tmp, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// extractCheckpoint unpacks a checkpoint tar stream into dir (which it
// resolves every name inside: os.Root), regular files and directories
// only, within CheckpointDirMax and checkpointMaxFiles.
func extractCheckpoint(r io.Reader, dir string) (int64, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	var total int64
	for files := 0; ; files++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return 0, err
		}
		if files >= checkpointMaxFiles {
			return 0, fmt.Errorf("more than %d entries", checkpointMaxFiles)
		}
		name := filepath.Clean(filepath.FromSlash(strings.TrimSuffix(h.Name, "/")))
		if !filepath.IsLocal(name) {
			return 0, fmt.Errorf("entry %q is not a local path", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o777); err != nil {
				return 0, err
			}
		case tar.TypeReg:
			total += h.Size
			if h.Size < 0 || total > CheckpointDirMax {
				return 0, fmt.Errorf("over %d bytes", CheckpointDirMax)
			}
			if d := filepath.Dir(name); d != "." {
				if err := root.MkdirAll(d, 0o777); err != nil {
					return 0, err
				}
			}
			f, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
			if err != nil {
				return 0, err
			}
			_, err = io.CopyN(f, tr, h.Size)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return 0, err
			}
		default:
			return 0, fmt.Errorf("entry %q: only files and directories", h.Name)
		}
	}
}
