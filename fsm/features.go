package fsm

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// ErrFeatureHeld means a command needs a feature that some server of the
// raft configuration does not advertise (an older build during a rolling
// upgrade): it was not proposed. The message names the feature and the
// servers lacking it.
var ErrFeatureHeld = errors.New("not every server supports this yet")

// FeatureSet is a set of features, one bit each (Feature.Set): what a
// server gossips about the commands it can apply beyond the baseline.
type FeatureSet uint64

// The features this build can apply beyond the baseline: what every build
// up to the first release candidate knew (the golden workload of
// compat_test.go: every command kind of payloadTypes not listed here, and
// every payload field of testdata/ungated_fields.txt). Bits are fixed once
// released and never reused; a later feature takes the next bit.
const (
	FeatureAfter         FeatureSet = 1 << 0
	FeatureSingleton     FeatureSet = 1 << 1
	FeatureVolumes       FeatureSet = 1 << 2
	FeatureSilentClients FeatureSet = 1 << 3
	FeatureNodeStates    FeatureSet = 1 << 4
	FeatureArray         FeatureSet = 1 << 5
	FeatureExecAudit     FeatureSet = 1 << 6
	FeatureUsage         FeatureSet = 1 << 7
	FeatureFairShare     FeatureSet = 1 << 8
)

// Feature names one change to what Apply does that an older build would
// not apply the same way: a command kind it refuses, or a payload field
// its codec skips (unknown fields are ignored, so the entry would apply
// as something else there).
type Feature struct {
	Set  FeatureSet
	Name string
	// Fields are the payload fields that need it ("Type.json_name"), as
	// the field guard (features_test.go) reads them.
	Fields []string
	// Commands are the command kinds that need it.
	Commands []CommandType
}

// Features lists every feature of this build, in bit order.
var Features = []Feature{
	{Set: FeatureAfter, Name: "after", Fields: []string{"JobSpec.after"}},
	{Set: FeatureSingleton, Name: "singleton", Fields: []string{"JobSpec.singleton"}},
	{Set: FeatureVolumes, Name: "volumes", Fields: []string{"JobSpec.volumes", "Node.volumes", "Namespace.volumes"}},
	{Set: FeatureSilentClients, Name: "silent_clients", Commands: []CommandType{CmdSilentClients}},
	{Set: FeatureNodeStates, Name: "node_states", Commands: []CommandType{CmdNodeStates}},
	{Set: FeatureArray, Name: "array", Fields: []string{"JobSpec.array", "CancelJob.indexes", "RetryJob.indexes"}},
	// foreman exec records every exec before it starts: an exec needs
	// every server to apply that record.
	{Set: FeatureExecAudit, Name: "exec_audit", Commands: []CommandType{CmdExecAudit}},
	// Usage accounting: Apply adds an ended attempt's use only once
	// start_usage is committed; a job records who submitted it.
	{Set: FeatureUsage, Name: "usage", Commands: []CommandType{CmdStartUsage}, Fields: []string{"NewJob.submitted_by"}},
	// An older build would drop a namespace's share: the record would
	// differ between servers.
	{Set: FeatureFairShare, Name: "fair_share", Fields: []string{"Namespace.share"}},
}

// KnownFeatures is every feature this build can apply: what it gossips.
var KnownFeatures = func() FeatureSet {
	var s FeatureSet
	for _, f := range Features {
		s |= f.Set
	}
	return s
}()

// Names lists the features of s that this build knows, in bit order.
func (s FeatureSet) Names() []string {
	var out []string
	for _, f := range Features {
		if s&f.Set != 0 {
			out = append(out, f.Name)
		}
	}
	return out
}

// commandFeatures says, for every command kind, which features the kind
// itself needs (0: the baseline knew it). The field guard
// (features_test.go) fails for a type of payloadTypes missing here.
var commandFeatures = func() map[CommandType]FeatureSet {
	m := map[CommandType]FeatureSet{
		CmdInit: 0, CmdLeader: 0, CmdSubmitJobs: 0, CmdSubmitGroup: 0, CmdUpsertNode: 0,
		CmdNodeState: 0, CmdNodeGPUs: 0, CmdResetGPUs: 0, CmdPlace: 0, CmdReport: 0,
		CmdReportBatch: 0, CmdRelease: 0, CmdCancelJob: 0, CmdRetryJob: 0, CmdMarkLost: 0,
		CmdFailJobs: 0, CmdSetReasons: 0, CmdSetQueue: 0, CmdStopAttempts: 0, CmdGC: 0,
		CmdPutSchedule: 0, CmdDeleteSchedule: 0, CmdPauseSchedule: 0, CmdFireSchedules: 0,
		CmdSubmitWorkflow: 0, CmdCancelWorkflow: 0, CmdRetryWorkflow: 0, CmdDeliveries: 0,
		CmdACLBootstrap: 0, CmdACLCreateToken: 0, CmdACLRevokeToken: 0, CmdACLInternal: 0,
		CmdSetCheckpoint: 0, CmdSetNamespace: 0, CmdDeleteNamespace: 0,
	}
	for _, f := range Features {
		for _, c := range f.Commands {
			m[c] |= f.Set
		}
	}
	return m
}()

// Needs returns the features Apply needs to apply cmd as this build does:
// its kind's and those of the fields its payload sets. An unknown kind or
// an undecodable payload is an error (Apply would refuse it anyway).
func (c *Command) Needs() (FeatureSet, error) {
	p, ok := payloadTypes[c.Type]
	if !ok {
		return 0, fmt.Errorf("%w: unknown command type %q", ErrBadCommand, c.Type)
	}
	v := reflect.New(reflect.TypeOf(p))
	if err := c.DecodePayload(v.Interface()); err != nil {
		return 0, err
	}
	return CommandNeeds(c.Type, v.Elem().Interface()), nil
}

// CommandNeeds is Needs for a payload not yet encoded (a value of the type
// payloadTypes lists for t).
func CommandNeeds(t CommandType, payload any) FeatureSet {
	need := commandFeatures[t]
	switch p := payload.(type) {
	case SubmitJobs:
		need |= JobsNeed(p.Jobs)
	case SubmitGroup:
		for _, s := range p.Submits {
			need |= JobsNeed(s.Jobs)
		}
	case SubmitWorkflow:
		need |= JobsNeed(p.Jobs)
	case PutSchedule:
		need |= SpecNeeds(p.Schedule.Job)
		if p.Schedule.Workflow != nil {
			for _, j := range p.Schedule.Workflow.Jobs {
				need |= SpecNeeds(j)
			}
		}
	case CancelJob:
		if len(p.Indexes) > 0 {
			need |= FeatureArray
		}
	case RetryJob:
		if len(p.Indexes) > 0 {
			need |= FeatureArray
		}
	case UpsertNode:
		if len(p.Node.Volumes) > 0 {
			need |= FeatureVolumes
		}
	case SetNamespace:
		if len(p.Namespace.Volumes) > 0 {
			need |= FeatureVolumes
		}
		if p.Namespace.Share > 0 {
			need |= FeatureFairShare
		}
	}
	return need
}

// JobsNeed is the features a submit of jobs needs.
func JobsNeed(jobs []NewJob) FeatureSet {
	var need FeatureSet
	for i := range jobs {
		need |= SpecNeeds(jobs[i].Spec)
		if jobs[i].SubmittedBy != "" {
			need |= FeatureUsage
		}
	}
	return need
}

// SpecNeeds is the features a job spec needs.
func SpecNeeds(s JobSpec) FeatureSet {
	var need FeatureSet
	if len(s.After) > 0 {
		need |= FeatureAfter
	}
	if s.Singleton {
		need |= FeatureSingleton
	}
	if len(s.Volumes) > 0 {
		need |= FeatureVolumes
	}
	if s.Array != nil {
		need |= FeatureArray
	}
	return need
}

// ServerFeatures is what one server of the raft configuration advertises,
// as a node's gossip sees it.
type ServerFeatures struct {
	ID string
	// Version is its foreman version ("": not advertised).
	Version string
	// Features is what it advertises: a build from before the gate
	// advertises none, which means the baseline.
	Features FeatureSet
	// Known is false when this node has no gossip from it at all (it is
	// taken to have the baseline only).
	Known bool
}

func (s ServerFeatures) String() string {
	switch {
	case !s.Known:
		return s.ID + " (not heard in gossip)"
	case s.Version == "":
		return s.ID + " (version unknown)"
	}
	return s.ID + " (foreman " + s.Version + ")"
}

// FeatureGate is which features every server of the raft configuration
// can apply: the proposing node proposes a command only when it needs
// nothing more (a zero gate, no servers, holds nothing back).
type FeatureGate struct {
	Servers []ServerFeatures
}

// Enabled is the features every server advertises.
func (g FeatureGate) Enabled() FeatureSet {
	s := KnownFeatures
	for _, srv := range g.Servers {
		s &= srv.Features
	}
	return s
}

// Lacking lists the servers that do not advertise feature f.
func (g FeatureGate) Lacking(f FeatureSet) []ServerFeatures {
	var out []ServerFeatures
	for _, srv := range g.Servers {
		if srv.Features&f != f {
			out = append(out, srv)
		}
	}
	return out
}

// Check returns nil when every server can apply what need holds, else an
// error wrapping ErrFeatureHeld in one line, for each feature held back:
// "array: server n2 (foreman v0.1.0) does not support it yet".
func (g FeatureGate) Check(need FeatureSet) error {
	held := need &^ g.Enabled()
	if held == 0 {
		return nil
	}
	var parts []string
	for _, f := range Features {
		if held&f.Set == 0 {
			continue
		}
		lacking := g.Lacking(f.Set)
		names := make([]string, len(lacking))
		for i, s := range lacking {
			names[i] = s.String()
		}
		verb := "server %s does not"
		if len(names) > 1 {
			verb = "servers %s do not"
		}
		parts = append(parts, f.Name+": "+fmt.Sprintf(verb, strings.Join(names, ", "))+" support it yet")
	}
	return fmt.Errorf("%w: %s; finish the upgrade (foreman version --cluster)", ErrFeatureHeld, strings.Join(parts, "; "))
}
