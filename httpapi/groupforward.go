package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/foreman-sched/foreman/fsm"
)

// Submits that reach a follower are parsed and validated there (the same
// code and errors as on the leader), then go through the follower's own
// group commit: one POST /v1/internal/submits to the leader carries every
// submit that arrived while the previous one was on its way. The leader
// feeds the members into its group commit, so they share raft entries with
// its local submits, and answers each member on its own. The leader still
// checks placeability, mints the IDs and stamps the time.
//
// Compared with proxying each request, the leader parses one request per
// group instead of one per client, and the follower keeps one connection
// busy instead of one per client.

// submitsPath is the node-to-node endpoint a follower forwards submit
// groups to. It is not for clients (see docs/api.md).
const submitsPath = ForwardedSubmitsPath

// ForwardedSubmitsPath is under /v1/internal/ with the other node-to-node
// endpoints, so whatever guards those guards it too; the agent routes it to
// this package rather than to cluster.
const ForwardedSubmitsPath = "/v1/internal/submits"

// headerRequestIDs carries the members' request IDs, space-separated in
// member order (an ID never holds a space: requestid.go), so the leader's
// log lines about each member name the client's request, not only the
// group's.
const headerRequestIDs = "X-Foreman-Request-IDs"

// headerBatches says, one character per member ('0' single, '1' batch),
// how each forwarded member names fields in its errors.
const headerBatches = "X-Foreman-Batches"

// forwardedMember is one member's answer from the leader.
type forwardedMember struct {
	Jobs   []fsm.SubmitResult `json:"jobs,omitempty"`
	Status int                `json:"status,omitempty"` // with Error: the HTTP status the leader gave it
	Code   string             `json:"code,omitempty"`
	Error  string             `json:"error,omitempty"`
}

// forwardedReply is the body of a 200 from submitsPath.
type forwardedReply struct {
	Node    string            `json:"node"` // the leader that answered
	Submits []forwardedMember `json:"submits"`
}

// remoteError is an error the leader gave a forwarded member; the follower
// answers with the same status and code.
type remoteError struct {
	status int
	code   string
	msg    string
}

func (e *remoteError) Error() string { return e.msg }

// forward sends a group of submits that reached this follower to the
// leader and hands every member its answer. Members that were themselves
// forwarded here are never forwarded again.
func (g *groupCommit) forward(group []*pendingSubmit) {
	defer func() {
		g.logOutcomes(group)
		for _, p := range group {
			close(p.done)
		}
	}()
	name, addr := g.s.cluster.Leader()
	gate := g.s.cluster.FeatureGate()
	members := group[:0:0]
	for _, p := range group {
		held := gate.Check(fsm.JobsNeed(p.jobs))
		switch {
		case held != nil:
			// Refused here too: a leader of an older build would drop
			// the fields it does not know and commit plain jobs.
			p.err = held
		case p.forwarded:
			p.err = fmt.Errorf("%w: submits were forwarded here but this node (%s) is not the leader (it thinks %s is); retry", ErrLoop, g.s.cluster.NodeName(), name)
		case addr == "":
			p.err = fmt.Errorf("%w: this node (%s) is not the leader and no leader is known; retry shortly", ErrNoLeader, g.s.cluster.NodeName())
		default:
			members = append(members, p)
		}
	}
	if len(members) == 0 {
		return
	}
	payload := fsm.SubmitGroup{Submits: make([]fsm.SubmitJobs, len(members))}
	var batches, ids strings.Builder
	for i, p := range members {
		payload.Submits[i].Jobs = p.jobs
		if i > 0 {
			ids.WriteByte(' ')
		}
		ids.WriteString(p.reqID)
		if p.batch {
			batches.WriteByte('1')
		} else {
			batches.WriteByte('0')
		}
	}
	reply, err := g.post(name, addr, payload, batches.String(), ids.String())
	if err == nil && len(reply.Submits) != len(members) {
		err = fmt.Errorf("%w: %s answered %d submits for %d", ErrUnreachable, name, len(reply.Submits), len(members))
	}
	if err != nil {
		for _, p := range members {
			p.err = err
		}
		return
	}
	for i, p := range members {
		m := reply.Submits[i]
		p.node = reply.Node
		if m.Error != "" || m.Status != 0 {
			p.err = &remoteError{status: m.Status, code: m.Code, msg: m.Error}
			continue
		}
		p.res, p.err = checkResults(p.jobs, m.Jobs)
	}
}

// post sends one group to the leader. The payload travels as an encoded
// fsm command (CBOR: cheaper than JSON to write and to read); the leader
// only reads its members and stamps its own time and IDs.
func (g *groupCommit) post(name, addr string, payload fsm.SubmitGroup, batches, reqIDs string) (*forwardedReply, error) {
	cmd, err := fsm.NewCommand(fsm.CmdSubmitGroup, g.s.clock.Now(), payload)
	if err != nil {
		return nil, err
	}
	body, err := cmd.Encode()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.s.cfg.ApplyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.s.scheme+"://"+addr+submitsPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/cbor")
	req.Header.Set(HeaderForwarded, "1")
	req.Header.Set(headerBatches, batches)
	req.Header.Set(headerRequestIDs, reqIDs)
	if s := g.s.acl.InternalSecret(); s != "" {
		req.Header.Set(HeaderInternalToken, s) // the members were authorized here
	}
	resp, err := g.s.transport.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %s at %s: %v", ErrUnreachable, name, addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: %s at %s: %v", ErrUnreachable, name, addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		var eb ErrorBody
		if json.Unmarshal(b, &eb) == nil && eb.Error != "" {
			return nil, &remoteError{status: resp.StatusCode, code: eb.Code, msg: eb.Error}
		}
		return nil, fmt.Errorf("%w: %s at %s: HTTP %d", ErrUnreachable, name, addr, resp.StatusCode)
	}
	var reply forwardedReply
	if err := json.Unmarshal(b, &reply); err != nil {
		return nil, fmt.Errorf("%w: %s at %s: decoding the reply: %v", ErrUnreachable, name, addr, err)
	}
	return &reply, nil
}

// forwardedSubmits serves POST /v1/internal/submits on the leader: the
// members join this node's group commit and each gets its own answer.
func (s *server) forwardedSubmits(w http.ResponseWriter, r *http.Request) {
	if !s.cluster.IsLeader() {
		name, _ := s.cluster.Leader()
		s.writeError(w, r, fmt.Errorf("%w: submits were forwarded here but this node (%s) is not the leader (it thinks %s is); retry", ErrLoop, s.cluster.NodeName(), name))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4*s.cfg.MaxBodyBytes))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var p fsm.SubmitGroup
	cmd, err := fsm.DecodeCommand(body)
	if err == nil && cmd.Type != fsm.CmdSubmitGroup {
		err = fmt.Errorf("%w: %s, want %s", fsm.ErrBadCommand, cmd.Type, fsm.CmdSubmitGroup)
	}
	if err == nil {
		err = cmd.DecodePayload(&p)
	}
	batches := r.Header.Get(headerBatches)
	if err == nil && len(batches) != len(p.Submits) {
		err = fmt.Errorf("%w: %s names %d members, the body has %d", fsm.ErrBadCommand, headerBatches, len(batches), len(p.Submits))
	}
	if err != nil {
		s.writeError(w, r, invalid("body", "%v", err))
		return
	}
	// Members keep their clients' request IDs; a follower that sends none
	// (or a count that does not match) leaves them to the group's.
	reqIDs := strings.Fields(r.Header.Get(headerRequestIDs))
	if len(reqIDs) != len(p.Submits) {
		reqIDs = nil
	}
	// Each member is admitted on its own (overload.go): a refused one gets
	// its 429 in the reply and changed nothing; the others go on.
	pending := make([]*pendingSubmit, len(p.Submits))
	var admitted []*pendingSubmit
	for i, m := range p.Submits {
		for k := range m.Jobs {
			m.Jobs[k].ID = "" // the leader mints IDs
		}
		ps := &pendingSubmit{jobs: m.Jobs, batch: batches[i] == '1', forwarded: true, reqID: RequestIDFrom(r.Context()), done: make(chan struct{})}
		if reqIDs != nil && len(reqIDs[i]) <= 128 && printableASCII(reqIDs[i]) {
			ps.reqID = reqIDs[i]
		}
		pending[i] = ps
		release, err := s.admit(len(m.Jobs))
		if err != nil {
			ps.err = err
			close(ps.done)
			continue
		}
		defer release()
		admitted = append(admitted, ps)
	}
	s.submits.queue.Add(admitted...)
	reply := forwardedReply{Node: s.cluster.NodeName(), Submits: make([]forwardedMember, len(pending))}
	for i, ps := range pending {
		select {
		case <-ps.done:
		case <-r.Context().Done():
			return // the follower gave up; the group goes on
		}
		if ps.err != nil {
			status, code := statusFor(ps.err)
			msg := ps.err.Error()
			var re *remoteError
			if errors.As(ps.err, &re) {
				status, code = re.status, re.code
			}
			reply.Submits[i] = forwardedMember{Status: status, Code: code, Error: msg}
			continue
		}
		reply.Submits[i] = forwardedMember{Jobs: ps.res}
	}
	writeJSON(w, http.StatusOK, reply)
}
