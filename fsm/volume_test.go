package fsm

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckVolumes(t *testing.T) {
	ok := []VolumeMount{{Name: "data", Dest: "/data"}, {Name: "models-2", Dest: "/mnt/models", ReadOnly: true}}
	if err := CheckVolumeMounts("volumes", ok); err != nil {
		t.Fatal(err)
	}
	for want, mounts := range map[string][]VolumeMount{
		"is a path":                 {{Name: "/mnt/data", Dest: "/data"}},
		"volume names are":          {{Name: "Data", Dest: "/data"}},
		"must be an absolute path":  {{Name: "data", Dest: "data"}},
		"without ..":                {{Name: "data", Dest: "/a/../etc"}},
		"over the container's root": {{Name: "data", Dest: "/"}},
		"which the runtime mounts":  {{Name: "data", Dest: "/foreman/x"}},
		"mounted twice":             {{Name: "data", Dest: "/a"}, {Name: "data", Dest: "/b"}},
		"used twice":                {{Name: "a", Dest: "/x"}, {Name: "b", Dest: "/x"}},
	} {
		if err := CheckVolumeMounts("volumes", mounts); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want an error containing %q", mounts, err, want)
		}
	}
	for want, vols := range map[string][]HostVolume{
		"declared twice":         {{Name: "d", Path: "/a"}, {Name: "d", Path: "/b"}},
		"absolute, clean path":   {{Name: "d", Path: "relative"}},
		"other than /":           {{Name: "d", Path: "/"}},
		"volume names are 1-63 ": {{Name: "", Path: "/a"}},
	} {
		if err := CheckHostVolumes("volumes", vols); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want an error containing %q", vols, err, want)
		}
	}
	if got := VolumeEnv("my-data_2"); got != "FOREMAN_VOLUME_MY_DATA_2" {
		t.Errorf("VolumeEnv = %q", got)
	}
}

// A node's volumes are in its record; a job's volumes survive the record
// and its transitions (they are part of its placement group); bad ones are
// refused with nothing written.
func TestVolumesInRecords(t *testing.T) {
	h := newHarness(t)
	h.must(CmdUpsertNode, UpsertNode{Node: Node{Name: "n1", Capacity: Resources{CPU: 4000, MemoryMB: 8192},
		Volumes: []HostVolume{{Name: "data", Path: "/mnt/data", ReadOnly: true}}}})
	before := h.hash()
	if r := h.apply(CmdUpsertNode, UpsertNode{Node: Node{Name: "n2", Volumes: []HostVolume{{Name: "data", Path: "rel"}}}}); !errors.Is(r.Err, ErrBadCommand) {
		t.Fatalf("a relative volume path: %v", r.Err)
	}
	if r := h.apply(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "bad", Spec: JobSpec{Command: []string{"true"}, Volumes: []VolumeMount{{Name: "data", Dest: "/proc/x"}}}}}}); !errors.Is(r.Err, ErrBadCommand) {
		t.Fatalf("a reserved dest: %v", r.Err)
	}
	if h.hash() != before {
		t.Fatal("refused commands changed the state")
	}
	spec := JobSpec{Command: []string{"true"}, Volumes: []VolumeMount{{Name: "data", Dest: "/data"}}}
	plain := JobSpec{Command: []string{"true"}}
	if PlacementGroup(&spec) == PlacementGroup(&plain) {
		t.Fatal("volumes do not change the placement group")
	}
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "j1", Spec: spec}}})
	h.place("j1", "n1")
	if got := h.job("j1").Spec.Volumes; len(got) != 1 || got[0] != spec.Volumes[0] {
		t.Fatalf("volumes after placement: %+v", got)
	}
	var n *Node
	if err := h.f.View(func(tx *Tx) (err error) { n, err = tx.Node("n1"); return err }); err != nil || n.Volume("data") == nil || !n.Volume("data").ReadOnly {
		t.Fatalf("node record: %+v %v", n, err)
	}
	// Queued again from a record read the applier's way (schedSpec): its
	// queued index key must still carry the volumes.
	spec.MaxAttempts = 1
	h.must(CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "j2", Spec: spec}}})
	h.finish("j2", false)
	h.must(CmdRetryJob, RetryJob{JobID: "j2"})
	if got := h.job("j2").State; got != JobQueued {
		t.Fatalf("j2 after retry: %s", got)
	}
	checkIndexes(t, h.f)
}
