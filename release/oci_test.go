package release

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// checkOCI reads the layout in dir as a registry client would: one index
// tagged version, one image per architecture with the agent's entrypoint,
// and this host's image's binary runs and prints version.
func checkOCI(t *testing.T, dir, version string) {
	t.Helper()
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil || len(tm.Manifests) != 1 {
		t.Fatalf("index.json: %v %+v", err, tm)
	}
	multi, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	mm, err := multi.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var arches []string
	for _, d := range mm.Manifests {
		if d.Platform == nil || d.Platform.OS != "linux" {
			t.Fatalf("manifest %s: platform %+v", d.Digest, d.Platform)
		}
		arches = append(arches, d.Platform.Architecture)
		img, err := multi.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Architecture != d.Platform.Architecture || strings.Join(cfg.Config.Entrypoint, " ") != "/usr/bin/foreman" ||
			cfg.Config.Labels["org.opencontainers.image.version"] != version || cfg.Created.IsZero() {
			t.Errorf("%s image config: %+v", d.Platform.Architecture, cfg)
		}
		if d.Platform.Architecture != runtime.GOARCH {
			continue
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("layers: %v %d", err, len(layers))
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		bin := extract(t, rc, "usr/bin/foreman")
		rc.Close()
		path := filepath.Join(t.TempDir(), "foreman")
		if err := os.WriteFile(path, bin, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(path, "version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "foreman "+version+"\n") {
			t.Errorf("the image's binary: %v %q", err, out)
		}
	}
	if strings.Join(arches, ",") != "amd64,arm64" {
		t.Errorf("image platforms %v, want amd64 and arm64", arches)
	}
}

func extract(t *testing.T, r io.Reader, name string) []byte {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("layer has no %s: %v", name, err)
		}
		if h.Name == name {
			var buf bytes.Buffer
			if _, err := io.Copy(&buf, tr); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes()
		}
	}
}
