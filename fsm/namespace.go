package fsm

import (
	"fmt"
	"slices"
	"strings"
)

// Namespace objects (issue 16): a namespace exists as soon as a job names
// it; a Namespace record only adds a quota and a policy to it. A namespace
// without a record has neither (no quota, every driver, root as the nodes
// allow). Records are keyed by the namespace's display name
// (NamespaceOf: "default" for the default namespace).
//
// The bucket is created by the first SetNamespace, not at Open, so a state
// that has never used namespace objects hashes as before they existed.
var bucketNamespaces = []byte("namespaces")

// Command types of namespace objects.
const (
	CmdSetNamespace    CommandType = "set_namespace"    // SetNamespace
	CmdDeleteNamespace CommandType = "delete_namespace" // DeleteNamespace
)

// MaxShare bounds Namespace.Share.
const MaxShare = 1_000_000

// MaxNamespaceDrivers bounds Namespace.Drivers.
const MaxNamespaceDrivers = 16

// Namespace is one namespace's quota and policy. Zero quota fields mean
// unlimited.
type Namespace struct {
	Name string `json:"name"`
	// Quota: the scheduler places a job only if the namespace's live jobs
	// (running, with their attempts' resources as placed: a gang counts
	// once for max_running and its size times for cpu and memory) plus the
	// job stay within every limit. A job over quota stays queued with a
	// reason; a gang is placed whole or not at all.
	MaxRunning  int   `json:"max_running,omitempty"`
	MaxCPU      int64 `json:"max_cpu,omitempty"`    // millicores
	MaxMemoryMB int64 `json:"max_memory,omitempty"` // MiB
	// Policy, checked by the API at submit (a 4xx naming the field):
	// Drivers lists the drivers the namespace's jobs may use (empty =
	// every driver); AllowRoot lets them name user root (uid 0), which
	// still runs only on nodes whose --job-users allow root.
	Drivers   []string `json:"drivers,omitempty"`
	AllowRoot bool     `json:"allow_root,omitempty"`
	// Volumes lists the host volumes the namespace's jobs may mount
	// (empty = every volume a node declares).
	Volumes []string `json:"volumes,omitempty"`
	// Share is the namespace's fair share (1..MaxShare; 0 = not set): among
	// jobs of equal priority the scheduler places next for the namespace
	// furthest below its share of recent and live allocation. Fair share
	// is on when any namespace sets one; the others then count as 1.
	Share int64 `json:"share,omitempty"`

	ModifyIndex uint64 `json:"modify_index,omitempty"`
}

// HasQuota reports whether any quota limit is set.
func (n *Namespace) HasQuota() bool {
	return n != nil && (n.MaxRunning > 0 || n.MaxCPU > 0 || n.MaxMemoryMB > 0)
}

// AllowsDriver reports whether the policy lets jobs use driver d.
func (n *Namespace) AllowsDriver(d string) bool {
	return n == nil || len(n.Drivers) == 0 || slices.Contains(n.Drivers, d)
}

// IsRootUser reports whether a job user spec (name or uid, optionally
// ":group") names the root user.
func IsRootUser(spec string) bool {
	name, _, _ := strings.Cut(spec, ":")
	return name == "root" || name == "0"
}

// SetNamespace creates or replaces a namespace's record.
type SetNamespace struct {
	Namespace Namespace `json:"namespace"`
}

// DeleteNamespace removes a namespace's record (its quota and policy);
// its jobs stay.
type DeleteNamespace struct {
	Name string `json:"name"`
}

func validNamespace(n *Namespace) error {
	if err := validKey("namespace.name", n.Name, maxKeyLen); err != nil {
		return err
	}
	if n.MaxRunning < 0 || n.MaxCPU < 0 || n.MaxMemoryMB < 0 {
		return fmt.Errorf("%w: namespace quota: negative limit (max_running %d, max_cpu %d, max_memory %d)", ErrBadCommand, n.MaxRunning, n.MaxCPU, n.MaxMemoryMB)
	}
	if n.Share < 0 || n.Share > MaxShare {
		return fmt.Errorf("%w: namespace.share: must be between 1 and %d, or 0 for none (got %d)", ErrBadCommand, MaxShare, n.Share)
	}
	if len(n.Drivers) > MaxNamespaceDrivers {
		return fmt.Errorf("%w: namespace.drivers: %d entries (at most %d)", ErrBadCommand, len(n.Drivers), MaxNamespaceDrivers)
	}
	for _, d := range n.Drivers {
		if err := validKey("namespace.drivers", d, maxKeyLen); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) setNamespace(p *SetNamespace, _ *Result) error {
	n := p.Namespace
	if err := validNamespace(&n); err != nil {
		return err
	}
	b, err := a.bucket(bucketNamespaces)
	if err != nil {
		return err
	}
	n.ModifyIndex = a.index
	return a.putRecord(b, []byte(n.Name), n)
}

func (a *applier) deleteNamespace(p *DeleteNamespace, _ *Result) error {
	if err := validKey("name", p.Name, maxKeyLen); err != nil {
		return err
	}
	b := a.tx.Bucket(bucketNamespaces)
	if b == nil || b.Get([]byte(p.Name)) == nil {
		return fmt.Errorf("%w: namespace %q has no quota or policy", ErrNotFound, p.Name)
	}
	return a.del(b, []byte(p.Name))
}

// Namespace returns the record of namespace ns (display or stored name),
// or nil when it has none.
func (t *Tx) Namespace(ns string) (*Namespace, error) {
	b := t.tx.Bucket(bucketNamespaces)
	if b == nil {
		return nil, nil
	}
	v := b.Get([]byte(NamespaceOf(ns)))
	if v == nil {
		return nil, nil
	}
	return decoded[Namespace](v)
}

// Namespaces lists every namespace record by name.
func (t *Tx) Namespaces() ([]Namespace, error) {
	return bucketRecords[Namespace](t.tx.Bucket(bucketNamespaces))
}
