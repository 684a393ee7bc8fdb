package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/foreman-sched/foreman/cluster/clustertest"
	"github.com/foreman-sched/foreman/fsm"
)

// applyTimeout bounds one write in tests (elections included).
const applyTimeout = 20 * time.Second

// submit commits one job through node and returns its ID.
func submit(t testing.TB, nd *clustertest.Node) string {
	t.Helper()
	id, err := trySubmit(nd)
	if err != nil {
		t.Fatalf("submit through %s: %v", nd.Name, err)
	}
	return id
}

func trySubmit(nd *clustertest.Node) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
	defer cancel()
	return trySubmitCtx(ctx, nd)
}

func trySubmitCtx(ctx context.Context, nd *clustertest.Node) (string, error) {
	id := ulid.Make().String()
	cmd, err := fsm.NewCommand(fsm.CmdSubmitJobs, time.Now(), fsm.SubmitJobs{Jobs: []fsm.NewJob{{
		ID: id, Spec: fsm.JobSpec{Command: []string{"true"}},
	}}})
	if err != nil {
		return "", err
	}
	res, err := nd.Apply(ctx, cmd)
	if err != nil {
		return "", err
	}
	if len(res.Jobs) != 1 || res.Jobs[0].ID != id {
		return "", fmt.Errorf("unexpected result %+v", res)
	}
	return id, nil
}

// hasJob reports whether nd's local FSM holds job id.
func hasJob(nd *clustertest.Node, id string) error {
	return nd.FSM.View(func(tx *fsm.Tx) error {
		j, err := tx.Job(id)
		if err != nil {
			return fmt.Errorf("%s: job %s: %w", nd.Name, id, err)
		}
		if j == nil {
			return fmt.Errorf("%s: job %s missing", nd.Name, id)
		}
		return nil
	})
}

func nodeRecord(nd *clustertest.Node, name string) (*fsm.Node, error) {
	var out *fsm.Node
	err := nd.FSM.View(func(tx *fsm.Tx) (err error) { out, err = tx.Node(name); return err })
	if err == nil && out == nil {
		err = fmt.Errorf("node %s: %w", name, fsm.ErrNotFound)
	}
	return out, err
}

func suffrageOf(nd *clustertest.Node, name string) string {
	for _, s := range nd.RaftInfo().Servers {
		if s.ID == name {
			return s.Suffrage
		}
	}
	return ""
}

var errNotYet = errors.New("not yet")
