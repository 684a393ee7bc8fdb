package cluster

import "net/http"

// internalAuth adds the node's credential (Config.InternalAuth) to every
// node-to-node request the forwarding client sends.
type internalAuth struct {
	base http.RoundTripper
	set  func(http.Header)
}

func (t internalAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context()) // a RoundTripper must not change the caller's request
	t.set(r.Header)
	return t.base.RoundTrip(r)
}

// CloseIdleConnections passes on to the wrapped transport (Node.Shutdown).
func (t internalAuth) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
