package httpapi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/foreman-sched/foreman/fsm"
)

// The example specs under testdata/schedules are valid schedules.
func TestScheduleExampleSpecs(t *testing.T) {
	paths, err := filepath.Glob("../testdata/schedules/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no example specs: %v", err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := yaml.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		js, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		var in ScheduleInput
		if err := decodeStrict(js, &in); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		sp, err := in.Normalize()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if sp.Name == "" || (sp.Workflow == nil && sp.Job.MaxAttempts == 0) || (sp.Workflow != nil && sp.Workflow.Jobs[0].MaxAttempts == 0) {
			t.Fatalf("%s: %+v", p, sp)
		}
		if _, err := fsm.ParseCron(sp.Cron, sp.TimeZone); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
}
