// Package objstore is foreman's client of an S3-compatible object store
// (issue 25): where attempts' artifacts and logs go so that they outlive
// the node that ran them. It wraps github.com/minio/minio-go/v7 (see
// docs/objectstore.md for why that library) behind a small Store type;
// exec and httpapi declare the few methods they need as interfaces and
// cli/agent hands them a *Store, so neither imports this package.
package objstore
