package objstore

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Config says which store to use and how to reach it. Credentials are
// not part of it: they come from the environment as the AWS SDKs find
// them (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN, then
// the shared credentials file with AWS_PROFILE, then the instance role),
// so they never appear in flags, the API or the state machine.
type Config struct {
	// URL is s3://bucket[/prefix]: every object key starts with prefix/.
	URL string
	// Endpoint is the store's address: host[:port] (HTTPS) or an http://
	// or https:// URL. Empty: AWS S3 (s3.amazonaws.com).
	Endpoint string
	// Region of the bucket ("": the store's default, us-east-1 for AWS).
	Region string
	// PathStyle addresses the bucket as endpoint/bucket instead of
	// bucket.endpoint (MinIO, Ceph RGW, SeaweedFS and most self-hosted
	// stores need it).
	PathStyle bool
	// CAFile is a PEM bundle to trust for the endpoint's TLS certificate
	// in addition to the system roots.
	CAFile string
	// PartSize is the size of a multipart upload's parts; files larger
	// than it are uploaded in parts (0: DefaultPartSize).
	PartSize int64
}

// DefaultPartSize is the multipart part size: files above it go in parts
// (S3 allows 10,000 parts of 5 MiB to 5 GiB).
const DefaultPartSize = 16 << 20

// ErrBadConfig is a configuration the store cannot be used with.
var ErrBadConfig = errors.New("object store")

// Location is a parsed s3://bucket/prefix.
type Location struct {
	Bucket string
	Prefix string // without leading or trailing '/'; "" for the bucket's root
}

// String is the location as the user wrote it (no credentials in it).
func (l Location) String() string {
	if l.Prefix == "" {
		return "s3://" + l.Bucket
	}
	return "s3://" + l.Bucket + "/" + l.Prefix
}

// ParseURL reads s3://bucket[/prefix].
func ParseURL(s string) (Location, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Location{}, fmt.Errorf("%w: --object-store %q: %v", ErrBadConfig, s, err)
	}
	if u.Scheme != "s3" {
		return Location{}, fmt.Errorf("%w: --object-store %q: want s3://bucket/prefix", ErrBadConfig, s)
	}
	if u.User != nil {
		return Location{}, fmt.Errorf("%w: --object-store: credentials do not go in the URL (use AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)", ErrBadConfig)
	}
	if u.Host == "" {
		return Location{}, fmt.Errorf("%w: --object-store %q: no bucket", ErrBadConfig, s)
	}
	prefix := strings.Trim(u.Path, "/")
	for _, el := range strings.Split(prefix, "/") {
		if el == "." || el == ".." {
			return Location{}, fmt.Errorf("%w: --object-store %q: the prefix may not hold . or .. elements", ErrBadConfig, s)
		}
	}
	return Location{Bucket: u.Host, Prefix: prefix}, nil
}

// Validate checks the configuration without contacting the store.
func (c Config) Validate() error {
	if _, err := ParseURL(c.URL); err != nil {
		return err
	}
	if _, _, err := endpoint(c.Endpoint); err != nil {
		return err
	}
	if c.PartSize != 0 && (c.PartSize < 5<<20 || c.PartSize > 5<<30) {
		return fmt.Errorf("%w: part size %d: must be between 5 MiB and 5 GiB", ErrBadConfig, c.PartSize)
	}
	return nil
}

// endpoint splits an endpoint into host[:port] and whether it uses TLS.
func endpoint(e string) (host string, secure bool, err error) {
	switch {
	case e == "":
		return "s3.amazonaws.com", true, nil
	case strings.Contains(e, "://"):
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return "", false, fmt.Errorf("%w: --object-store-endpoint %q: want host[:port] or http(s)://host[:port]", ErrBadConfig, e)
		}
		return u.Host, u.Scheme == "https", nil
	case strings.ContainsAny(e, "/?#@"):
		return "", false, fmt.Errorf("%w: --object-store-endpoint %q: want host[:port] or http(s)://host[:port]", ErrBadConfig, e)
	}
	return e, true, nil
}
