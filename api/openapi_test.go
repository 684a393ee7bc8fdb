package api_test

import (
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/foreman-sched/foreman/api"
)

// The wire shapes have one source of truth: httpapi/openapi.yaml. The
// server is held to it by httpapi's contract test (its answers must
// validate, with no field the description lacks); api's types are held
// to it here: each type has exactly the properties of the schemas it
// stands for (an input and an output schema share one Go type where the
// shapes agree, so a job read back can be submitted again).
var typeSchemas = []struct {
	v       any
	schemas []string
}{
	{api.JobSpec{}, []string{"JobSpecInput", "JobSpec"}},
	{api.Resources{}, []string{"Resources", "ResourcesInput"}},
	{api.Backoff{}, []string{"Backoff", "BackoffInput"}},
	{api.Gang{}, []string{"GangSpec", "GangInput"}},
	{api.HTTPRequest{}, []string{"HTTPRequest", "HTTPRequestInput"}},
	{api.Webhook{}, []string{"Webhook", "WebhookInput"}},
	{api.SubmitResponse{}, []string{"SubmitResponse"}},
	{api.Deps{}, []string{"Deps"}},
	{api.GangStatus{}, []string{"GangStatus"}},
	{api.GangTask{}, []string{"GangTask"}},
	{api.Job{}, []string{"Job"}},
	{api.Artifact{}, []string{"Artifact"}},
	{api.InputSource{}, []string{"InputSource"}},
	{api.Outputs{}, []string{"Outputs"}},
	{api.StoredObject{}, []string{"StoredObject"}},
	{api.Attempt{}, []string{"Attempt"}},
	{api.WebhookEvent{}, []string{"WebhookEvent"}},
	{api.Delivery{}, []string{"Delivery"}},
	{api.JobDetail{}, []string{"JobDetail"}},
	{api.JobList{}, []string{"JobList"}},
	{api.JobCounts{}, []string{"JobCounts"}},
	{api.TaskList{}, []string{"TaskList"}},
	{api.TaskStatus{}, []string{"TaskStatus"}},
	{api.ArtifactList{}, []string{"ArtifactList"}},
	{api.Queue{}, []string{"Queue"}},
	{api.Event{}, []string{"Event"}},
	{api.JobTimeline{}, []string{"JobTimeline"}},
	{api.WorkflowSpec{}, []string{"WorkflowInput", "WorkflowTemplate"}},
	{api.WorkflowSubmitResponse{}, []string{"WorkflowSubmitResponse"}},
	{api.WorkflowJobRef{}, []string{"WorkflowJobRef"}},
	{api.Workflow{}, []string{"Workflow"}},
	{api.WorkflowDetail{}, []string{"WorkflowDetail"}},
	{api.WorkflowJobStatus{}, []string{"WorkflowJobStatus"}},
	{api.WorkflowList{}, []string{"WorkflowList"}},
	{api.ScheduleSpec{}, []string{"ScheduleInput", "ScheduleSpec"}},
	{api.FireState{}, []string{"FireState"}},
	{api.ScheduleInfo{}, []string{"ScheduleInfo"}},
	{api.TriggerResponse{}, []string{"TriggerResponse"}},
	{api.Node{}, []string{"NodeView"}},
	{api.NodeDetail{}, []string{"NodeDetail"}},
	{api.NodesDownRequest{}, []string{"NodesDownRequest"}},
	{api.NodesDownResponse{}, []string{"NodesDownResponse"}},
	{api.NodesDrainRequest{}, []string{"NodesDrainRequest"}},
	{api.NodesEligibilityRequest{}, []string{"NodesEligibilityRequest"}},
	{api.NodesChangeResponse{}, []string{"NodesChangeResponse"}},
	{api.NodeSummary{}, []string{"NodeSummary"}},
	{api.NodeList{}, []string{"NodeList"}},
	{api.HashResponse{}, []string{"HashResponse"}},
	{api.NamespaceSpec{}, []string{"SetNamespaceRequest"}},
	{api.NamespaceUsage{}, []string{"NamespaceUsage"}},
	{api.NamespaceStatus{}, []string{"NamespaceStatus"}},
	{api.NodeUsage{}, []string{"NodeUsage"}},
	{api.Member{}, []string{"Member"}},
	{api.RaftServer{}, []string{"RaftServer"}},
	{api.RaftInfo{}, []string{"RaftInfo"}},
	{api.ACLRole{}, []string{"ACLRole"}},
	{api.TokenSpec{}, []string{"TokenRequest"}},
	{api.Token{}, []string{"TokenInfo"}},
	{api.NewToken{}, []string{"NewToken"}},
	{api.InternalRotateResponse{}, []string{"InternalRotateResponse"}},
	{api.CheckpointInfo{}, []string{"CheckpointInfo"}},
	{api.StateCounts{}, []string{"StateCounts"}},
	{api.BackupHeader{}, []string{"BackupHeader"}},
	{api.RestoreResponse{}, []string{"RestoreResponse"}},
	{api.TransferResponse{}, []string{"TransferResponse"}},
	{api.RemovePeerResponse{}, []string{"RemovePeerResponse"}},
	{api.GossipKey{}, []string{"GossipKey"}},
	{api.NodeGossipKeys{}, []string{"NodeGossipKeys"}},
	{api.GossipKeysResponse{}, []string{"GossipKeysResponse"}},
	{api.HostVolume{}, []string{"HostVolume"}},
	{api.VolumeMount{}, []string{"VolumeMount"}},
	{api.ExecRequest{}, []string{"ExecRequest"}},
}

func TestTypesMatchOpenAPI(t *testing.T) {
	b, err := os.ReadFile("../httpapi/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, tc := range typeSchemas {
		typ := reflect.TypeOf(tc.v)
		t.Run(typ.Name(), func(t *testing.T) {
			want := map[string]bool{}
			for _, name := range tc.schemas {
				s, ok := doc.Components.Schemas[name]
				if !ok {
					t.Fatalf("openapi.yaml has no schema %s", name)
				}
				for p := range s.Properties {
					want[p] = true
				}
			}
			got := jsonFields(typ)
			var missing, extra []string
			for p := range want {
				if !slices.Contains(got, p) {
					missing = append(missing, p)
				}
			}
			for _, p := range got {
				if !want[p] {
					extra = append(extra, p)
				}
			}
			sort.Strings(missing)
			sort.Strings(extra)
			if len(missing) > 0 || len(extra) > 0 {
				t.Errorf("api.%s against %v: lacks %v; has %v, which the description does not", typ.Name(), tc.schemas, missing, extra)
			}
		})
	}
}

// jsonFields lists the JSON names of a struct's fields, embedded structs
// flattened as encoding/json does.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}
