package agent

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/foreman-sched/foreman/objstore"
)

// TestOpenObjectStoreUnreachable: a store that cannot be reached at start
// (here a port nobody listens on) does not stop the agent: uploads retry
// until it is back. A missing bucket or refused credentials still do
// (TestSystemObjectStore, on a real server).
func TestOpenObjectStoreUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now: connection refused
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	cfg := &objstore.Config{URL: "s3://outputs/p", Endpoint: "http://" + addr, PathStyle: true}
	s, err := openObjectStore(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil || s == nil {
		t.Fatalf("openObjectStore with the store down: %v, %v; want a store and no error", s, err)
	}
}
