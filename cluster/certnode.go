package cluster

import (
	"fmt"
	"net/http"
)

// certBindsNode refuses a client agent's call for node when the agent
// certificate it presented (mutual TLS) names another node: an agent
// certificate's common name is its node name (`foreman tls cert create
// --server --node NAME`), so under TLS a client speaks only for itself.
// Without a client certificate (plain HTTP, or the cluster-internal
// secret's callers) there is nothing to bind.
func certBindsNode(r *http.Request, node string) error {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil
	}
	if cn := r.TLS.PeerCertificates[0].Subject.CommonName; cn != node {
		return fmt.Errorf("the agent certificate presented is node %q's: it cannot speak for %q (a certificate binds its node name; make one with foreman tls cert create --server --node %s)", cn, node, node)
	}
	return nil
}
