package ui

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, path string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestIndexAndDeepLinks(t *testing.T) {
	h := Handler()
	for _, p := range []string{"/ui/", "/ui/jobs", "/ui/jobs/01JABC", "/ui/workflows/x/y"} {
		w := get(t, h, p)
		if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
			t.Fatalf("%s: %d %s", p, w.Code, w.Header().Get("Content-Type"))
		}
		if w.Header().Get("Cache-Control") != "no-cache" || w.Header().Get("ETag") == "" {
			t.Fatalf("%s: index must revalidate: %v", p, w.Header())
		}
		if !strings.Contains(w.Header().Get("Content-Security-Policy"), "script-src 'self'") {
			t.Fatalf("%s: no CSP: %v", p, w.Header())
		}
		body := w.Body.String()
		if strings.Contains(body, "{{ASSETS}}") || !strings.Contains(body, "/ui/assets/") {
			t.Fatalf("%s: asset URLs not filled in:\n%s", p, body)
		}
		// No inline script or style: the CSP forbids them.
		if regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]`).MatchString(body) || strings.Contains(body, "style=") || strings.Contains(body, "<style") {
			t.Fatalf("%s: inline script or style in index.html", p)
		}
		etag := w.Header().Get("ETag")
		if w2 := get(t, h, p, "If-None-Match", etag); w2.Code != http.StatusNotModified {
			t.Fatalf("%s with If-None-Match: %d", p, w2.Code)
		}
	}
	if w := get(t, h, "/ui/favicon.ico"); w.Code != 404 {
		t.Fatalf("a file name outside assets/ must 404, got %d", w.Code)
	}
}

func TestAssetsHashedCachedGzipped(t *testing.T) {
	h, err := newHandler(Assets())
	if err != nil {
		t.Fatal(err)
	}
	base := h.AssetBase()
	n := 0
	err = fs.WalkDir(Assets(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == "index.html" {
			return err
		}
		n++
		want, _ := fs.ReadFile(Assets(), p)
		w := get(t, h, base+p, "Accept-Encoding", "gzip, deflate")
		if w.Code != 200 {
			t.Fatalf("%s: %d", p, w.Code)
		}
		if cc := w.Header().Get("Cache-Control"); !strings.Contains(cc, "immutable") || !strings.Contains(cc, "max-age=31536000") {
			t.Fatalf("%s: Cache-Control %q", p, cc)
		}
		ct := w.Header().Get("Content-Type")
		if strings.HasSuffix(p, ".js") && ct != "text/javascript; charset=utf-8" {
			t.Fatalf("%s: a module needs a JavaScript type, got %q", p, ct)
		}
		if strings.HasSuffix(p, ".css") && !strings.HasPrefix(ct, "text/css") {
			t.Fatalf("%s: %q", p, ct)
		}
		body := w.Body.Bytes()
		if w.Header().Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(zr)
		} else if len(want) > 2048 && strings.HasPrefix(ct, "text/") {
			t.Fatalf("%s (%d bytes) not gzipped", p, len(want))
		}
		if !bytes.Equal(body, want) {
			t.Fatalf("%s: body differs", p)
		}
		// Without Accept-Encoding: identity.
		if w := get(t, h, base+p); w.Header().Get("Content-Encoding") != "" || !bytes.Equal(w.Body.Bytes(), want) {
			t.Fatalf("%s: identity body wrong", p)
		}
		// Another version: served, not cached.
		if w := get(t, h, "/ui/assets/0000/"+p); w.Code != 200 || w.Header().Get("Cache-Control") != "no-cache" {
			t.Fatalf("%s under another version: %d %v", p, w.Code, w.Header())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("only %d assets", n)
	}
	if w := get(t, h, base+"nope.js"); w.Code != 404 {
		t.Fatalf("unknown asset: %d", w.Code)
	}
	r := httptest.NewRequest(http.MethodPost, "/ui/", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", w.Code)
	}
}

// TestNoHTMLSinks keeps data out of markup: the UI builds the DOM with
// textContent and createElement only. A sink here would need a review of
// what reaches it, so the test refuses them all.
func TestNoHTMLSinks(t *testing.T) {
	sinks := regexp.MustCompile(`\.innerHTML|\.outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function\(|srcdoc|createContextualFragment|DOMParser`)
	err := fs.WalkDir(Assets(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") {
			return err
		}
		b, _ := fs.ReadFile(Assets(), p)
		for i, line := range strings.Split(string(b), "\n") {
			if m := sinks.FindString(line); m != "" && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				t.Errorf("%s:%d uses %s", p, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestAcceptsGzip(t *testing.T) {
	for h, want := range map[string]bool{"gzip": true, "br, gzip;q=0.8": true, "gzip;q=0": false, "identity": false, "": false, "deflate, gzip": true} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Accept-Encoding", h)
		if got := acceptsGzip(r); got != want {
			t.Errorf("%q: %v, want %v", h, got, want)
		}
	}
}
