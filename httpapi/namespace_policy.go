package httpapi

import (
	"fmt"
	"slices"
	"strings"

	"github.com/foreman-sched/foreman/fsm"
)

// checkPolicy refuses a job its namespace's policy forbids (n is the
// namespace's record, nil for none): a driver outside the namespace's
// drivers, or user root without allow_root. docs/security.md, "Namespace
// policy". i and batch name the field as check does.
func checkPolicy(n *fsm.Namespace, sp *fsm.JobSpec, i int, batch bool) error {
	field := func(f string) string {
		if batch {
			return fmt.Sprintf("jobs[%d].%s", i, f)
		}
		return f
	}
	ns := fsm.NamespaceOf(sp.Namespace)
	if n != nil && len(n.Drivers) > 0 {
		allowed := strings.Join(n.Drivers, ", ")
		if sp.Driver == "" {
			return invalid(field("driver"), "namespace %s allows only the drivers %s; name one (the node's default driver is not checked)", ns, allowed)
		}
		if !slices.Contains(n.Drivers, sp.Driver) {
			return invalid(field("driver"), "%q is not allowed in namespace %s (allowed: %s)", sp.Driver, ns, allowed)
		}
	}
	if n != nil && len(n.Volumes) > 0 {
		for k, v := range sp.Volumes {
			if !slices.Contains(n.Volumes, v.Name) {
				return invalid(field(fmt.Sprintf("volumes[%d]", k)), "volume %q is not allowed in namespace %s (allowed: %s)", v.Name, ns, strings.Join(n.Volumes, ", "))
			}
		}
	}
	if fsm.IsRootUser(sp.User) && (n == nil || !n.AllowRoot) {
		return invalid(field("user"), "%q (root) is not allowed in namespace %s: its policy does not allow_root (a management token sets it: foreman namespace set %s --allow-root)", sp.User, ns, ns)
	}
	return nil
}
