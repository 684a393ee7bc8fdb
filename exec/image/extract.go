package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// extractStats counts entries that were deliberately not written.
type extractStats struct {
	files, skippedDevices, droppedSetid int
	entries                             int   // tar entries read
	bytes                               int64 // regular-file bytes written
}

// extractLimits bound what one image may put on the host's disk: a layer
// of a few KiB can decompress to terabytes of zeros (a gzip or sparse-file
// bomb) or to millions of empty files.
type extractLimits struct {
	maxBytes   int64 // total size of regular files
	maxEntries int   // tar entries of the flattened image
}

// untar writes a flattened image tar into dir through an os.Root, which
// refuses any path (via `..`, an absolute name, or a symlink/hardlink
// planted by an earlier entry) that would resolve outside dir. Names that
// are absolute or contain `..` are refused before the Root even sees them,
// so the error names the entry.
//
// An image over lim is refused (ErrUnsafe) before the entry that crosses
// a limit is written.
func untar(r io.Reader, dir string, lim extractLimits) (extractStats, error) {
	var st extractStats
	root, err := os.OpenRoot(dir)
	if err != nil {
		return st, err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			// mutate.Extract writes the tar trailer before it reports an
			// error through the pipe: read past the trailer to see it, or
			// a refused layer would look like a short, valid one.
			_, err = io.Copy(io.Discard, r)
		}
		if err == nil && hdr == nil {
			return st, nil
		}
		if err != nil {
			// mutate.Extract refuses `..` names itself; keep that a refusal.
			if strings.Contains(err.Error(), "unsafe tar path") {
				return st, fmt.Errorf("%w: %v", ErrUnsafe, err)
			}
			return st, fmt.Errorf("%w: reading layer tar: %v", ErrPull, err)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return st, err
		}
		if st.entries++; st.entries > lim.maxEntries {
			return st, fmt.Errorf("%w: more than %d entries (a tar bomb?)", ErrUnsafe, lim.maxEntries)
		}
		if name == "." {
			continue
		}
		if hdr.Typeflag == tar.TypeReg {
			// Size is the file's full length, holes of a sparse file included.
			if hdr.Size < 0 || hdr.Size > lim.maxBytes-st.bytes {
				return st, fmt.Errorf("%w: %q: %d bytes would take the image over %d bytes (a tar bomb?)",
					ErrUnsafe, hdr.Name, hdr.Size, lim.maxBytes)
			}
			st.bytes += hdr.Size
		}
		if err := writeEntry(root, tr, hdr, name, &st); err != nil {
			return st, fmt.Errorf("%w: %q: %v", ErrUnsafe, hdr.Name, err)
		}
	}
}

// entryName returns the cleaned relative name of a tar entry, refusing
// absolute names and any `..` component.
func entryName(raw string) (string, error) {
	if strings.HasPrefix(raw, "/") {
		return "", fmt.Errorf("%w: %q: absolute path", ErrUnsafe, raw)
	}
	for _, part := range strings.Split(raw, "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: %q: contains ..", ErrUnsafe, raw)
		}
	}
	return path.Clean(raw), nil
}

func writeEntry(root *os.Root, r io.Reader, hdr *tar.Header, name string, st *extractStats) error {
	// Keep rwx and the sticky bit; drop setuid/setgid (see doc.go).
	mode := fs.FileMode(hdr.Mode).Perm()
	if hdr.Mode&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	if hdr.Mode&0o6000 != 0 {
		st.droppedSetid++
	}
	if parent := path.Dir(name); parent != "." {
		if err := root.MkdirAll(parent, 0o755); err != nil {
			return err
		}
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		// Mkdir takes permission bits only (os.Root refuses the sticky bit
		// of every /tmp); the Chmod below sets the full mode.
		if err := root.Mkdir(name, mode.Perm()); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	case tar.TypeReg:
		if err := removeNonDir(root, name); err != nil {
			return err
		}
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode.Perm())
		if err != nil {
			return err
		}
		_, err = io.Copy(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		st.files++
	case tar.TypeSymlink:
		// The target is stored verbatim; it is only ever followed inside the
		// container (chrooted) or through an os.Root, never on the host.
		if err := removeNonDir(root, name); err != nil {
			return err
		}
		if err := root.Symlink(hdr.Linkname, name); err != nil {
			return err
		}
		return root.Lchown(name, hdr.Uid, hdr.Gid)
	case tar.TypeLink:
		target, err := entryName(hdr.Linkname)
		if err != nil {
			return err
		}
		if err := removeNonDir(root, name); err != nil {
			return err
		}
		// Link resolves target inside the root: an escape fails here.
		return root.Link(target, name)
	default: // devices, fifos and unknown types are never created
		st.skippedDevices++
		return nil
	}
	if err := root.Lchown(name, hdr.Uid, hdr.Gid); err != nil {
		return err
	}
	// Chmod after chown: chown clears mode bits, and Mkdir honoured umask.
	return root.Chmod(name, mode)
}

// removeNonDir removes an existing entry so a later layer's file replaces it.
func removeNonDir(root *os.Root, name string) error {
	fi, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("cannot replace directory with a non-directory")
	}
	return root.Remove(name)
}

// prepareMountpoints creates empty dirs and files the runtime mounts over.
// A symlink at a file mountpoint (e.g. /etc/resolv.conf -> ../run/...) is
// replaced by an empty file: the runtime must never follow it on the host.
func prepareMountpoints(dir string, dirs, files []string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, d := range dirs {
		if err := root.MkdirAll(strings.TrimPrefix(d, "/"), 0o755); err != nil {
			return fmt.Errorf("%w: mountpoint %s: %v", ErrUnsafe, d, err)
		}
	}
	for _, f := range files {
		rel := strings.TrimPrefix(f, "/")
		if err := root.MkdirAll(path.Dir(rel), 0o755); err != nil {
			return fmt.Errorf("%w: mountpoint %s: %v", ErrUnsafe, f, err)
		}
		if fi, err := root.Lstat(rel); err == nil {
			if fi.Mode().IsRegular() {
				continue
			}
			if fi.Mode()&fs.ModeSymlink == 0 {
				return fmt.Errorf("%w: mountpoint %s exists and is not a file", ErrUnsafe, f)
			}
			if err := root.Remove(rel); err != nil {
				return err
			}
		}
		fh, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("%w: mountpoint %s: %v", ErrUnsafe, f, err)
		}
		fh.Close()
	}
	return nil
}
