package agent

import (
	"context"
	"errors"
	"io"

	"github.com/foreman-sched/foreman/cluster"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// operatorAdapter turns cluster.Node into httpapi.Operator, mapping the
// cluster's refusals onto the API's errors.
type operatorAdapter struct{ n *cluster.Node }

func (o operatorAdapter) SaveSnapshot(ctx context.Context) (httpapi.Snapshot, error) {
	b, err := o.n.SaveSnapshot(ctx)
	if err != nil {
		return nil, operatorErr(err)
	}
	return b, nil
}

func (o operatorAdapter) RestoreSnapshot(ctx context.Context, r io.Reader, force bool) (*httpapi.RestoreResponse, error) {
	res, err := o.n.RestoreSnapshot(ctx, r, cluster.RestoreOptions{Force: force})
	if err != nil {
		return nil, operatorErr(err)
	}
	return &httpapi.RestoreResponse{Snapshot: res.Header, Index: res.Index, Replaced: res.Replaced, DeadNodes: res.DeadNodes}, nil
}

func (o operatorAdapter) RemovePeer(ctx context.Context, name string) error {
	return operatorErr(o.n.RemovePeer(ctx, name))
}

func (o operatorAdapter) TransferLeadership(ctx context.Context, to string) (string, error) {
	leader, err := o.n.TransferLeadership(ctx, to)
	return leader, operatorErr(err)
}

// operatorErr keeps the cluster's message and adds the API's kind, which
// picks the status (httpapi's statusFor).
func operatorErr(err error) error {
	var kind error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cluster.ErrNotLeader), errors.Is(err, cluster.ErrNoLeader):
		kind = httpapi.ErrNoLeader
	case errors.Is(err, cluster.ErrNotEmpty), errors.Is(err, cluster.ErrRefused), errors.Is(err, cluster.ErrNothingToSave):
		kind = httpapi.ErrRefused
	case errors.Is(err, cluster.ErrUnknownServer):
		kind = fsm.ErrNotFound
	case errors.Is(err, cluster.ErrIndeterminate), errors.Is(err, cluster.ErrShutdown):
		kind = httpapi.ErrUnavailable
	default:
		return err
	}
	return kindError{err: err, kind: kind}
}

// kindError is err, also matching kind with errors.Is.
type kindError struct{ err, kind error }

func (e kindError) Error() string   { return e.err.Error() }
func (e kindError) Unwrap() []error { return []error{e.err, e.kind} }

// keyringAdapter turns cluster.Node's keyring rotation into
// httpapi.GossipKeyring.
type keyringAdapter struct{ n *cluster.Node }

func (k keyringAdapter) GossipKeyringAll(ctx context.Context, op, key string) ([]httpapi.NodeGossipKeys, error) {
	nodes, err := k.n.GossipKeyringAll(ctx, op, key)
	switch {
	case errors.Is(err, cluster.ErrBadKey):
		return nil, kindError{err: err, kind: httpapi.ErrBadGossipKey}
	case errors.Is(err, cluster.ErrKeyring), errors.Is(err, cluster.ErrGossipPlain):
		return nil, kindError{err: err, kind: httpapi.ErrRefused}
	case err != nil:
		return nil, err
	}
	out := make([]httpapi.NodeGossipKeys, 0, len(nodes))
	for _, n := range nodes {
		v := httpapi.NodeGossipKeys{Node: n.Node, Error: n.Error}
		for _, g := range n.Keys {
			v.Keys = append(v.Keys, httpapi.GossipKey{Fingerprint: g.Fingerprint, Primary: g.Primary})
		}
		out = append(out, v)
	}
	return out, nil
}
