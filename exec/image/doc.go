// Package image resolves a job's image reference to a read-only root
// filesystem on the host, using go-containerregistry (no Docker).
//
// A reference is one of:
//
//	127.0.0.1:5000/x:tag, docker.io/library/busybox   registry (plain HTTP for loopback/RFC1918)
//	oci-layout:/path/to/dir[:tag]                      an OCI image layout directory
//	docker-archive:/path/to/file.tar                   a `docker save` tarball
//
// Images are cached by manifest digest under <cache>/<algo>-<hex>/ with a
// rootfs/ tree and a config.json. Each digest is extracted once: a per-digest
// flock serialises concurrent pullers (possibly in different supervisor
// processes) and the tree is built in a temp dir that is renamed into place.
//
// Extraction flattens the layers with mutate.Extract (whiteouts applied)
// and writes the result through an os.Root, so no entry can write outside
// the rootfs, whether by `..`, an absolute path, a symlink or a hardlink.
// Device nodes and fifos are skipped; setuid and
// setgid bits are dropped (jobs run with no_new_privs anyway, so they would
// be useless; dropping them keeps the cache inert on the host).
// After extraction the store pre-creates the container's mountpoints
// (Config.MountDirs/MountFiles) so the container runtime never has to
// modify a shared image tree.
package image
