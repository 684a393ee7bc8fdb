package image

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Source kinds of a Reference.
const (
	KindRegistry      = "registry"
	KindOCILayout     = "oci-layout"
	KindDockerArchive = "docker-archive"
)

// Reference is a parsed image reference.
type Reference struct {
	Kind string
	// Registry is set for KindRegistry.
	Registry name.Reference
	// Path is the layout directory or archive file for local kinds.
	Path string
	// Tag selects an image inside a layout (org.opencontainers.image.ref.name)
	// or an archive (repo:tag); empty means the only image.
	Tag string
}

func (r Reference) String() string {
	switch r.Kind {
	case KindRegistry:
		return r.Registry.String()
	case KindOCILayout, KindDockerArchive:
		if r.Tag != "" {
			return r.Kind + ":" + r.Path + ":" + r.Tag
		}
		return r.Kind + ":" + r.Path
	}
	return ""
}

// ParseReference parses the forms listed in the package documentation.
func ParseReference(s string) (Reference, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Reference{}, fmt.Errorf("%w: empty", ErrBadReference)
	}
	for _, kind := range []string{KindOCILayout, KindDockerArchive} {
		rest, ok := strings.CutPrefix(s, kind+":")
		if !ok {
			continue
		}
		path, tag := splitPathTag(rest)
		if !filepath.IsAbs(path) {
			return Reference{}, fmt.Errorf("%w: %q: %s needs an absolute path", ErrBadReference, s, kind)
		}
		return Reference{Kind: kind, Path: filepath.Clean(path), Tag: tag}, nil
	}
	ref, err := name.ParseReference(s)
	if err != nil {
		return Reference{}, fmt.Errorf("%w: %q: %v", ErrBadReference, s, err)
	}
	return Reference{Kind: KindRegistry, Registry: ref}, nil
}

// splitPathTag splits "/dir:tag" or "/file.tar:repo:tag" at the first colon
// whose prefix exists, so paths with colons in their names still work.
func splitPathTag(s string) (path, tag string) {
	if _, err := os.Stat(s); err == nil {
		return s, ""
	}
	for i := 0; i < len(s); i++ {
		if s[i] != ':' {
			continue
		}
		if _, err := os.Stat(s[:i]); err == nil {
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}
