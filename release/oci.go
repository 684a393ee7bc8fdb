package release

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The agent's image: the static binary alone, with the passwd and group
// files that user lookups (osusergo) and the job user nobody need, /tmp,
// and the data dir as a volume. There is no shell: process jobs run
// what the image holds, so real deployments run container jobs (the agent
// needs --privileged for them) or build on this image.
const (
	imageBinary  = "usr/bin/foreman"
	imageDataDir = "/var/lib/foreman"
	imagePasswd  = "root:x:0:0:root:/root:/sbin/nologin\nforeman:x:999:999:foreman agent:/var/lib/foreman:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"
	imageGroup   = "root:x:0:\nforeman:x:999:\nnogroup:x:65534:\n"
)

// imageConfig is the agent's run configuration for one architecture.
func imageConfig(arch, version, commit string, created time.Time) *v1.ConfigFile {
	return &v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			Entrypoint: []string{"/" + imageBinary},
			Cmd:        []string{"agent", "--data-dir", imageDataDir, "--bind", "0.0.0.0"},
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			ExposedPorts: map[string]struct{}{
				"7070/tcp": {}, "7071/tcp": {}, "7072/tcp": {}, "7072/udp": {},
			},
			Volumes: map[string]struct{}{imageDataDir: {}},
			Labels: map[string]string{
				"org.opencontainers.image.title":    "foreman",
				"org.opencontainers.image.version":  version,
				"org.opencontainers.image.revision": commit,
				"org.opencontainers.image.source":   debHomepage,
			},
		},
	}
}

// agentImage is one architecture's image: one layer, OCI media types.
func agentImage(arch, version, commit string, binary []byte, created time.Time) (v1.Image, error) {
	rootfs, err := tarGz([]file{
		{name: imageBinary, mode: 0o755, data: binary},
		{name: "etc/passwd", mode: 0o644, data: []byte(imagePasswd)},
		{name: "etc/group", mode: 0o644, data: []byte(imageGroup)},
		{name: "tmp", mode: 0o1777, dir: true},
		{name: imageDataDir[1:], mode: 0o700, dir: true},
	}, tarOptions{mtime: created})
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(rootfs)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.ConfigFile(base, imageConfig(arch, version, commit, created))
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "foreman release " + version},
	})
}

// ociLayout returns an OCI image layout, as a tar, holding one image index
// (one image per architecture) tagged version (its ref.name annotation):
// `skopeo copy oci-archive:FILE:VERSION docker://…` or `podman load`.
func ociLayout(version, commit string, binaries map[string][]byte, arches []string, created time.Time, scratch string) ([]byte, error) {
	var adds []mutate.IndexAddendum
	for _, arch := range arches {
		img, err := agentImage(arch, version, commit, binaries[arch], created)
		if err != nil {
			return nil, fmt.Errorf("image linux/%s: %w", arch, err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: arch},
		}})
	}
	multi := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	top := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{
		Add: multi,
		Descriptor: v1.Descriptor{Annotations: map[string]string{
			"org.opencontainers.image.ref.name": version,
		}},
	})
	dir := filepath.Join(scratch, "oci")
	if _, err := layout.Write(dir, top); err != nil {
		return nil, fmt.Errorf("write OCI layout: %w", err)
	}
	// layout.Write's files carry the time and modes of this machine: tar
	// them with fixed ones.
	var files []file
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files = append(files, file{name: filepath.ToSlash(rel), mode: 0o644, data: b})
		return nil
	})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := writeTar(&buf, files, tarOptions{mtime: created}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
