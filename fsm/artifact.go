package fsm

import (
	"fmt"
	"path"
	"strings"
)

// Artifacts (issue 15): files a job writes under /foreman/artifacts
// ($FOREMAN_ARTIFACTS for the process driver). The bytes stay on the node
// that ran the attempt (never in raft, DESIGN.md "Data flow"); the list
// of them (path and size) travels with the finish report into the
// attempt record, so any node can list them, knows which node holds them,
// and a child's node can fetch them for its inputs.

// Bounds of the list kept in raft.
const (
	ArtifactsMaxFiles   = 1000 // files listed per attempt (the rest are dropped, with a warning)
	ArtifactPathMaxLen  = 512  // bytes of one relative path
	ArtifactsListMaxLen = 64 << 10
)

// Artifact is one file an attempt left in its artifacts directory.
type Artifact struct {
	Path string `json:"path"` // relative, slash-separated, clean (ValidArtifactPath)
	Size int64  `json:"size"`
}

// ValidArtifactPath says why p is not a relative, clean path inside the
// artifacts directory ("", ".", absolute, "..", empty or dot elements,
// backslashes and NUL are refused), or nil.
func ValidArtifactPath(p string) error {
	switch {
	case p == "" || p == ".":
		return fmt.Errorf("empty path")
	case len(p) > ArtifactPathMaxLen:
		return fmt.Errorf("path is %d bytes (max %d)", len(p), ArtifactPathMaxLen)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is absolute (want one relative to the artifacts directory)", p)
	case strings.ContainsAny(p, "\\\x00"):
		return fmt.Errorf("path %q holds a backslash or NUL", p)
	case path.Clean(p) != p:
		return fmt.Errorf("path %q is not clean (no empty, '.' or '..' elements, no trailing '/')", p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return fmt.Errorf("path %q escapes the artifacts directory", p)
		}
	}
	return nil
}

// sanitizeArtifacts keeps the valid, distinct entries of a report's list
// within the bounds, and says what it dropped. Apply must never fail a
// finish report over its artifact list (the attempt's outcome matters
// more), so a bad entry is dropped, not refused.
func sanitizeArtifacts(in []Artifact) ([]Artifact, string) {
	if len(in) == 0 {
		return nil, ""
	}
	out := make([]Artifact, 0, min(len(in), ArtifactsMaxFiles))
	seen := make(map[string]bool, len(in))
	dropped, bytes := 0, 0
	for _, a := range in {
		if ValidArtifactPath(a.Path) != nil || a.Size < 0 || seen[a.Path] ||
			len(out) >= ArtifactsMaxFiles || bytes+len(a.Path)+16 > ArtifactsListMaxLen {
			dropped++
			continue
		}
		seen[a.Path] = true
		bytes += len(a.Path) + 16
		out = append(out, a)
	}
	if dropped > 0 {
		return out, fmt.Sprintf("%d artifact entries not listed (invalid, duplicate or over %d files)", dropped, ArtifactsMaxFiles)
	}
	return out, ""
}

// truncateString cuts s to at most n bytes (a warning from an executor
// must not grow a record without bound).
func truncateString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
