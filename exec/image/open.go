package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// refNameAnnotation tags an image inside an OCI layout's index.json.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// open returns the (lazy) image for r without extracting anything.
func (s *Store) open(ctx context.Context, r Reference) (v1.Image, error) {
	switch r.Kind {
	case KindRegistry:
		img, err := remote.Image(r.Registry, s.remoteOptions(ctx)...)
		if err != nil {
			return nil, registryError(r, err)
		}
		return img, nil
	case KindOCILayout:
		return s.openLayout(r)
	case KindDockerArchive:
		if _, err := os.Stat(r.Path); err != nil {
			return nil, fmt.Errorf("image %q: %w: %v", r, ErrNotFound, err)
		}
		var tag *name.Tag
		if r.Tag != "" {
			t, err := name.NewTag(r.Tag)
			if err != nil {
				return nil, fmt.Errorf("%w: %q: tag: %v", ErrBadReference, r, err)
			}
			tag = &t
		}
		img, err := tarball.ImageFromPath(r.Path, tag)
		if err != nil {
			return nil, fmt.Errorf("image %q: %w: %v", r, ErrPull, err)
		}
		return img, nil
	}
	return nil, fmt.Errorf("%w: unknown kind %q", ErrBadReference, r.Kind)
}

func registryError(r Reference, err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) && (terr.StatusCode == http.StatusNotFound || hasCode(terr, transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode)) {
		return fmt.Errorf("image %q: %w", r, ErrNotFound)
	}
	return fmt.Errorf("image %q: %w: %v", r, ErrPull, err)
}

func hasCode(terr *transport.Error, codes ...transport.ErrorCode) bool {
	for _, d := range terr.Errors {
		for _, c := range codes {
			if d.Code == c {
				return true
			}
		}
	}
	return false
}

func (s *Store) openLayout(r Reference) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(r.Path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("image %q: %w", r, ErrNotFound)
		}
		return nil, fmt.Errorf("image %q: %w: %v", r, ErrPull, err)
	}
	return s.pick(r, idx, r.Tag)
}

// pick selects the image named tag (or the only one) from an index,
// descending into nested indexes by platform.
func (s *Store) pick(r Reference, idx v1.ImageIndex, tag string) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("image %q: %w: %v", r, ErrPull, err)
	}
	var cands []v1.Descriptor
	for _, d := range im.Manifests {
		if tag != "" && d.Annotations[refNameAnnotation] != tag {
			continue
		}
		if tag == "" && d.Platform != nil && (d.Platform.OS != s.cfg.OS || d.Platform.Architecture != s.cfg.Arch) {
			continue
		}
		cands = append(cands, d)
	}
	switch {
	case len(cands) == 0 && tag != "":
		return nil, fmt.Errorf("image %q: %w: no manifest tagged %q", r, ErrNotFound, tag)
	case len(cands) == 0:
		return nil, fmt.Errorf("image %q: %w: no manifest for %s/%s", r, ErrNotFound, s.cfg.OS, s.cfg.Arch)
	case len(cands) > 1:
		return nil, fmt.Errorf("%w: %q holds %d images; add :tag", ErrBadReference, r.String(), len(cands))
	}
	d := cands[0]
	if d.MediaType.IsIndex() {
		child, err := idx.ImageIndex(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("image %q: %w: %v", r, ErrPull, err)
		}
		return s.pick(r, child, "")
	}
	img, err := idx.Image(d.Digest)
	if err != nil {
		return nil, fmt.Errorf("image %q: %w: %v", r, ErrPull, err)
	}
	return img, nil
}
