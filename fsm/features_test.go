package fsm

import (
	"errors"
	"flag"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var updateUngated = flag.Bool("update-ungated", false, "rewrite testdata/ungated_fields.txt from the payload types (then review the diff)")

const ungatedFile = "testdata/ungated_fields.txt"

// TestFeaturesListEveryCommandType: a command kind registered in
// payloadTypes but not in commandFeatures would be proposed to servers
// that cannot apply it; list it (as the baseline or a feature's).
func TestFeaturesListEveryCommandType(t *testing.T) {
	for ct := range payloadTypes {
		if _, ok := commandFeatures[ct]; !ok {
			t.Errorf("command type %s is not listed in commandFeatures (features.go): if an older server cannot apply it, it needs a Feature", ct)
		}
	}
	for ct := range commandFeatures {
		if _, ok := payloadTypes[ct]; !ok {
			t.Errorf("commandFeatures lists %s, which payloadTypes does not register", ct)
		}
	}
	var all FeatureSet
	names := map[string]bool{}
	for _, f := range Features {
		if f.Set == 0 || f.Set&(f.Set-1) != 0 || all&f.Set != 0 {
			t.Errorf("feature %s: bit %b is not one bit of its own", f.Name, f.Set)
		}
		if names[f.Name] || f.Name == "" {
			t.Errorf("feature name %q is empty or repeated", f.Name)
		}
		if len(f.Fields)+len(f.Commands) == 0 {
			t.Errorf("feature %s names no field and no command that needs it", f.Name)
		}
		names[f.Name], all = true, all|f.Set
	}
	if all != KnownFeatures {
		t.Fatalf("KnownFeatures %b, want %b", KnownFeatures, all)
	}
}

// payloadFields lists "Type.json_name" for every field reachable from the
// command payloads, not descending into gated fields (their types are the
// feature's).
func payloadFields(gated map[string]bool) []string {
	seen := map[reflect.Type]bool{}
	var out []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map || t.Kind() == reflect.Array {
			if t.Kind() == reflect.Map {
				walk(t.Key())
			}
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t == timeType || seen[t] {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			sf := t.Field(i)
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if name == "-" || !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			key := t.Name() + "." + name
			if gated[key] {
				continue
			}
			out = append(out, key)
			walk(sf.Type)
		}
	}
	for _, ct := range slices.Sorted(func(yield func(CommandType) bool) {
		for ct := range payloadTypes {
			if !yield(ct) {
				return
			}
		}
	}) {
		walk(reflect.TypeOf(payloadTypes[ct]))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestPayloadFieldsGated is the field guard: every payload field is either
// in testdata/ungated_fields.txt (known to the baseline, or one an older
// server may ignore without applying the entry differently) or listed by
// a Feature. A new field in neither fails here: decide which, and for a
// feature make CommandNeeds see it.
func TestPayloadFieldsGated(t *testing.T) {
	gated := map[string]bool{}
	for _, f := range Features {
		for _, fl := range f.Fields {
			gated[fl] = true
		}
	}
	got := payloadFields(gated)
	if *updateUngated {
		if err := os.WriteFile(ungatedFile, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(ungatedFile)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		want[l] = true
	}
	for _, f := range got {
		if !want[f] {
			t.Errorf("payload field %s is new: if an older server would apply an entry setting it differently, add it to a Feature's Fields and to CommandNeeds (features.go); otherwise to %s", f, ungatedFile)
		}
		delete(want, f)
	}
	for f := range want {
		t.Errorf("%s lists %s, which no payload has (remove it)", ungatedFile, f)
	}
	// Every gated field exists (a typo would gate nothing).
	all := payloadFields(nil)
	for f := range gated {
		if !slices.Contains(all, f) {
			t.Errorf("a Feature lists field %s, which no payload has", f)
		}
	}
}

// TestCommandNeeds: each gated field and command kind, encoded as the
// proposer encodes it, needs its feature; what the baseline knew needs
// nothing.
func TestCommandNeeds(t *testing.T) {
	plain := JobSpec{Name: "p", Command: []string{"true"}}
	with := func(mod func(*JobSpec)) JobSpec { s := plain; mod(&s); return s }
	array := with(func(s *JobSpec) { s.Array = &ArraySpec{Start: 0, End: 3} })
	cases := []struct {
		name    string
		t       CommandType
		payload any
		want    FeatureSet
	}{
		{"plain submit", CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "a", Spec: plain}}}, 0},
		{"after", CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{Spec: with(func(s *JobSpec) { s.After = []AfterDep{{Job: "x", On: AfterOK}} })}}}, FeatureAfter},
		{"singleton", CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{Spec: with(func(s *JobSpec) { s.Singleton = true })}}}, FeatureSingleton},
		{"volumes", CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{Spec: with(func(s *JobSpec) { s.Volumes = []VolumeMount{{Name: "data"}} })}}}, FeatureVolumes},
		{"array", CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{Spec: plain}, {Spec: array}}}, FeatureArray},
		{"array in a group", CmdSubmitGroup, SubmitGroup{Submits: []SubmitJobs{{Jobs: []NewJob{{Spec: plain}}}, {Jobs: []NewJob{{Spec: array}}}}}, FeatureArray},
		{"array in a workflow", CmdSubmitWorkflow, SubmitWorkflow{ID: "w", Jobs: []NewJob{{Spec: array}}}, FeatureArray},
		{"array in a schedule", CmdPutSchedule, PutSchedule{Schedule: ScheduleSpec{Job: array}}, FeatureArray},
		{"array in a schedule's workflow", CmdPutSchedule, PutSchedule{Schedule: ScheduleSpec{Job: plain, Workflow: &WorkflowTemplate{Jobs: []JobSpec{plain, array}}}}, FeatureArray},
		{"cancel indexes", CmdCancelJob, CancelJob{JobID: "a", Indexes: []int{1}}, FeatureArray},
		{"plain cancel", CmdCancelJob, CancelJob{JobID: "a"}, 0},
		{"an exec's record", CmdExecAudit, ExecAudit{JobID: "a", Attempt: 1, By: "ops", Command: "sh"}, FeatureExecAudit},
		{"retry indexes", CmdRetryJob, RetryJob{JobID: "a", Indexes: []int{1}}, FeatureArray},
		{"node volumes", CmdUpsertNode, UpsertNode{Node: Node{Name: "n", Volumes: []HostVolume{{Name: "d", Path: "/d"}}}}, FeatureVolumes},
		{"plain node", CmdUpsertNode, UpsertNode{Node: Node{Name: "n"}}, 0},
		{"namespace volumes", CmdSetNamespace, SetNamespace{Namespace: Namespace{Name: "ns", Volumes: []string{"d"}}}, FeatureVolumes},
		{"namespace share", CmdSetNamespace, SetNamespace{Namespace: Namespace{Name: "ns", Share: 2}}, FeatureFairShare},
		{"namespace without a share", CmdSetNamespace, SetNamespace{Namespace: Namespace{Name: "ns", MaxRunning: 2}}, 0},
		{"silent clients", CmdSilentClients, SilentClients{}, FeatureSilentClients},
		{"node states", CmdNodeStates, SetNodeStates{}, FeatureNodeStates},
		{"start usage", CmdStartUsage, StartUsage{Labels: []string{"team"}}, FeatureUsage},
		{"submitted by", CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{ID: "a", Spec: plain, SubmittedBy: "alice"}}}, FeatureUsage},
		{"submitted by in a workflow", CmdSubmitWorkflow, SubmitWorkflow{ID: "w", Jobs: []NewJob{{Spec: plain, SubmittedBy: "alice"}}}, FeatureUsage},
		{"both", CmdSubmitJobs, SubmitJobs{Jobs: []NewJob{{Spec: with(func(s *JobSpec) { s.Singleton, s.Array = true, &ArraySpec{End: 1} })}}}, FeatureSingleton | FeatureArray},
	}
	covered := FeatureSet(0)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := CommandNeeds(c.t, c.payload); got != c.want {
				t.Errorf("CommandNeeds = %v, want %v", got.Names(), c.want.Names())
			}
			cmd, err := NewCommand(c.t, time.Unix(0, 0), c.payload)
			if err != nil {
				t.Fatal(err)
			}
			b, err := cmd.Encode()
			if err != nil {
				t.Fatal(err)
			}
			dec, err := DecodeCommand(b)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := dec.Needs(); err != nil || got != c.want {
				t.Errorf("decoded Needs = %v (%v), want %v", got.Names(), err, c.want.Names())
			}
		})
		covered |= c.want
	}
	if covered != KnownFeatures {
		t.Errorf("the cases cover %v, not every feature %v", covered.Names(), KnownFeatures.Names())
	}
	if _, err := (&Command{V: CommandVersion, Type: "zz"}).Needs(); !errors.Is(err, ErrBadCommand) {
		t.Errorf("an unknown kind: %v", err)
	}
}

// TestFeatureGateCheck: the refusal is one line naming each held feature
// and the servers lacking it; an old server (no advertisement) has the
// baseline only.
func TestFeatureGateCheck(t *testing.T) {
	all := func(id string) ServerFeatures {
		return ServerFeatures{ID: id, Version: "v0.2.0", Features: KnownFeatures, Known: true}
	}
	old := ServerFeatures{ID: "n2", Version: "v0.1.0", Known: true}
	g := FeatureGate{Servers: []ServerFeatures{all("n1"), old, all("n3")}}
	if g.Enabled() != 0 {
		t.Fatalf("enabled %v with a baseline server", g.Enabled().Names())
	}
	if err := g.Check(0); err != nil {
		t.Fatalf("a baseline command: %v", err)
	}
	err := g.Check(FeatureArray)
	want := "not every server supports this yet: array: server n2 (foreman v0.1.0) does not support it yet; finish the upgrade (foreman version --cluster)"
	if !errors.Is(err, ErrFeatureHeld) || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	g.Servers = append(g.Servers, ServerFeatures{ID: "n4"}, ServerFeatures{ID: "n5", Known: true, Features: FeatureArray})
	err = g.Check(FeatureArray | FeatureAfter)
	want = "not every server supports this yet: after: servers n2 (foreman v0.1.0), n4 (not heard in gossip), n5 (version unknown) do not support it yet; " +
		"array: servers n2 (foreman v0.1.0), n4 (not heard in gossip) do not support it yet; finish the upgrade (foreman version --cluster)"
	if err == nil || err.Error() != want || strings.Contains(err.Error(), "\n") {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	up := FeatureGate{Servers: []ServerFeatures{all("n1"), all("n2")}}
	if err := up.Check(KnownFeatures); err != nil || up.Enabled() != KnownFeatures {
		t.Fatalf("every server upgraded: %v, enabled %v", err, up.Enabled().Names())
	}
	if (FeatureGate{}).Check(KnownFeatures) != nil {
		t.Fatal("a gate without servers holds something back")
	}
}
