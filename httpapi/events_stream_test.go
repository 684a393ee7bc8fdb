package httpapi

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestEventStreamPaths: the same stream through a hijacked HTTP/1.1
// connection (close-delimited, the response head written by the stream)
// and through a ResponseWriter that cannot be hijacked (Write + Flush):
// the middleware's headers, and the events as they are committed.
func TestEventStreamPaths(t *testing.T) {
	for _, tc := range []struct {
		name     string
		noHijack bool
	}{{"hijacked", false}, {"plain", true}} {
		t.Run(tc.name, func(t *testing.T) {
			a := newTestAPI(t)
			url := a.srv.URL
			if tc.noHijack {
				h := a.srv.Config.Handler
				plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					// Only ResponseWriter and Flusher: no Hijack, no Unwrap.
					h.ServeHTTP(struct {
						http.ResponseWriter
						http.Flusher
					}{w, w.(http.Flusher)}, r)
				}))
				t.Cleanup(plain.Close)
				url = plain.URL
			}
			req, _ := http.NewRequest("GET", url+"/v1/events?topic=job", nil)
			req.Header.Set(HeaderRequestID, "stream-1")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" ||
				resp.Header.Get(HeaderRequestID) != "stream-1" || resp.Header.Get(HeaderNode) != "n1" {
				t.Fatalf("response %d, headers %v", resp.StatusCode, resp.Header)
			}
			if hijacked := resp.Close && len(resp.TransferEncoding) == 0; hijacked == tc.noHijack {
				t.Errorf("close-delimited body: %v (transfer encoding %v), want %v", hijacked, resp.TransferEncoding, !tc.noHijack)
			}
			lines := make(chan string, 100)
			go func() {
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			var ids []string
			for i := 0; i < 3; i++ {
				ids = append(ids, a.submit(`{"command":["true"]}`))
			}
			deadline := time.After(streamTimeout)
			for len(ids) > 0 {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("stream ended; still waiting for %v", ids)
					}
					if strings.HasPrefix(l, "data: ") && strings.Contains(l, `"job_id":"`+ids[0]+`"`) {
						ids = ids[1:]
					}
				case <-deadline:
					t.Fatalf("no events for %v within %s", ids, streamTimeout)
				}
			}
			resp.Body.Close()
			waitFor(t, "the stream to end after the client left", func() bool { return a.srvSubscribers() == 0 })
		})
	}
}

// TestEventStreamShutdown: Server.Shutdown ends open streams, hijacked
// (net/http no longer tracks the connection) and plain (Shutdown would
// wait for the handler for ever), and returns without waiting for them.
func TestEventStreamShutdown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		noHijack bool
	}{{"hijacked", false}, {"plain", true}} {
		t.Run(tc.name, func(t *testing.T) {
			a := newTestAPI(t)
			srv := a.srv
			if tc.noHijack {
				h := a.srv.Config.Handler
				srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					h.ServeHTTP(struct {
						http.ResponseWriter
						http.Flusher
					}{w, w.(http.Flusher)}, r)
				}))
				t.Cleanup(srv.Close)
			}
			var bodies []*bufio.Reader
			for range 3 {
				resp, err := http.Get(srv.URL + "/v1/events")
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				br := bufio.NewReader(resp.Body)
				// The first comment: the stream is being served.
				if l, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(l, ": ") {
					t.Fatalf("first line %q, %v", l, err)
				}
				bodies = append(bodies, br)
			}
			waitFor(t, "three streams open", func() bool { return a.srvSubscribers() == 3 })
			ctx, cancel := context.WithTimeout(context.Background(), streamTimeout)
			defer cancel()
			if err := srv.Config.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown: %v (the streams kept it waiting)", err)
			}
			for i, br := range bodies {
				ended := make(chan error, 1)
				go func() {
					_, err := io.Copy(io.Discard, br)
					ended <- err
				}()
				select {
				case <-ended:
				case <-time.After(streamTimeout):
					t.Fatalf("stream %d still open %s after Shutdown", i, streamTimeout)
				}
			}
			waitFor(t, "the handlers to end", func() bool { return a.srvSubscribers() == 0 })
		})
	}
}
