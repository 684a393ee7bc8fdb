package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/cluster/clustertest"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// TestFeatureGateDuringUpgrade: three servers, one of them advertising
// only the baseline (a server of an older build, simulated with
// Config.AdvertiseFeatures). A submit with an array, through the leader
// or a follower, is refused 409 feature_held with one line naming the
// feature and that server, and nothing is stored; plain submits go on;
// GET /v1/cluster/raft shows array held with the server lacking it. Once
// that server is restarted advertising everything, the same submit is
// accepted and applied as an array on every server.
func TestFeatureGateDuringUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster: skipped in -short mode")
	}
	const old = 2
	var oldBuild atomic.Bool
	oldBuild.Store(true)
	baseline := fsm.FeatureSet(0)
	c := clustertest.NewCluster(t, 3, clustertest.Options{
		Configure: func(i int, cfg *cluster.Config) {
			if i == old && oldBuild.Load() {
				cfg.AdvertiseFeatures = &baseline
			}
		},
		Serve: func(i int, n *cluster.Node, f *fsm.FSM, mux *http.ServeMux) {
			h := httpapi.New(httpapi.DefaultConfig(), httpapi.Deps{Cluster: clusterAdapter{n}, State: f})
			mux.Handle("/v1/", h)
			mux.Handle(httpapi.ForwardedSubmitsPath, h) // a follower's grouped submits

		},
	})
	leader := c.WaitForLeader()
	var follower *clustertest.Node
	for _, nd := range c.Followers() {
		if nd.Index != old {
			follower = nd
		}
	}
	if leader.Index == old || follower == nil {
		t.Fatalf("the old server %d is the leader (%d) or no other follower", old, leader.Index)
	}
	client := func(nd *clustertest.Node) *api.Client {
		cl, err := api.NewClient(api.Config{Address: fmt.Sprintf("http://127.0.0.1:%d", nd.Port), FailFast: true})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	ctx := context.Background()
	oldName := c.Node(old).Name
	// Every server's gossip has reached the leader and the follower.
	for _, nd := range []*clustertest.Node{leader, follower} {
		c.Eventually(clustertest.ConvergeTimeout, nd.Name+" sees the old server's gossip", func() error {
			for _, s := range nd.FeatureGate().Servers {
				if !s.Known {
					return fmt.Errorf("no gossip from %s yet", s.ID)
				}
			}
			return nil
		})
	}

	arrayJob := api.JobSpec{Name: "held-array", Command: []string{"true"}, Array: &api.ArraySpec{Start: 0, End: 3}}
	for _, nd := range []*clustertest.Node{leader, follower} {
		_, err := client(nd).SubmitJob(ctx, arrayJob)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != api.CodeFeatureHeld {
			t.Fatalf("array submit through %s while %s lacks it: %v, want 409 %s", nd.Name, oldName, err, api.CodeFeatureHeld)
		}
		want := "array: server " + oldName + " (foreman test) does not support it yet; finish the upgrade"
		if !strings.Contains(ae.Message, want) || strings.Contains(ae.Message, "\n") {
			t.Fatalf("through %s: %q, want one line with %q", nd.Name, ae.Message, want)
		}
	}
	// A batch of one plain job and one array is refused whole.
	if _, err := client(follower).SubmitJobs(ctx, []api.JobSpec{{Name: "held-plain", Command: []string{"true"}}, arrayJob}); !errors.Is(err, &api.Error{Code: api.CodeFeatureHeld}) {
		t.Fatalf("a batch with an array: %v", err)
	}
	// A command of a held kind is refused by cluster.Node.Apply itself,
	// on the leader and on a follower, before anything is proposed.
	down, err := fsm.NewCommand(fsm.CmdNodeStates, time.Now(), fsm.SetNodeStates{States: []fsm.SetNodeState{{Name: follower.Name, Eligibility: fsm.Ineligible}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, nd := range []*clustertest.Node{leader, follower} {
		if _, err := nd.Apply(ctx, down); !errors.Is(err, fsm.ErrFeatureHeld) || !strings.Contains(err.Error(), "node_states: server "+oldName) {
			t.Fatalf("node_states through %s: %v", nd.Name, err)
		}
	}
	plain, err := client(follower).SubmitJob(ctx, api.JobSpec{Name: "plain", Command: []string{"true"}})
	if err != nil {
		t.Fatalf("a plain submit during the upgrade: %v", err)
	}
	// The plain job is applied everywhere; nothing of the refused ones is.
	c.WaitConverged()
	for _, nd := range c.Nodes() {
		if err := nd.FSM.View(func(tx *fsm.Tx) error {
			jobs, _, err := tx.ListJobs(fsm.JobQuery{})
			if err != nil {
				return err
			}
			if nd, err := tx.Node(follower.Name); err != nil || nd.Eligibility == fsm.Ineligible {
				return fmt.Errorf("the refused node_states applied: %+v (%v)", nd, err)
			}
			if len(jobs) != 1 || jobs[0].ID != plain.ID {
				var names []string
				for _, j := range jobs {
					names = append(names, j.Spec.Name)
				}
				return fmt.Errorf("jobs %v, want only the plain one", names)
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", nd.Name, err)
		}
	}
	info, err := client(leader).Raft(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string][]string{}
	for _, h := range info.Features.Held {
		held[h.Name] = h.Lacking
	}
	if got := held["array"]; len(got) != 1 || got[0] != oldName+" (foreman test)" || len(info.Features.Enabled) != 0 {
		t.Fatalf("cluster raft features %+v, want array held by %s only", info.Features, oldName)
	}
	for _, s := range info.Servers {
		if want := s.ID != oldName; (len(s.Features) == len(fsm.Features)) != want || s.Version != "test" {
			t.Errorf("server %s: version %q features %v", s.ID, s.Version, s.Features)
		}
	}

	// The old server is upgraded (restarted advertising every feature).
	oldBuild.Store(false)
	c.Restart(old)
	c.Eventually(clustertest.ConvergeTimeout, "every feature enabled on "+leader.Name, func() error {
		if got := leader.FeatureGate().Enabled(); got != fsm.KnownFeatures {
			return fmt.Errorf("enabled %v", got.Names())
		}
		return nil
	})
	res, err := client(leader).SubmitJob(ctx, arrayJob)
	if err != nil {
		t.Fatalf("array submit once every server has it: %v", err)
	}
	c.WaitConverged()
	for _, nd := range c.Nodes() {
		if err := nd.FSM.View(func(tx *fsm.Tx) error {
			j, err := tx.Job(res.ID)
			if err == nil && j.Spec.Array == nil {
				err = errors.New("stored without its array")
			}
			return err
		}); err != nil {
			t.Fatalf("%s: %v", nd.Name, err)
		}
	}
	// Each node's view follows its own gossip: the follower's too, soon.
	c.Eventually(clustertest.ConvergeTimeout, "nothing held on "+follower.Name, func() error {
		info, err := client(follower).Raft(ctx)
		if err == nil && (len(info.Features.Held) != 0 || len(info.Features.Enabled) != len(fsm.Features)) {
			err = fmt.Errorf("features %+v", info.Features)
		}
		return err
	})
}
