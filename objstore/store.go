package objstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Sentinel errors of the store.
var (
	// ErrNoSuchObject: the key names no object (never stored, or deleted).
	ErrNoSuchObject = errors.New("no such object in the store")
	// ErrNoBucket: the configured bucket does not exist.
	ErrNoBucket = errors.New("bucket does not exist")
	// ErrAccess: the credentials were refused (missing, wrong, or without
	// the right to the bucket).
	ErrAccess = errors.New("access to the object store refused")
)

// Store is one bucket (and key prefix) of an S3-compatible store. Safe
// for concurrent use.
type Store struct {
	loc      Location
	endpoint string
	c        *minio.Client
	partSize uint64
}

// New builds a Store from cfg. It does not contact the store: Check does.
func New(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	loc, _ := ParseURL(cfg.URL)
	host, secure, _ := endpoint(cfg.Endpoint)
	tr, err := transport(cfg.CAFile)
	if err != nil {
		return nil, err
	}
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	// The AWS SDKs' order: environment, shared credentials file (with
	// AWS_PROFILE), then the instance role.
	creds := credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.FileAWSCredentials{},
		&credentials.IAM{Client: &http.Client{Transport: http.DefaultTransport, Timeout: 5 * time.Second}},
	})
	c, err := minio.New(host, &minio.Options{
		Creds: creds, Secure: secure, Region: cfg.Region, BucketLookup: lookup, Transport: tr,
		// Retries are ours (upload.go in exec): minio-go's own would hide
		// a store that is down behind minutes of silent attempts.
		MaxRetries: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	ps := cfg.PartSize
	if ps == 0 {
		ps = DefaultPartSize
	}
	scheme := "https://"
	if !secure {
		scheme = "http://"
	}
	return &Store{loc: loc, endpoint: scheme + host, c: c, partSize: uint64(ps)}, nil
}

func transport(caFile string) (http.RoundTripper, error) {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: time.Minute,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("%w: --object-store-ca: %v", ErrBadConfig, err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: --object-store-ca %s: no PEM certificate in it", ErrBadConfig, caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return tr, nil
}

// Location is where objects go: s3://bucket/prefix.
func (s *Store) Location() string { return s.loc.String() }

// Endpoint is the store's URL (scheme and host).
func (s *Store) Endpoint() string { return s.endpoint }

// Key is the bucket key of rel: the prefix joined with rel.
func (s *Store) Key(rel string) string {
	if s.loc.Prefix == "" {
		return rel
	}
	return path.Join(s.loc.Prefix, rel)
}

// Check contacts the store and says, in one line, why it cannot be used:
// no credentials, refused credentials, or a bucket that does not exist.
// An agent calls it once at start.
func (s *Store) Check(ctx context.Context) error {
	ok, err := s.c.BucketExists(ctx, s.loc.Bucket)
	if err != nil {
		return s.wrap(err, "")
	}
	if !ok {
		return fmt.Errorf("%w: %s at %s (create it first; foreman never creates buckets)", ErrNoBucket, s.loc.Bucket, s.endpoint)
	}
	return nil
}

// Put stores size bytes from r under key (a full key: Key's output). A
// file larger than the part size goes as a multipart upload.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	_, err := s.c.PutObject(ctx, s.loc.Bucket, key, r, size, minio.PutObjectOptions{
		PartSize:    s.partSize,
		NumThreads:  2,
		ContentType: "application/octet-stream",
	})
	return s.wrap(err, key)
}

// Open opens the object key for reading and says its size.
// ErrNoSuchObject when there is none.
func (s *Store) Open(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	o, err := s.c.GetObject(ctx, s.loc.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, 0, s.wrap(err, key)
	}
	st, err := o.Stat() // GetObject is lazy: this is the request
	if err != nil {
		o.Close()
		return nil, 0, s.wrap(err, key)
	}
	return o, st.Size, nil
}

// OpenObject opens key of any bucket this store's endpoint and
// credentials can read (a job's s3:// input).
func (s *Store) OpenObject(ctx context.Context, bucket, key string) (io.ReadCloser, int64, error) {
	o, err := s.c.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err == nil {
		var st minio.ObjectInfo
		if st, err = o.Stat(); err == nil {
			return o, st.Size, nil
		}
		o.Close()
	}
	if minio.ToErrorResponse(err).Code == "NoSuchKey" {
		return nil, 0, fmt.Errorf("%w: s3://%s/%s", ErrNoSuchObject, bucket, key)
	}
	if minio.ToErrorResponse(err).Code == "NoSuchBucket" {
		return nil, 0, fmt.Errorf("%w: %s at %s", ErrNoBucket, bucket, s.endpoint)
	}
	return nil, 0, fmt.Errorf("s3://%s/%s at %s: %w", bucket, key, s.endpoint, err)
}

// Delete removes the objects (missing ones are not an error).
func (s *Store) Delete(ctx context.Context, keys []string) error {
	ch := make(chan minio.ObjectInfo, len(keys))
	for _, k := range keys {
		ch <- minio.ObjectInfo{Key: k}
	}
	close(ch)
	for e := range s.c.RemoveObjects(ctx, s.loc.Bucket, ch, minio.RemoveObjectsOptions{}) {
		if e.Err != nil && minio.ToErrorResponse(e.Err).Code != "NoSuchKey" {
			return s.wrap(e.Err, e.ObjectName)
		}
	}
	return nil
}

// wrap maps the store's answers onto the sentinels, naming the store
// and never the credentials.
func (s *Store) wrap(err error, key string) error {
	if err == nil {
		return nil
	}
	what := s.loc.String()
	if key != "" {
		what = "s3://" + s.loc.Bucket + "/" + key
	}
	switch code := minio.ToErrorResponse(err).Code; code {
	case "NoSuchKey":
		return fmt.Errorf("%w: %s", ErrNoSuchObject, what)
	case "NoSuchBucket":
		return fmt.Errorf("%w: %s at %s", ErrNoBucket, s.loc.Bucket, s.endpoint)
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken":
		// No credentials at all go anonymous and end here too.
		return fmt.Errorf("%w: %s at %s: %s (check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, the credentials file or the instance role)", ErrAccess, what, s.endpoint, code)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s at %s: %w", what, s.endpoint, err)
	}
	return fmt.Errorf("%s at %s: %v", what, s.endpoint, err)
}
