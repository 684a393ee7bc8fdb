package cluster

import (
	"net"
	"testing"

	"github.com/hashicorp/memberlist"

	"github.com/foreman-sched/foreman/fsm"
)

// A member's gossiped sync state changes every second under load; only
// changes the reconcile loop reads wake it.
func TestMemberTableWakesReconcileOnlyForWhatItReads(t *testing.T) {
	tbl := newMemberTable()
	update := func(m nodeMeta) bool {
		t.Helper()
		b, err := m.encode()
		if err != nil {
			t.Fatal(err)
		}
		select { // drain an earlier signal
		case <-tbl.changed:
		default:
		}
		tbl.set(&memberlist.Node{Name: "n1", Addr: net.ParseIP("127.0.0.1"), Port: 7946, Meta: b}, fsm.NodeAlive)
		select {
		case <-tbl.changed:
			return true
		default:
			return false
		}
	}
	m := nodeMeta{HTTPAddr: "127.0.0.1:7070", RaftAddr: "127.0.0.1:7071", CPU: 1000, Labels: map[string]string{"zone": "a"}}
	if !update(m) {
		t.Fatal("a new member did not wake reconcile")
	}
	m.Applied, m.Behind = 42, true
	if update(m) {
		t.Fatal("a sync-state change woke reconcile")
	}
	if got, _ := tbl.get("n1"); got.Applied != 42 || !got.Behind {
		t.Fatalf("sync state not kept: %+v", got)
	}
	m.Labels = map[string]string{"zone": "b"}
	if !update(m) {
		t.Fatal("a label change did not wake reconcile")
	}
	if update(m) {
		t.Fatal("the same description woke reconcile again")
	}
}
