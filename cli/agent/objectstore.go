package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/exec"
	"github.com/foreman-sched/foreman/httpapi"
	"github.com/foreman-sched/foreman/objstore"
	"github.com/foreman-sched/foreman/sched"
)

// The object store (issue 25): flags, and the check an agent makes at
// start. Credentials are never flags: objstore finds them as the AWS SDKs
// do (environment, shared credentials file, instance role).

func objectStoreFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "object-store", EnvVars: []string{"FOREMAN_OBJECT_STORE"}, Usage: "s3://BUCKET[/PREFIX]: upload finished attempts' artifacts and logs there so they outlive this node (credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, the AWS credentials file with AWS_PROFILE, or the instance role). Unset: they stay on this node only"},
		&ucli.StringFlag{Name: "object-store-endpoint", EnvVars: []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}, Usage: "the store's host[:port] or http(s)://host[:port] (default: AWS S3)"},
		&ucli.StringFlag{Name: "object-store-region", EnvVars: []string{"AWS_REGION", "AWS_DEFAULT_REGION"}, Usage: "the bucket's region"},
		&ucli.BoolFlag{Name: "object-store-path-style", Usage: "address the bucket as ENDPOINT/BUCKET (MinIO, Ceph RGW, SeaweedFS) instead of BUCKET.ENDPOINT"},
		&ucli.StringFlag{Name: "object-store-ca", Usage: "PEM CA bundle to trust for the store's TLS certificate (besides the system's)"},
		&ucli.IntFlag{Name: "object-store-uploads", Value: exec.DefaultUploadConcurrency, Usage: "files this node uploads at once"},
		&ucli.DurationFlag{Name: "object-store-retry", Value: exec.DefaultUploadRetryFor, Usage: "how long an upload is retried (with backoff) before its files are reported not stored"},
		&ucli.StringFlag{Name: "input-max", Value: "10GiB", Usage: "largest job input (inputs:) this node fetches"},
		&ucli.StringFlag{Name: "input-cache-max", Value: "10GiB", Usage: "this node's cache of job inputs by checksum (the least recently used are evicted)"},
		&ucli.DurationFlag{Name: "input-timeout", Value: exec.DefaultInputFetchTimeout, Usage: "how long fetching one job input may take"},
	}
}

// inputConfig reads the job inputs' bounds.
func inputConfig(c *ucli.Context, w *exec.WorkerConfig) error {
	if err := sizeFlags(c, sizeFlag{"input-max", &w.InputMaxBytes}, sizeFlag{"input-cache-max", &w.InputCacheMaxBytes}); err != nil {
		return err
	}
	if w.InputFetchTimeout = c.Duration("input-timeout"); w.InputFetchTimeout <= 0 {
		return errors.New("--input-timeout: must be more than 0")
	}
	return nil
}

// objectStoreConfig reads the flags; nil when no store is configured.
func objectStoreConfig(c *ucli.Context, w *exec.WorkerConfig) (*objstore.Config, error) {
	if c.String("object-store") == "" {
		for _, f := range []string{"object-store-path-style", "object-store-ca"} {
			if c.IsSet(f) {
				return nil, fmt.Errorf("--%s needs --object-store", f)
			}
		}
		return nil, nil
	}
	cfg := &objstore.Config{
		URL:       c.String("object-store"),
		Endpoint:  c.String("object-store-endpoint"),
		Region:    c.String("object-store-region"),
		PathStyle: c.Bool("object-store-path-style"),
		CAFile:    c.String("object-store-ca"),
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if w.UploadConcurrency = c.Int("object-store-uploads"); w.UploadConcurrency < 1 {
		return nil, errors.New("--object-store-uploads: must be 1 or more")
	}
	if w.UploadRetryFor = c.Duration("object-store-retry"); w.UploadRetryFor <= 0 {
		return nil, errors.New("--object-store-retry: must be more than 0")
	}
	return cfg, nil
}

// objectStoreCheckTimeout bounds the start-up check of the store.
const objectStoreCheckTimeout = 30 * time.Second

// openObjectStore builds the store and checks, once, that the bucket
// exists and the credentials are accepted: an agent with a store it
// cannot use refuses to start, saying why, instead of failing every
// upload later. A store it cannot reach (down, timing out) is not a
// misconfiguration: the agent starts with a warning, its uploads retry and
// wait for the store (a node restarted during a store outage must come
// back and resume its pending uploads; jepsen's store-down-kill found it
// refusing to start). nil, nil without a store.
func openObjectStore(ctx context.Context, cfg *objstore.Config, log *slog.Logger) (*objstore.Store, error) {
	if cfg == nil {
		return nil, nil
	}
	s, err := objstore.New(*cfg)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, objectStoreCheckTimeout)
	defer cancel()
	if err := s.Check(cctx); err != nil {
		if errors.Is(err, objstore.ErrNoBucket) || errors.Is(err, objstore.ErrAccess) {
			return nil, fmt.Errorf("object store %s: %w", s.Location(), err)
		}
		log.Warn("object store cannot be reached at start; uploads will retry", "component", "agent",
			"location", s.Location(), "endpoint", s.Endpoint(), "err", err)
		return s, nil
	}
	log.Info("object store", "component", "agent", "location", s.Location(), "endpoint", s.Endpoint())
	return s, nil
}

// outputStore is the worker's view of the store (nil stays a nil
// interface, so the worker sees "no store").
func outputStore(s *objstore.Store) exec.OutputStore {
	if s == nil {
		return nil
	}
	return s
}

// objectReader is the API's view of the store (nil stays a nil interface).
func objectReader(s *objstore.Store) httpapi.Objects {
	if s == nil {
		return nil
	}
	return s
}

// storeDeleter is the scheduler's view of the store (its GC deletes the
// outputs of the jobs it drops).
func storeDeleter(s *objstore.Store) sched.OutputStore {
	if s == nil {
		return nil
	}
	return s
}
