package rig

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Credentials the test store accepts (its admin identity comes from the
// environment it starts with; objstore/objstoretest uses the same pair).
const (
	StoreAccessKey = "foremantest"
	StoreSecretKey = "foremantest-secret-key"
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
	cmd   *exec.Cmd
	done  chan struct{}
}

// WeedBinary is $FOREMAN_WEED, else bin/weed at the repository's root.
func WeedBinary() (string, error) {
	bin := os.Getenv("FOREMAN_WEED")
	if bin == "" {
		d, _ := os.Getwd()
		for {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				break
			}
			p := filepath.Dir(d)
			if p == d {
				break
			}
			d = p
		}
		bin = filepath.Join(d, "bin", "weed")
	}
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
		ports, err := freePorts(s.IP, 9)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		s.ports = ports
	}
	if s.cmd != nil && !exited(s.done) {
		s.mu.Unlock()
		return nil
	}
	p := func(i int) string { return strconv.Itoa(s.ports[i]) }
	args := []string{"mini", "-dir=" + s.Dir, "-ip=" + s.IP, "-ip.bind=" + s.IP,
		"-master.port=" + p(0), "-master.port.grpc=" + p(1),
		"-volume.port=" + p(2), "-volume.port.grpc=" + p(3),
		"-filer.port=" + p(4), "-filer.port.grpc=" + p(5),
		"-s3.port=" + p(6), "-s3.port.grpc=" + p(7),
		"-admin.port=" + p(8), "-admin.ui=false", "-admin.port.legacy=0",
		"-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
		"-master.telemetry=false", "-bucket=" + s.Bucket,
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		s.mu.Unlock()
		return err
	}
	logf, err := os.OpenFile(filepath.Join(s.Dir, "weed.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	cmd := exec.Command(s.Bin, args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), s.Env()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		s.mu.Unlock()
		return fmt.Errorf("start %s: %w", s.Bin, err)
	}
	logf.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()

	mc, err := s.Client()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(d)
	var last error
	for time.Now().Before(deadline) {
		if exited(done) {
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
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// Running reports whether the server process is up.
func (s *Store) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil && !exited(s.done)
}

// freePorts finds n distinct free ports on ip.
func freePorts(ip string, n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for len(out) < n {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
