package fsm

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// Held silence (issue 38). When many clients fall silent at once the
// leader's mass-silence guard holds their deaths (cluster/clientlive.go):
// their records stay alive, so a cut-off server does not fail thousands
// of jobs. But the fleet must not look healthy either, so the leader
// records the held set here, replacing it whole each time it changes: every
// server shows those clients as silent (GET /v1/nodes, the UI), and the
// scheduler places nothing on them. Only the shown state is changed; the
// record's gossip state, and so what happens to their attempts, is the
// guard's to decide.

// CmdSilentClients replaces the set of clients whose silence the leader holds.
const CmdSilentClients CommandType = "silent_clients" // SilentClients

// SilentClients is the whole held set (empty: none held).
type SilentClients struct {
	Clients []SilentClient `json:"clients,omitempty"`
}

// SilentClient is one client silent past DeadAfter whose death is held.
type SilentClient struct {
	Name  string    `json:"name"`
	Since time.Time `json:"since"` // the last the leader heard from it
}

// NameSilent is the node event of a client that became silent (held), and
// NameHeard of one that left the held set.
const (
	NameSilent = "silent"
	NameHeard  = "heard"
)

func (a *applier) silentClients(p *SilentClients, res *Result) error {
	for i, c := range p.Clients {
		if err := validKey(fmt.Sprintf("clients[%d].name", i), c.Name, maxIDLen); err != nil {
			return err
		}
		if i > 0 && p.Clients[i-1].Name >= c.Name {
			return fmt.Errorf("%w: clients[%d].name: %q is not after %q (sorted, each once)", ErrBadCommand, i, c.Name, p.Clients[i-1].Name)
		}
	}
	b, err := a.bucket(bucketSilent)
	if err != nil {
		return err
	}
	old := map[string]bool{}
	if err := b.ForEach(func(k, _ []byte) error { old[string(k)] = true; return nil }); err != nil {
		return err
	}
	kept := make(map[string]bool, len(p.Clients))
	for _, c := range p.Clients {
		kept[c.Name] = true
	}
	for _, k := range slices.Sorted(maps.Keys(old)) {
		if kept[k] {
			continue
		}
		if err := a.del(b, []byte(k)); err != nil {
			return err
		}
		a.emit(Event{Type: EventNode, Name: NameHeard, Node: k})
	}
	for _, c := range p.Clients {
		if err := a.put(b, []byte(c.Name), []byte(rfc3339Text(c.Since))); err != nil {
			return err
		}
		if !old[c.Name] {
			a.emit(Event{Type: EventNode, Name: NameSilent, Node: c.Name})
		}
	}
	return nil
}

// SilentClients is the held set: client name → since when it was silent.
func (t *Tx) SilentClients() (map[string]time.Time, error) {
	b := t.tx.Bucket(bucketSilent)
	if b == nil {
		return nil, nil
	}
	out := map[string]time.Time{}
	err := b.ForEach(func(k, v []byte) error {
		at, err := time.Parse(time.RFC3339Nano, string(v))
		if err != nil {
			return fmt.Errorf("%w: silent client %q: %v", ErrCorrupt, k, err)
		}
		out[string(k)] = at
		return nil
	})
	return out, err
}
