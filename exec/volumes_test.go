package exec

import (
	"slices"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

func TestResolveVolumes(t *testing.T) {
	declared := []fsm.HostVolume{{Name: "data", Path: "/mnt/data", ReadOnly: true}, {Name: "scratch", Path: "/srv/scratch"}}
	got, err := resolveVolumes("n1", declared, []fsm.VolumeMount{{Name: "data", Dest: "/data"}, {Name: "scratch", Dest: "/s"}, {Name: "scratch", Dest: "/s2", ReadOnly: true}})
	if err == nil || !strings.Contains(err.Error(), "mounted twice") {
		t.Fatalf("a volume twice: %v %+v", err, got)
	}
	got, err = resolveVolumes("n1", declared, []fsm.VolumeMount{{Name: "data", Dest: "/data"}, {Name: "scratch", Dest: "/s"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []TaskVolume{{Name: "data", Path: "/mnt/data", Dest: "/data", ReadOnly: true}, {Name: "scratch", Path: "/srv/scratch", Dest: "/s"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v, want %+v (read-only when the node says so)", got, want)
	}
	if env := volumeEnv(got, ProcessDriverName); !slices.Equal(env, []string{"FOREMAN_VOLUME_DATA=/mnt/data", "FOREMAN_VOLUME_SCRATCH=/srv/scratch"}) {
		t.Fatalf("process env %v", env)
	}
	if env := volumeEnv(got, "container"); !slices.Equal(env, []string{"FOREMAN_VOLUME_DATA=/data", "FOREMAN_VOLUME_SCRATCH=/s"}) {
		t.Fatalf("container env %v", env)
	}
	if _, err := resolveVolumes("n1", declared, []fsm.VolumeMount{{Name: "models", Dest: "/m"}}); err == nil || !strings.Contains(err.Error(), `volume "models" is not declared on node n1`) {
		t.Fatalf("an undeclared volume: %v", err)
	}
}
