package release

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrVersion means the release version is missing or not semantic
// versioning with a leading v (v1.2.3, v1.2.3-rc.1, v1.2.3+build.5).
var ErrVersion = errors.New("release version")

// semver is semver.org's grammar with the leading v foreman's tags use.
var semver = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// CheckVersion returns nil for a semver tag such as v0.1.0.
func CheckVersion(v string) error {
	if v == "" {
		return fmt.Errorf("%w: missing: make release VERSION=vX.Y.Z", ErrVersion)
	}
	if !semver.MatchString(v) {
		return fmt.Errorf("%w: %q is not semantic versioning with a leading v (vX.Y.Z, vX.Y.Z-rc.1)", ErrVersion, v)
	}
	return nil
}

// debVersion is v as a Debian version: no leading v, and a pre-release
// sorts before its release (1.2.0~rc.1 < 1.2.0), as semver orders them.
// A Debian version without a revision may hold no hyphen, so the
// pre-release's own hyphens become dots.
func debVersion(v string) string {
	v = strings.TrimPrefix(v, "v")
	core, build, hasBuild := strings.Cut(v, "+")
	if main, pre, ok := strings.Cut(core, "-"); ok {
		core = main + "~" + strings.ReplaceAll(pre, "-", ".")
	}
	if hasBuild {
		core += "+" + strings.ReplaceAll(build, "-", ".")
	}
	return core
}
