package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/api"
)

// followerOf starts a follower API node with its own (empty) FSM whose
// cluster names leader as the leader. An empty FSM makes it visible when a
// read was served locally instead of by the leader.
func followerOf(t *testing.T, leader *testAPI) *testAPI {
	t.Helper()
	f := newTestAPIOn(t, openFSM(t), "n2", false)
	f.cluster.leaderName = leader.cluster.name
	f.cluster.leaderAddr = strings.TrimPrefix(leader.srv.URL, "http://")
	return f
}

func TestFollowerProxiesWrites(t *testing.T) {
	leader := newTestAPI(t)
	follower := followerOf(t, leader)
	ctx := context.Background()

	id, dup, err := submitJob(ctx, follower.client, JobSpecInput{Command: Argv("true")}, "k1")
	if err != nil || dup {
		t.Fatalf("submit via follower: %v", err)
	}
	if got := leader.job(id); got.IdempotencyKey != "k1" {
		t.Fatalf("job on the leader: %+v", got)
	}
	if follower.f.AppliedIndex() != 0 {
		t.Fatal("the follower applied a write itself")
	}
	req, _ := http.NewRequest("POST", follower.srv.URL+"/v1/jobs", strings.NewReader(`{"command":"true"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Values(HeaderNode); len(got) != 1 || got[0] != "n1" {
		t.Fatalf("%s = %v, want the leader that answered", HeaderNode, got)
	}
	// Idempotency still holds through the proxy: the leader dedupes.
	id2, dup, err := submitJob(ctx, follower.client, JobSpecInput{Command: Argv("true")}, "k1")
	if err != nil || !dup || id2 != id {
		t.Fatalf("duplicate via follower: %s %v %v", id2, dup, err)
	}
	// A validation error from the leader comes back unchanged.
	_, _, err = submitJob(ctx, follower.client, JobSpecInput{Command: Argv("true"), Priority: new(int(900))}, "")
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, "priority") {
		t.Fatalf("proxied validation error: %v", err)
	}
	// Cancel goes through the proxy too.
	d, err := follower.client.CancelJob(ctx, id, "")
	if err != nil || d.Job.State != api.JobCancelled {
		t.Fatalf("cancel via follower: %+v %v", d, err)
	}
}

func TestFollowerWithoutLeader(t *testing.T) {
	leader := newTestAPI(t)
	follower := followerOf(t, leader)
	follower.cluster.leaderName, follower.cluster.leaderAddr = "", ""
	code, body := follower.do("POST", "/v1/jobs", `{"command":"true"}`)
	if code != http.StatusServiceUnavailable || errorOf(t, body).Code != CodeNoLeader {
		t.Fatalf("no leader: %d %s, want 503 no_leader", code, body)
	}
	code, body = follower.do("GET", "/v1/jobs?consistent=true", "")
	if code != http.StatusServiceUnavailable || errorOf(t, body).Code != CodeNoLeader {
		t.Fatalf("consistent read without leader: %d %s", code, body)
	}
	// Local reads still work.
	if code, body := follower.do("GET", "/v1/jobs", ""); code != http.StatusOK {
		t.Fatalf("local read: %d %s", code, body)
	}
}

// TestForwardLoop: a forwarded write that reaches a non-leader (leadership
// moved) is refused instead of forwarded again.
func TestForwardLoop(t *testing.T) {
	leader := newTestAPI(t)
	follower := followerOf(t, leader)
	code, body := follower.do("POST", "/v1/jobs", `{"command":"true"}`, HeaderForwarded, "1")
	if code != http.StatusServiceUnavailable || errorOf(t, body).Code != CodeNoLeader {
		t.Fatalf("forwarded to a follower: %d %s", code, body)
	}
	if leader.f.AppliedIndex() != 0 {
		t.Fatal("a looping write was applied")
	}
}

func TestUnreachableLeader(t *testing.T) {
	leader := newTestAPI(t)
	follower := followerOf(t, leader)
	leader.srv.Close()
	code, body := follower.do("POST", "/v1/jobs", `{"command":"true"}`)
	if code != http.StatusBadGateway || errorOf(t, body).Code != CodeUnreachable {
		t.Fatalf("leader down: %d %s, want 502", code, body)
	}
}

func TestConsistentRead(t *testing.T) {
	leader := newTestAPI(t)
	follower := followerOf(t, leader)
	ctx := context.Background()
	id := leader.submit(`{"command":"true"}`)

	// The follower's own state does not have the job yet.
	if _, err := jobDetail(ctx, follower.client, id); err == nil {
		t.Fatal("the follower's local state should not know the job")
	}
	d, err := jobDetail(ctx, follower.client.Consistent(), id)
	if err != nil || d.Job.ID != id {
		t.Fatalf("consistent read via follower: %+v %v", d, err)
	}
	if leader.cluster.consistent != 1 {
		t.Fatalf("leader ConsistentRead calls = %d, want 1", leader.cluster.consistent)
	}
	if _, err := leader.client.Consistent().ListJobs(ctx, api.JobQuery{}); err != nil {
		t.Fatal(err)
	}
	if leader.cluster.consistent != 2 {
		t.Fatalf("leader ConsistentRead calls = %d, want 2", leader.cluster.consistent)
	}
	leader.cluster.readErr = errors.Join(ErrNoLeader, errors.New("lost leadership"))
	code, body := leader.do("GET", "/v1/jobs/"+id+"?consistent=true", "")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("failed barrier: %d %s, want 503", code, body)
	}
}
