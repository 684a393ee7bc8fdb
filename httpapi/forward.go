package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/foreman-sched/foreman/fsm"
)

// proxyToLeader sends the request to the leader's HTTP address.
func (s *server) proxyToLeader(w http.ResponseWriter, r *http.Request) {
	name, addr := s.cluster.Leader()
	if addr == "" {
		s.writeError(w, r, fmt.Errorf("%w: this node (%s) is not the leader and no leader is known; retry shortly", ErrNoLeader, s.cluster.NodeName()))
		return
	}
	if r.Header.Get(HeaderForwarded) != "" {
		s.writeError(w, r, fmt.Errorf("%w: request was forwarded here but this node (%s) is not the leader (it thinks %s is); retry", ErrLoop, s.cluster.NodeName(), name))
		return
	}
	s.proxy(w, r, name, addr)
}

// proxy forwards r to another node's API at addr (host:port) and streams
// the answer back, flushing as bytes arrive (log follow).
func (s *server) proxy(w http.ResponseWriter, r *http.Request, name, addr string) {
	s.proxyOr(w, r, name, addr, nil)
}

// proxyOr is proxy with a fallback that answers instead when the node
// cannot be reached at all (nothing of its answer was written): a node
// killed a moment ago is still alive to gossip, and what it held may be
// in the object store.
func (s *server) proxyOr(w http.ResponseWriter, r *http.Request, name, addr string, fallback http.HandlerFunc) {
	if r.Header.Get(HeaderForwarded) != "" {
		s.writeError(w, r, fmt.Errorf("%w: request was already forwarded once; not forwarding it to %s", ErrLoop, name))
		return
	}
	w.Header().Del(HeaderNode) // the node that really answers sets it
	toClient := s.isClientAgent(name)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: s.scheme, Host: addr})
			pr.SetXForwarded()
			pr.Out.Header.Set(HeaderForwarded, "1")
			if toClient {
				// A client agent is trusted less than a server: it gets
				// neither the user's token nor the internal secret (this
				// server has checked them), only its own key under ACL.
				pr.Out.Header.Del("Authorization")
				pr.Out.Header.Del(HeaderInternalToken)
				s.acl.SetClientKey(pr.Out.Header, name)
			}
		},
		Transport:     s.transport,
		FlushInterval: -1,
		// The other node echoes the same request ID; keep one copy.
		ModifyResponse: func(resp *http.Response) error { resp.Header.Del(HeaderRequestID); return nil },
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil && fallback != nil {
				s.log.InfoContext(r.Context(), "node unreachable; answering from the object store", "node", name, "err", err)
				fallback(w, r)
				return
			}
			if r.Context().Err() != nil {
				err = errors.Join(err, r.Context().Err())
			} else {
				err = fmt.Errorf("%w: %s at %s: %v", ErrUnreachable, name, addr, err)
			}
			s.writeError(w, r, err)
		},
	}
	rp.ServeHTTP(w, r)
}

// isClientAgent reports whether the node named is a client agent (outside
// raft).
func (s *server) isClientAgent(name string) bool {
	client := false
	_ = s.state.View(func(tx *fsm.Tx) error {
		if n, err := tx.Node(name); err == nil {
			client = n.Role == fsm.RoleClient
		}
		return nil
	})
	return client
}
