package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/cluster/clustertest"
	"github.com/foreman-sched/foreman/fsm"
)

func twoGPUs() []fsm.GPU {
	return []fsm.GPU{
		{UUID: "GPU-aaaaaaaa", Index: 0, Minor: 0, Model: "NVIDIA H100", Links: []string{"X", "NV4"}},
		{UUID: "GPU-bbbbbbbb", Index: 1, Minor: 1, Model: "NVIDIA H100", Links: []string{"NV4", "X"}},
	}
}

// A raft member's devices go to the leader in NodeGPUs (gossip cannot
// carry them); its gpu count in gossip. The leader's later gossip upserts
// of that node keep the devices.
func TestServerGPUs(t *testing.T) {
	c := workCluster(t, cluster.DefaultConfig().WorkStreams)
	leader := c.WaitForLeader()
	var f *clustertest.Node
	for _, nd := range c.Nodes() {
		if nd.Name != leader.Name {
			f = nd
			break
		}
	}
	two := int64(2)
	c.Eventually(clustertest.ConvergeTimeout, "the follower's GPUs committed", func() error {
		return f.SetGPUs(context.Background(), twoGPUs(), "580.1", "13.0", fsm.GPUMemoryWatchReport, &two)
	})
	c.Eventually(clustertest.ConvergeTimeout, "the record has both the devices and the gossiped count", func() error {
		n, err := nodeRecord(leader, f.Name)
		if err != nil {
			return err
		}
		if len(n.GPUs) != 2 || n.GPUDriver != "580.1" || n.Capacity.Named["gpu"] != 2 {
			return fmt.Errorf("record: gpus %d driver %q capacity %v", len(n.GPUs), n.GPUDriver, n.Capacity.Named)
		}
		return nil
	})
}

// A client's hello carries its devices; a later hello on the same stream
// (its detection changed) updates them.
func TestClientHelloAgain(t *testing.T) {
	c := workCluster(t, cluster.DefaultConfig().WorkStreams)
	leader := c.WaitForLeader()
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	enc := json.NewEncoder(pw)
	self := fsm.Node{Name: "c1", HTTPAddr: "127.0.0.1:1", Capacity: fsm.Resources{CPU: 1000, MemoryMB: 1024, Named: map[string]int64{"gpu": 2}}, GPUs: twoGPUs()}
	go func() {
		_ = enc.Encode(cluster.UpFrame{Type: cluster.UpFrameHello, Node: &self})
		_ = enc.Encode(cluster.UpFrame{Type: cluster.UpFrameBeat, Seq: 1})
	}()
	url := fmt.Sprintf("http://127.0.0.1:%d%swork/c1?index=0", leader.Port, cluster.InternalPrefix)
	var resp *http.Response
	c.Eventually(clustertest.ConvergeTimeout, "the stream opens", func() error {
		req, _ := http.NewRequest(http.MethodPost, url, pr)
		var err error
		if resp, err = http.DefaultClient.Do(req); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return fmt.Errorf("%d %s", resp.StatusCode, b)
		}
		return nil
	})
	t.Cleanup(func() { resp.Body.Close() })
	go func() { _, _ = io.Copy(io.Discard, resp.Body) }()
	recorded := func(what string, ok func(*fsm.Node) bool) {
		t.Helper()
		c.Eventually(clustertest.ConvergeTimeout, what, func() error {
			n, err := nodeRecord(leader, "c1")
			if err != nil {
				return err
			}
			if !ok(n) {
				return fmt.Errorf("record %+v", n.GPUs)
			}
			return nil
		})
	}
	recorded("the hello's GPUs", func(n *fsm.Node) bool { return len(n.GPUs) == 2 && n.GPUs[1].Healthy() })
	changed := self
	changed.GPUs = twoGPUs()
	changed.GPUs[1].Health = "xid 79"
	changed.Capacity.Named = map[string]int64{"gpu": 1}
	go func() {
		_ = enc.Encode(cluster.UpFrame{Type: cluster.UpFrameHello, Node: &changed})
		for seq := uint64(2); ; seq++ {
			if enc.Encode(cluster.UpFrame{Type: cluster.UpFrameBeat, Seq: seq}) != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	recorded("the second hello's health", func(n *fsm.Node) bool {
		return len(n.GPUs) == 2 && n.GPUs[1].Health == "xid 79" && n.Capacity.Named["gpu"] == 1
	})
}
