package exec

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Job inputs (issue 25): before an attempt starts, every fsm.InputSource
// of its spec is fetched into the job's working directory (task/, /task in
// a container, so both drivers see it): http(s) with a plain GET,
// s3://bucket/key through the agent's object store client (its endpoint
// and credentials). A checksum is verified before the file is placed; a
// file with a checksum is cached on the node under it (<data>/inputs/),
// so the next attempt or job that names it does not fetch it again. A
// fetch that fails (404, wrong checksum, over InputMaxBytes, timeout)
// fails the start with a reason naming the source, and the attempt is
// retried like any failed start.

// Defaults of the input bounds.
const (
	DefaultInputMaxBytes      = 10 << 30
	DefaultInputCacheMaxBytes = 10 << 30
	DefaultInputFetchTimeout  = 30 * time.Minute
)

// inputsCacheDir is the node's cache of inputs by checksum.
func (w *Worker) inputsCacheDir() string { return filepath.Join(w.cfg.DataDir, "inputs") }

// fetchInputs places every input of the spec in the attempt's task dir.
func (w *Worker) fetchInputs(ctx context.Context, dir string, inputs []fsm.InputSource) error {
	if len(inputs) == 0 {
		return nil
	}
	root, err := os.OpenRoot(filepath.Join(dir, WorkDirName))
	if err != nil {
		return err
	}
	defer root.Close()
	for _, in := range inputs {
		if field, err := fsm.ValidateInput(in); err != nil { // Apply stored it valid; a second fence
			return fmt.Errorf("input %s: %s %v", in.Source, field, err)
		}
		if err := w.fetchInput(ctx, root, in); err != nil {
			return fmt.Errorf("input %s: %w", in.Source, err)
		}
	}
	return nil
}

func (w *Worker) fetchInput(ctx context.Context, root *os.Root, in fsm.InputSource) error {
	dest := filepath.FromSlash(fsm.InputDest(in))
	if d := filepath.Dir(dest); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	sum := strings.TrimPrefix(in.Checksum, "sha256:")
	cached := ""
	if sum != "" {
		cached = filepath.Join(w.inputsCacheDir(), "sha256-"+sum)
		if f, err := os.Open(cached); err == nil {
			defer f.Close()
			now := time.Now()
			os.Chtimes(cached, now, now) // the cache evicts the least recently used
			w.log.Info("input from the node's cache", "source", in.Source, "checksum", in.Checksum)
			return copyInto(root, dest, f)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.InputFetchTimeout)
	defer cancel()
	if err := os.MkdirAll(w.inputsCacheDir(), 0o700); err != nil {
		return err
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(w.inputsCacheDir(), ".fetch-"+hex.EncodeToString(rnd[:]))
	defer os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if err := w.download(ctx, in.Source, io.MultiWriter(f, h)); err != nil {
		return err
	}
	got := hex.EncodeToString(h.Sum(nil))
	if sum != "" && got != sum {
		return fmt.Errorf("checksum mismatch: got sha256:%s, the spec says sha256:%s", got, sum)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := copyInto(root, dest, f); err != nil {
		return err
	}
	if cached != "" && f.Sync() == nil && os.Rename(tmp, cached) == nil {
		w.trimInputCache()
	}
	return nil
}

// download writes the source's bytes to out, at most InputMaxBytes.
func (w *Worker) download(ctx context.Context, source string, out io.Writer) error {
	u, err := url.Parse(source)
	if err != nil {
		return err
	}
	var body io.ReadCloser
	size := int64(-1)
	switch u.Scheme {
	case "s3":
		if w.deps.Outputs == nil {
			return errors.New("s3:// inputs need --object-store on the agent (its endpoint and credentials are used)")
		}
		body, size, err = w.deps.Outputs.OpenObject(ctx, u.Host, strings.TrimPrefix(u.Path, "/"))
		if err != nil {
			return err
		}
	default:
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, source, nil)
		if err != nil {
			return err
		}
		resp, err := inputClient.Do(req)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return fmt.Errorf("GET: %s", resp.Status)
		}
		body, size = resp.Body, resp.ContentLength
	}
	defer body.Close()
	max := w.cfg.InputMaxBytes
	if size > max {
		return fmt.Errorf("%d bytes, over this node's input limit of %d (--input-max)", size, max)
	}
	n, err := io.Copy(out, io.LimitReader(body, max+1))
	if err != nil {
		return err
	}
	if n > max {
		return fmt.Errorf("over this node's input limit of %d bytes (--input-max)", max)
	}
	if size >= 0 && n != size {
		return fmt.Errorf("got %d of %d bytes", n, size)
	}
	return nil
}

// inputClient fetches http(s) inputs: the environment's proxy, redirects
// followed (at most 10), no overall timeout (the fetch's context bounds it).
var inputClient = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	TLSHandshakeTimeout:   10 * time.Second,
	ResponseHeaderTimeout: time.Minute,
}}

// copyInto writes r to dest inside root (no symlink out of the task dir),
// replacing what is there.
func copyInto(root *os.Root, dest string, r io.Reader) error {
	f, err := root.OpenFile(dest, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// trimInputCache evicts the least recently used cached inputs until the
// cache fits InputCacheMaxBytes.
func (w *Worker) trimInputCache() {
	ents, err := os.ReadDir(w.inputsCacheDir())
	if err != nil {
		return
	}
	type file struct {
		path string
		at   time.Time
		size int64
	}
	var all []file
	var total int64
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "sha256-") {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			all = append(all, file{filepath.Join(w.inputsCacheDir(), e.Name()), fi.ModTime(), fi.Size()})
			total += fi.Size()
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].at.Before(all[j].at) })
	for _, f := range all {
		if total <= w.cfg.InputCacheMaxBytes {
			return
		}
		if err := os.Remove(f.path); err == nil || errors.Is(err, fs.ErrNotExist) {
			total -= f.size
		}
	}
}
