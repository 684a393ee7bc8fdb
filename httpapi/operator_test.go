package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/foreman-sched/foreman/fsm"
)

// fakeOperator serves a fixed snapshot file and records what it was asked.
type fakeOperator struct {
	file []byte
	err  error // returned by every call when set

	mu       sync.Mutex
	restored []byte
	force    bool
	removed  string
	to       string
}

type fakeSnapshot struct{ file []byte }

func (s fakeSnapshot) Header() fsm.BackupHeader { return fsm.BackupHeader{Index: 42, Term: 3} }
func (s fakeSnapshot) Size() int64              { return int64(len(s.file)) }
func (s fakeSnapshot) Write(w io.Writer) error  { _, err := w.Write(s.file); return err }
func (s fakeSnapshot) Close() error             { return nil }

func (o *fakeOperator) SaveSnapshot(context.Context) (Snapshot, error) {
	if o.err != nil {
		return nil, o.err
	}
	return fakeSnapshot{o.file}, nil
}

func (o *fakeOperator) RestoreSnapshot(_ context.Context, r io.Reader, force bool) (*RestoreResponse, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.restored, o.force = b, force
	if o.err != nil {
		return nil, o.err
	}
	return &RestoreResponse{Index: 100, DeadNodes: []string{"old1"}}, nil
}

func (o *fakeOperator) RemovePeer(_ context.Context, name string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.removed = name
	return o.err
}

func (o *fakeOperator) TransferLeadership(_ context.Context, to string) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.to = to
	if o.err != nil {
		return "", o.err
	}
	return "n9", nil
}

// operatorPair is a leader with ops and a follower that proxies to it.
func operatorPair(t *testing.T, ops *fakeOperator) (leader, follower *testAPI) {
	leader = newTestAPIWith(t, openFSM(t), "n1", true, ops)
	follower = newTestAPIWith(t, openFSM(t), "n2", false, &fakeOperator{err: errors.New("the follower must not serve this")})
	follower.cluster.leaderName = "n1"
	follower.cluster.leaderAddr = strings.TrimPrefix(leader.srv.URL, "http://")
	return leader, follower
}

func TestOperatorRequestsGoToTheLeader(t *testing.T) {
	file := bytes.Repeat([]byte("snapshot-bytes "), 700_000) // 10.5 MB: over MaxBodyBytes, streamed
	ops := &fakeOperator{file: file}
	_, follower := operatorPair(t, ops)
	ctx := context.Background()

	var got bytes.Buffer
	n, err := follower.client.SaveSnapshot(ctx, &got)
	if err != nil || n != int64(len(file)) || !bytes.Equal(got.Bytes(), file) {
		t.Fatalf("save through the follower: %d bytes, %v", n, err)
	}
	res, err := follower.client.RestoreSnapshot(ctx, bytes.NewReader(file), true)
	if err != nil || res.Index != 100 || !bytes.Equal(ops.restored, file) || !ops.force {
		t.Fatalf("restore through the follower: %+v, %v (force %v, %d bytes arrived)", res, err, ops.force, len(ops.restored))
	}
	if err := follower.client.RemovePeer(ctx, "node 3"); err != nil || ops.removed != "node 3" {
		t.Fatalf("remove-peer: %v (removed %q)", err, ops.removed)
	}
	if leader, err := follower.client.TransferLeadership(ctx, "n9"); err != nil || leader != "n9" || ops.to != "n9" {
		t.Fatalf("transfer: %q, %v (to %q)", leader, err, ops.to)
	}
}

func TestOperatorErrors(t *testing.T) {
	cases := []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("%w: checksum mismatch", fsm.ErrBadBackup), http.StatusBadRequest, CodeBadSnapshot},
		{fmt.Errorf("%w: schema 9", fsm.ErrBackupVersion), http.StatusBadRequest, CodeNewerSnapshot},
		{fmt.Errorf("%w: would lose quorum", ErrRefused), http.StatusConflict, CodeRefused},
		{fmt.Errorf("no such raft server: %w", fsm.ErrNotFound), http.StatusNotFound, CodeNotFound},
		{fmt.Errorf("%w: leadership moved", ErrNoLeader), http.StatusServiceUnavailable, CodeNoLeader},
	}
	for _, tc := range cases {
		t.Run(tc.code, func(t *testing.T) {
			leader, _ := operatorPair(t, &fakeOperator{err: tc.err})
			for _, req := range [][2]string{
				{"GET", "/v1/operator/snapshot"}, {"PUT", "/v1/operator/snapshot"},
				{"DELETE", "/v1/cluster/raft/peers/x"}, {"POST", "/v1/cluster/raft/transfer-leadership"},
			} {
				code, body := leader.do(req[0], req[1], "")
				if e := errorOf(t, body); code != tc.status || e.Code != tc.code || !strings.Contains(e.Error, tc.err.Error()) {
					t.Fatalf("%s %s: %d %s, want %d %s", req[0], req[1], code, body, tc.status, tc.code)
				}
			}
		})
	}
	leader, _ := operatorPair(t, &fakeOperator{})
	if code, body := leader.do("PUT", "/v1/operator/snapshot?force=maybe", ""); code != http.StatusBadRequest || !strings.Contains(body, "force") {
		t.Fatalf("bad force: %d %s", code, body)
	}
	if code, body := leader.do("POST", "/v1/cluster/raft/transfer-leadership", `{"too":"x"}`); code != http.StatusBadRequest || !strings.Contains(body, "too") {
		t.Fatalf("unknown field: %d %s", code, body)
	}
	bare := newTestAPI(t)
	if code, body := bare.do("GET", "/v1/operator/snapshot", ""); code != http.StatusServiceUnavailable || errorOf(t, body).Code != CodeUnavailable {
		t.Fatalf("no operator: %d %s", code, body)
	}
}
