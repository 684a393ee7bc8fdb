// Package release builds foreman's release artifacts from a checkout:
// static binaries for linux/amd64 and linux/arm64 (cgo, cross-compiled
// with Debian's cross gcc), tarballs, Debian packages, an OCI image layout
// tarball of the agent and SHA256SUMS over them (`make release
// VERSION=vX.Y.Z`, which runs ./release/cmd/release).
//
// Every artifact is a function of the commit and the toolchain: times come
// from SOURCE_DATE_EPOCH (the commit's time unless set), tar entries are
// sorted with fixed owners and modes, gzip headers carry no time or name,
// and the binaries are built with -trimpath and an empty build ID. Building
// twice gives the same bytes (release_test.go checks it).
//
// It imports no foreman package: it drives the go toolchain like a user
// would, so it is below nothing and above nothing (arch_test.go).
package release
