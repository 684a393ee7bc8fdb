package rig

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/foreman-sched/foreman/objstore/objstoretest"
)

// Credentials the test store accepts (its admin identity comes from the
// environment it starts with): objstore/objstoretest's pair.
const (
	StoreAccessKey = objstoretest.AccessKey
	StoreSecretKey = objstoretest.SecretKey
)

// Store is a real S3-compatible server (SeaweedFS, `weed mini`, the
// bin/weed that scripts/test-deps.sh builds) on the host side of the
// bridge: bound to the bridge's address, which every node's namespace
// routes to (it is on their /24) and the harness reaches locally. Stop
// and Start again keep its data (the store-down nemesis).
type Store struct {
	Bin, Dir, IP string
	Bucket       string
	// Retry is the agents' --object-store-retry (default 10m): how long
	// a file is retried before the attempt reports it not stored.
	Retry time.Duration

	mu    sync.Mutex
	ports []int
	weed  *objstoretest.Weed
}

// WeedBinary is $FOREMAN_WEED, else bin/weed at the repository's root.
func WeedBinary() (string, error) {
	bin := objstoretest.WeedPath()
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("no S3 server: %s missing (run ./scripts/test-deps.sh, or set FOREMAN_WEED)", bin)
	}
	return bin, nil
}

// Endpoint is the S3 gateway's address.
func (s *Store) Endpoint() string {
	return "http://" + net.JoinHostPort(s.IP, strconv.Itoa(s.ports[6]))
}

// Env is the credentials' environment for the agents.
func (s *Store) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + StoreAccessKey, "AWS_SECRET_ACCESS_KEY=" + StoreSecretKey}
}

// AgentFlags point an agent at the store (prefix "jepsen").
func (s *Store) AgentFlags() []string {
	retry := s.Retry
	if retry == 0 {
		retry = 10 * time.Minute
	}
	return []string{"--object-store", "s3://" + s.Bucket + "/jepsen", "--object-store-endpoint", s.Endpoint(),
		"--object-store-path-style", "--object-store-retry", retry.String()}
}

// Client is a minio-go client of the bucket (the checker reads objects
// directly, not through foreman).
func (s *Store) Client() (*minio.Client, error) {
	return minio.New(net.JoinHostPort(s.IP, strconv.Itoa(s.ports[6])), &minio.Options{
		Creds: credentials.NewStaticV4(StoreAccessKey, StoreSecretKey, ""), BucketLookup: minio.BucketLookupPath})
}

// Start runs the server (the first time on fresh ports, later on the same
// ports and data) and waits, at most d, until the bucket answers.
func (s *Store) Start(d time.Duration) error {
	s.mu.Lock()
	if s.ports == nil {
		ports, err := objstoretest.FreePorts(s.IP, 9)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		s.ports = ports
	}
	if s.weed != nil && !exited(s.weed.Done()) {
		s.mu.Unlock()
		return nil
	}
	weed, err := objstoretest.StartWeed(s.Bin, s.Dir, s.IP, s.Bucket, s.ports, s.Env())
	if err != nil {
		s.mu.Unlock()
		return err
	}
	s.weed = weed
	s.mu.Unlock()

	mc, err := s.Client()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(d)
	var last error
	for time.Now().Before(deadline) {
		if exited(weed.Done()) {
			return fmt.Errorf("weed exited at start (log in %s)", filepath.Join(s.Dir, "weed.log"))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ok, err := mc.BucketExists(ctx, s.Bucket)
		cancel()
		if err == nil && ok {
			return nil
		}
		last = err
		if err == nil {
			last = errors.New("bucket not there yet")
		}
		time.Sleep(200 * time.Millisecond) // polling a server that is starting
	}
	return fmt.Errorf("weed did not serve bucket %s within %v: %v", s.Bucket, d, last)
}

// Stop stops the server (SIGTERM to its group, then SIGKILL) and waits.
func (s *Store) Stop() {
	s.mu.Lock()
	weed := s.weed
	s.weed = nil
	s.mu.Unlock()
	if weed == nil {
		return
	}
	weed.Stop()
}

// Running reports whether the server process is up.
func (s *Store) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.weed != nil && !exited(s.weed.Done())
}
