package fsm

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CmdResetGPUs is an operator's health reset of a node's GPUs (issue 24):
// `foreman node gpu-reset`.
const CmdResetGPUs CommandType = "reset_gpus" // ResetGPUs

// NameGPUReset is the node event of a health reset: Reason names the
// devices and who asked.
const NameGPUReset = "gpu_reset"

// ResetGPUs asks node Name to forget the XID faults of the devices UUIDs
// (none: every device its record shows unhealthy). The record keeps the
// request as Node.GPUReset; the node's agent, which holds the XID health
// (it is the node's own observation), sees it in its state (a server) or
// on its work stream (a client), clears those devices' faults and detects
// again, so the record turns healthy by the node's own publish, not by
// fiat: a device the driver still excludes stays unhealthy.
type ResetGPUs struct {
	Name  string   `json:"name"`
	UUIDs []string `json:"uuids,omitempty"`
	By    string   `json:"by,omitempty"` // who asked, for the event
}

// GPUReset is the last health reset of a node's GPUs.
type GPUReset struct {
	Index uint64    `json:"index"` // the raft index that recorded it: agents act once per index
	UUIDs []string  `json:"uuids"`
	By    string    `json:"by,omitempty"`
	At    time.Time `json:"at"`
}

func (a *applier) resetGPUs(p *ResetGPUs, res *Result) error {
	if err := validKey("name", p.Name, maxIDLen); err != nil {
		return err
	}
	if len(p.By) > 256 {
		return fmt.Errorf("%w: by: %d bytes, at most 256", ErrBadCommand, len(p.By))
	}
	n, err := a.getNode(p.Name)
	if err != nil {
		return err
	}
	uuids := p.UUIDs
	for i, u := range uuids {
		if !slices.ContainsFunc(n.GPUs, func(g GPU) bool { return g.UUID == u }) {
			return fmt.Errorf("%w: uuids[%d]: node %s has no GPU %q", ErrBadCommand, i, n.Name, u)
		}
		if slices.Contains(uuids[:i], u) {
			return fmt.Errorf("%w: uuids[%d]: %s named twice", ErrBadCommand, i, u)
		}
	}
	if len(uuids) == 0 {
		for _, g := range n.GPUs {
			if !g.Healthy() {
				uuids = append(uuids, g.UUID)
			}
		}
	}
	if len(uuids) == 0 {
		return nil // nothing unhealthy: nothing to tell the node
	}
	n.GPUReset = &GPUReset{Index: a.index, UUIDs: uuids, By: p.By, At: a.at}
	if err := a.saveNode(n, NameUpdated); err != nil {
		return err
	}
	var what []string
	for _, u := range uuids {
		for _, g := range n.GPUs {
			if g.UUID == u {
				what = append(what, u+" (index "+strconv.Itoa(g.Index)+")")
			}
		}
	}
	r := "health reset of " + strings.Join(what, ", ")
	if p.By != "" {
		r += " by " + p.By
	}
	a.emit(Event{Type: EventNode, Name: NameGPUReset, Node: n.Name, State: string(n.Gossip), Reason: r})
	return nil
}
