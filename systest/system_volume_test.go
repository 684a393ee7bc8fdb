package systest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Host volumes on real agents: an agent declares --host-volume, the node
// record shows it, a process job finds it in $FOREMAN_VOLUME_<NAME>, a
// container job reads it at its destination and cannot write to it
// read-only, and a job asking a volume no node declares is refused.
func TestSystemHostVolumes(t *testing.T) {
	if testing.Short() {
		t.Skip("system test: skipped in -short mode")
	}
	bin := foremanBin(t)
	vol := t.TempDir()
	if err := os.Chmod(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "in.txt"), []byte("dataset-line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newSysCluster(t, 1, "--host-volume", "datasets="+vol+":ro")
	a := c.leader()
	var node struct {
		Volumes []struct {
			Name, Path string
			ReadOnly   bool `json:"read_only"`
		} `json:"volumes"`
		Drivers []string `json:"drivers"`
	}
	if err := getJSON(a.url("/v1/nodes/"+a.name), &node); err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(vol)
	if len(node.Volumes) != 1 || node.Volumes[0].Name != "datasets" || node.Volumes[0].Path != real || !node.Volumes[0].ReadOnly {
		t.Fatalf("node record volumes %+v, want datasets=%s read-only", node.Volumes, real)
	}
	cli := cliAt(t, bin, a.url(""))

	if out, err := cli("node", "show", a.name); err != nil || !strings.Contains(out, "Volumes:     datasets="+real+" (ro)") {
		t.Errorf("node show: %v\n%s\nwant the volume", err, out)
	}

	t.Run("process", func(t *testing.T) {
		out, err := cli("run", "--driver", "process", "--volume", "datasets:/data", "--", "sh", "-c", `cat "$FOREMAN_VOLUME_DATASETS/in.txt"`)
		if err != nil || !strings.Contains(out, "dataset-line") {
			t.Fatalf("foreman run with the volume: %v: %q", err, out)
		}
	})

	t.Run("container", func(t *testing.T) {
		requireCapability(t, slices.Contains(node.Drivers, "container"), "the container driver (root + cgroups)")
		out, err := cli("run", "--driver", "container", "--volume", "datasets:/data", "--", "sh", "-c",
			`cat /data/in.txt; echo "at $FOREMAN_VOLUME_DATASETS"; touch /data/x 2>/dev/null && echo writable || echo read-only`)
		if err != nil || !strings.Contains(out, "dataset-line") || !strings.Contains(out, "at /data") || !strings.Contains(out, "read-only") {
			t.Fatalf("foreman run --driver container with the volume: %v: %q", err, out)
		}
		if _, err := os.Stat(filepath.Join(vol, "x")); err == nil {
			t.Fatal("the container wrote into the read-only volume")
		}
	})

	t.Run("refused", func(t *testing.T) {
		var before, after struct{ Total int }
		if err := getJSON(a.url("/v1/jobs/counts"), &before); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"submit", "--volume", "models:/m", "--", "true"},
			{"submit", "--volume", "/etc:/m", "--", "true"},
			{"submit", "--volume", "datasets:/proc/x", "--", "true"},
		} {
			out, err := cli(args...)
			if err == nil || strings.Contains(out, "\n") || !strings.Contains(out, "volumes[0]") {
				t.Errorf("foreman %s: %v %q: want a non-zero exit and one line naming volumes[0]", strings.Join(args, " "), err, out)
			}
		}
		if err := getJSON(a.url("/v1/jobs/counts"), &after); err != nil {
			t.Fatal(err)
		}
		if after.Total != before.Total {
			t.Fatalf("refused submits stored jobs: %d → %d", before.Total, after.Total)
		}
	})

	// The job's spec shows what it mounted.
	out, err := cli("submit", "--json", "--volume", "datasets:/data:ro", "--", "true")
	if err != nil {
		t.Fatal(err, out)
	}
	var sub struct{ ID string }
	if err := json.Unmarshal([]byte(out), &sub); err != nil {
		t.Fatal(err, out)
	}
	waitJobState(t, a, sub.ID, "succeeded")
	var got struct {
		Job struct {
			Spec struct {
				Volumes []map[string]any `json:"volumes"`
			} `json:"spec"`
		} `json:"job"`
	}
	if err := getJSON(a.url("/v1/jobs/"+sub.ID), &got); err != nil {
		t.Fatal(err)
	}
	if v := got.Job.Spec.Volumes; len(v) != 1 || v[0]["name"] != "datasets" || v[0]["dest"] != "/data" || v[0]["read_only"] != true {
		t.Fatalf("the job's spec volumes %v", v)
	}
}
