package httpapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

// TestAPITypesKeepServerJSON: every reply the server sends survives a
// round trip through package api's type for it byte for byte: no field
// is dropped, none is added, and they come out in the server's order.
// The CLI decodes into api's types and prints them with --json, so this
// is what keeps its --json output the server's own answer. Each server
// value has every field set (fill), so a field api lacks shows up here as
// an unknown one.
func TestAPITypesKeepServerJSON(t *testing.T) {
	pairs := []struct {
		server, client any
	}{
		{&JobDetail{}, &api.JobDetail{}},
		{&JobList{}, &api.JobList{}},
		{&JobCounts{}, &api.JobCounts{}},
		{&TaskList{}, &api.TaskList{}},
		{&ArtifactList{}, &api.ArtifactList{}},
		{&JobTimeline{}, &api.JobTimeline{}},
		{&JobGPUUsage{}, &api.JobGPUUsage{}},
		{&SubmitResponse{}, &api.SubmitResponse{}},
		{&CheckpointInfo{}, &api.CheckpointInfo{}},
		{&WorkflowSubmitResponse{}, &api.WorkflowSubmitResponse{}},
		{&WorkflowDetail{}, &api.WorkflowDetail{}},
		{&WorkflowList{}, &api.WorkflowList{}},
		{&NodeList{}, &api.NodeList{}},
		{&NodeDetail{}, &api.NodeDetail{}},
		{&NodeUsage{}, &api.NodeUsage{}},
		{&GPUResetResponse{}, &api.GPUResetResponse{}},
		{&Queue{}, &api.Queue{}},
		{&ScheduleInfo{}, &api.ScheduleInfo{}},
		{&TriggerResponse{}, &api.TriggerResponse{}},
		{&NamespaceStatus{}, &api.NamespaceStatus{}},
		{&Member{}, &api.Member{}},
		{&RaftInfo{}, &api.RaftInfo{}},
		{&HashResponse{}, &api.HashResponse{}},
		{&RestoreResponse{}, &api.RestoreResponse{}},
		{&TransferResponse{}, &api.TransferResponse{}},
		{&RemovePeerResponse{}, &api.RemovePeerResponse{}},
		{&GossipKeysResponse{}, &api.GossipKeysResponse{}},
		{&NewToken{}, &api.NewToken{}},
		{&TokenInfo{}, &api.Token{}},
		{&InternalRotateResponse{}, &api.InternalRotateResponse{}},
		{&fsm.Event{}, &api.Event{}},
	}
	for _, p := range pairs {
		for _, m := range []fillMode{full, zeros, empty, none} {
			name := reflect.TypeOf(p.client).Elem().String() + "/" + m.String()
			t.Run(name, func(t *testing.T) {
				server := reflect.New(reflect.TypeOf(p.server).Elem()).Interface()
				client := reflect.New(reflect.TypeOf(p.client).Elem()).Interface()
				roundTrip(t, server, client, m)
			})
		}
	}
}

// fillMode is how much of a server value fill sets.
type fillMode int

const (
	full  fillMode = iota // every field, one element in each slice and map
	zeros                 // only the containers, one zero element each: a zero the server prints and api leaves out shows up
	empty                 // pointers set, slices and maps empty but not nil: an empty one the server prints ([], {}) and api leaves out
	none                  // nothing (but alwaysSet): the server's nulls
)

func (m fillMode) String() string { return [...]string{"full", "zeros", "empty", "none"}[m] }

// roundTrip fills server as m says, decodes its JSON into client and
// wants the same bytes back.
func roundTrip(t *testing.T, server, client any, m fillMode) {
	name := reflect.TypeOf(client).Elem().String()
	fill(reflect.ValueOf(server).Elem(), m)
	if si, ok := server.(*ScheduleInfo); ok {
		si.History = nil // the server shows it as Fires
	}
	want, err := json.Marshal(server)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(want))
	dec.DisallowUnknownFields()
	if err := dec.Decode(client); err != nil {
		t.Fatalf("decoding the server's %s into %s: %v\n%s", reflect.TypeOf(server).Elem(), name, err, want)
	}
	got, err := json.Marshal(client)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s does not print what the server sent:\n got %s\nwant %s", name, got, want)
	}
}

// alwaysSet names, per server type, the fields the server never leaves
// empty (it fills a default or requires them) and prints without
// omitempty, while api's type, also an input, omits them when empty.
var alwaysSet = map[reflect.Type][]string{
	reflect.TypeFor[fsm.HTTPRequest]():  {"Method"},                     // GET by default
	reflect.TypeFor[fsm.ScheduleSpec](): {"Name", "Overlap", "CatchUp"}, // required, defaults
	reflect.TypeFor[fsm.AfterDep]():     {"On"},                         // ok by default
}

// fill sets the fields reachable from v as m says, with values the
// server's own (un)marshalling accepts: a set pointer, a fixed time.
func fill(v reflect.Value, m fillMode) {
	if m != full {
		if v.Kind() == reflect.Pointer && v.Type().Elem() == reflect.TypeFor[time.Time]() {
			return // a time the server points to is never the zero time
		}
		switch v.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map:
			if m == none {
				return
			}
		case reflect.Struct:
		default:
			return
		}
		if v.Type() == reflect.TypeFor[time.Time]() {
			return
		}
	}
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)))
		return
	case reflect.TypeFor[json.RawMessage]():
		v.Set(reflect.ValueOf(json.RawMessage(`{"k":1}`)))
		return
	}
	n := 1
	if m == empty {
		n = 0
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(3)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(3)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), m)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(s.Index(i), m)
		}
		v.Set(s)
	case reflect.Map:
		mv := reflect.MakeMap(v.Type())
		if n > 0 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k, m)
			fill(e, m)
			mv.SetMapIndex(k, e)
		}
		v.Set(mv)
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				fm := m
				if m != full && slices.Contains(alwaysSet[v.Type()], f.Name) {
					fm = full
				}
				fill(v.Field(i), fm)
			}
		}
	}
}
