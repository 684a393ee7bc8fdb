package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"
)

// file is one entry of a tar archive. Paths are slash-separated and
// relative; parents are added as directories (0755) unless listed.
type file struct {
	name string
	mode int64 // permission bits; a directory when dir is set
	dir  bool
	data []byte
}

// tarOptions fixes everything a tar header could take from the machine.
type tarOptions struct {
	mtime  time.Time
	prefix string // "./" for Debian archives, "" otherwise
}

// writeTar writes files and their parents in name order, owned by
// root:root with mtime, so the bytes depend on the files alone.
func writeTar(w io.Writer, files []file, o tarOptions) error {
	all := map[string]file{}
	for _, f := range files {
		name := strings.Trim(path.Clean(f.name), "/")
		if name == "." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("tar entry %q: not a relative path", f.name)
		}
		if _, dup := all[name]; dup {
			return fmt.Errorf("tar entry %q: listed twice", name)
		}
		f.name = name
		all[name] = f
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if _, ok := all[d]; !ok {
				all[d] = file{name: d, dir: true, mode: 0o755}
			}
		}
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names) // a parent sorts before its children
	tw := tar.NewWriter(w)
	if o.prefix != "" {
		if err := tw.WriteHeader(header(o.prefix, file{dir: true, mode: 0o755}, o.mtime)); err != nil {
			return err
		}
	}
	for _, n := range names {
		f := all[n]
		if err := tw.WriteHeader(header(o.prefix+n, f, o.mtime)); err != nil {
			return fmt.Errorf("tar entry %s: %w", n, err)
		}
		if !f.dir {
			if _, err := tw.Write(f.data); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

func header(name string, f file, mtime time.Time) *tar.Header {
	h := &tar.Header{
		Name:    name,
		Mode:    f.mode,
		ModTime: mtime,
		Uname:   "root",
		Gname:   "root",
		Format:  tar.FormatUSTAR,
	}
	if f.dir {
		h.Typeflag = tar.TypeDir
		if !strings.HasSuffix(h.Name, "/") {
			h.Name += "/"
		}
	} else {
		h.Typeflag = tar.TypeReg
		h.Size = int64(len(f.data))
	}
	return h
}

// tarGz is writeTar through gzip with an empty header (no name, no time).
func tarGz(files []file, o tarOptions) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if err := writeTar(zw, files, o); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
