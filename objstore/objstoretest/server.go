// Package objstoretest starts a real S3-compatible server for tests:
// SeaweedFS (`weed mini`, Apache-2.0), built by scripts/test-deps.sh into
// the repository's bin/weed. Not an in-process fake: uploads, multipart,
// signatures and outages are the real protocol over loopback TCP.
package objstoretest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/objstore"
)

// Credentials the server accepts (an admin identity made from the
// environment it is started with).
const (
	AccessKey = "foremantest"
	SecretKey = "foremantest-secret-key"
)

// startWait bounds how long the server may take to answer (a loaded
// 2-core CI machine starts weed's master, volume, filer and gateway in a
// few seconds).
const startWait = 90 * time.Second

// Server is one running SeaweedFS with an S3 gateway on loopback.
type Server struct {
	t        testing.TB
	bin, dir string
	Bucket   string
	// Endpoint is http://127.0.0.1:<port>, the S3 gateway.
	Endpoint string
	ports    []int
	weed     *Weed
}

// Binary is the weed binary: $FOREMAN_WEED, else bin/weed at the
// repository's root. A test without one fails under CI=true (the suite
// must run there) and skips loudly elsewhere.
func Binary(t testing.TB) string {
	t.Helper()
	bin := WeedPath()
	if _, err := os.Stat(bin); err != nil {
		msg := fmt.Sprintf("no S3 server for the test: %s missing (run ./scripts/test-deps.sh, or set FOREMAN_WEED)", bin)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED (not CI): " + msg)
	}
	return bin
}

// Start runs a server with bucket created, and stops it when the test
// ends.
func Start(t testing.TB, bucket string) *Server {
	t.Helper()
	s := &Server{t: t, bin: Binary(t), dir: t.TempDir(), Bucket: bucket}
	ports, err := FreePorts("127.0.0.1", 9)
	if err != nil {
		t.Fatal(err)
	}
	s.ports = ports
	s.Endpoint = "http://127.0.0.1:" + strconv.Itoa(s.ports[6])
	t.Cleanup(s.Stop)
	s.Restart()
	return s
}

// Config is the objstore configuration for this server.
func (s *Server) Config(prefix string) objstore.Config {
	u := "s3://" + s.Bucket
	if prefix != "" {
		u += "/" + prefix
	}
	return objstore.Config{URL: u, Endpoint: s.Endpoint, PathStyle: true}
}

// Env is the credentials' environment for a client (an agent).
func (s *Server) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + AccessKey, "AWS_SECRET_ACCESS_KEY=" + SecretKey}
}

// Restart starts the server again on the same ports and data (after
// Stop): a store that comes back after an outage.
func (s *Server) Restart() {
	t := s.t
	t.Helper()
	weed, err := StartWeed(s.bin, s.dir, "127.0.0.1", s.Bucket, s.ports, s.Env())
	if err != nil {
		t.Fatal(err)
	}
	s.weed = weed
	for _, e := range s.Env() {
		k, v, _ := strings.Cut(e, "=")
		t.Setenv(k, v) // the test's own objstore.Store finds them as an agent would
	}
	st, err := objstore.New(s.Config(""))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(startWait)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-s.weed.Done():
			t.Fatalf("weed exited at start; its log:\n%s", s.Log())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		last = st.Check(ctx)
		cancel()
		if last == nil {
			return
		}
		time.Sleep(200 * time.Millisecond) // polling a server that is starting
	}
	t.Fatalf("weed did not serve bucket %s within %v: %v; its log:\n%s", s.Bucket, startWait, last, s.Log())
}

// Stop stops the server (SIGTERM, then SIGKILL) and waits for it.
func (s *Server) Stop() {
	if s.weed == nil {
		return
	}
	s.weed.Stop()
	s.weed = nil
}

// Log is the server's output so far (for failure messages).
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "weed.log"))
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return string(b)
}
