package ui

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"sort"
	"strings"
)

// Prefix is where the UI is mounted.
const Prefix = "/ui/"

// CSP is the Content-Security-Policy of every UI response: no inline script
// or style, no other origin. Data never becomes markup (the pages build the
// DOM with textContent), and this is the second line of defence.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

// asset is one embedded file, prepared once at start-up.
type asset struct {
	body  []byte
	gz    []byte // nil when gzip does not pay (images, tiny files)
	ctype string
	etag  string
}

// Handler serves the UI under /ui/:
//
//   - /ui/assets/<version>/<file>: the embedded files; <version> is a hash of
//     all of them, so a URL names exactly one content and is cached for a
//     year (immutable). A request for another version still gets the current
//     file, uncached (a page from an older binary during a rolling restart).
//   - anything else under /ui/ (/ui/, /ui/jobs/01J…): index.html, so deep
//     links work on reload (the page routes on location.pathname); no-cache,
//     with an ETag, so a reload costs a 304.
//
// Files are gzipped once at start-up and served compressed to clients that
// accept it.
func Handler() http.Handler {
	h, err := newHandler(Assets())
	if err != nil {
		panic(err) // the embedded files are fixed at build time; a test covers them
	}
	return h
}

type handler struct {
	version string
	files   map[string]*asset
	index   *asset
}

func newHandler(fsys fs.FS) (*handler, error) {
	h := &handler{files: map[string]*asset{}}
	var names []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	all := sha256.New()
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(all, "%s\x00%d\x00", n, len(b))
		all.Write(b)
		h.files[n] = newAsset(n, b)
	}
	h.version = hex.EncodeToString(all.Sum(nil))[:12]
	raw, ok := h.files["index.html"]
	if !ok {
		return nil, fmt.Errorf("ui: no index.html among the assets")
	}
	// index.html names its assets with the placeholder; the version makes
	// every URL content-addressed.
	idx := bytes.ReplaceAll(raw.body, []byte("{{ASSETS}}"), []byte(h.AssetBase()))
	h.index = newAsset("index.html", idx)
	return h, nil
}

func newAsset(name string, b []byte) *asset {
	ct := mime.TypeByExtension(path.Ext(name))
	switch path.Ext(name) { // never trust the host's MIME table for these
	case ".js":
		ct = "text/javascript; charset=utf-8"
	case ".css":
		ct = "text/css; charset=utf-8"
	case ".html":
		ct = "text/html; charset=utf-8"
	case ".svg":
		ct = "image/svg+xml"
	}
	if ct == "" {
		ct = "application/octet-stream"
	}
	sum := sha256.Sum256(b)
	a := &asset{body: b, ctype: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	if len(b) > 512 && (strings.HasPrefix(ct, "text/") || ct == "image/svg+xml" || strings.Contains(ct, "json")) {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(b)
		zw.Close()
		if buf.Len() < len(b) {
			a.gz = buf.Bytes()
		}
	}
	return a
}

// AssetBase is the URL prefix of the current assets, ending in a slash.
func (h *handler) AssetBase() string { return Prefix + "assets/" + h.version + "/" }

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", CSP)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	rest := strings.TrimPrefix(r.URL.Path, Prefix)
	if strings.HasPrefix(rest, "assets/") {
		version, name, _ := strings.Cut(strings.TrimPrefix(rest, "assets/"), "/")
		a, ok := h.files[name]
		if !ok || name == "index.html" {
			http.Error(w, "no such asset", http.StatusNotFound)
			return
		}
		if version == h.version {
			hdr.Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			hdr.Set("Cache-Control", "no-cache")
		}
		h.serve(w, r, a)
		return
	}
	if path.Ext(rest) != "" && rest != "index.html" {
		// A file name outside assets/ (favicon.ico, a stale /ui/app.js):
		// a real 404 rather than the page, which would not parse as it.
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	hdr.Set("Cache-Control", "no-cache")
	h.serve(w, r, h.index)
}

func (h *handler) serve(w http.ResponseWriter, r *http.Request, a *asset) {
	hdr := w.Header()
	hdr.Set("Content-Type", a.ctype)
	hdr.Set("ETag", a.etag)
	hdr.Add("Vary", "Accept-Encoding")
	if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.body
	if a.gz != nil && acceptsGzip(r) {
		hdr.Set("Content-Encoding", "gzip")
		body = a.gz
	}
	hdr.Set("Content-Length", fmt.Sprint(len(body)))
	if r.Method == http.MethodHead {
		return
	}
	w.Write(body)
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.TrimSpace(enc) == "gzip" {
			return !strings.Contains(strings.ReplaceAll(params, " ", ""), "q=0") ||
				strings.Contains(params, "q=0.")
		}
	}
	return false
}
