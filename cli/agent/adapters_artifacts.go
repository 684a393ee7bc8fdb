package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/foreman-sched/foreman/exec"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// workerArtifacts serves this node's artifacts to the API, mapping exec's
// "not here" onto fs.ErrNotExist (404).
type workerArtifacts struct{ w *exec.Worker }

func (a workerArtifacts) OpenArtifact(jobID string, attempt int, path string) (*os.File, error) {
	f, err := a.w.OpenArtifact(jobID, attempt, path)
	if errors.Is(err, exec.ErrNoSuchArtifact) && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	return f, err
}

// artifactFetcher fetches a parent's artifact for a child's inputs from
// the node that holds it, over that node's HTTP API (the same request a
// user's download is proxied as).
type artifactFetcher struct {
	f     *fsm.FSM
	token string
}

func (a artifactFetcher) FetchArtifact(ctx context.Context, node, jobID string, attempt int, path string, out io.Writer) error {
	var addr string
	var state fsm.GossipState
	err := a.f.View(func(tx *fsm.Tx) error {
		n, err := tx.Node(node)
		if err != nil {
			return err
		}
		addr, state = n.HTTPAddr, n.Gossip
		return nil
	})
	if err != nil {
		return fmt.Errorf("node %s: %w", node, err)
	}
	if addr == "" || state == fsm.NodeDead || state == fsm.NodeLeft {
		return fmt.Errorf("the only copy is on node %s, which is %s", node, state)
	}
	c, err := httpapi.NewClient(addr, httpapi.ClientOptions{Token: a.token})
	if err != nil {
		return err
	}
	_, err = c.GetArtifact(ctx, jobID, attempt, path, out)
	return err
}

// nodeUsage reads this node's jobs cgroup for GET /v1/nodes/{name}/usage.
type nodeUsage struct{}

func (nodeUsage) NodeUsage(node string) (cpuSeconds, memBytes float64, cpuOK, memOK bool) {
	return exec.NodeUsage(node)
}
