package fsm

import (
	"fmt"
	"net/url"
	"path"
	"strings"
)

// Job inputs (issue 25): files fetched from HTTP(S) or an S3-compatible
// store into the job's working directory before it starts (Nomad's
// `artifact` block). The spec names them; the executing node fetches,
// checks and caches them (exec/inputs.go).

// MaxInputs is how many inputs one job may list.
const MaxInputs = 64

// InputSource is one file a job needs before it starts.
type InputSource struct {
	// Source is http(s)://… or s3://bucket/key (read with the agent's
	// object store endpoint and credentials).
	Source string `json:"source"`
	// Dest is where it goes, relative to the job's working directory; ""
	// or a path ending in "/" puts it there under the source's base name.
	Dest string `json:"dest,omitempty"`
	// Checksum is sha256:<64 hex digits>: the fetched bytes must match,
	// and a node caches the file under it.
	Checksum string `json:"checksum,omitempty"`
}

// ValidateInput says which field of in is wrong and why ("source",
// "dest", "checksum"), or "", nil.
func ValidateInput(in InputSource) (string, error) {
	u, err := url.Parse(in.Source)
	switch {
	case in.Source == "":
		return "source", fmt.Errorf("is required")
	case len(in.Source) > 2048:
		return "source", fmt.Errorf("is %d bytes (max 2048)", len(in.Source))
	case err != nil:
		return "source", fmt.Errorf("%q is not a URL: %v", in.Source, err)
	case u.User != nil:
		return "source", fmt.Errorf("credentials do not go in the URL (it is stored and shown); s3:// uses the agents' store credentials")
	case u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "s3":
		return "source", fmt.Errorf("%q: want http://, https:// or s3://bucket/key", in.Source)
	case u.Host == "":
		return "source", fmt.Errorf("%q has no host (or bucket)", in.Source)
	case u.Scheme == "s3" && strings.Trim(u.Path, "/") == "":
		return "source", fmt.Errorf("%q names no object (want s3://bucket/key)", in.Source)
	}
	if base := path.Base(u.Path); (in.Dest == "" || strings.HasSuffix(in.Dest, "/")) && (base == "/" || base == "." || base == "..") {
		return "dest", fmt.Errorf("is required: %q ends in no file name", in.Source)
	}
	if d := strings.TrimSuffix(in.Dest, "/"); d != "" {
		if err := ValidArtifactPath(d); err != nil {
			return "dest", fmt.Errorf("must be a clean relative path in the job's directory: %v", err)
		}
	}
	if c := in.Checksum; c != "" {
		hex, ok := strings.CutPrefix(c, "sha256:")
		if !ok || len(hex) != 64 || strings.Trim(strings.ToLower(hex), "0123456789abcdef") != "" {
			return "checksum", fmt.Errorf("%q: want sha256:<64 hex digits>", c)
		}
	}
	return "", nil
}

// InputDest is the relative path (slash-separated) in.Source is written
// to in the job's working directory.
func InputDest(in InputSource) string {
	if in.Dest != "" && !strings.HasSuffix(in.Dest, "/") {
		return in.Dest
	}
	u, _ := url.Parse(in.Source)
	return path.Join(strings.TrimSuffix(in.Dest, "/"), path.Base(u.Path))
}
