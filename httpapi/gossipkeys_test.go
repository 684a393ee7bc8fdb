package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

// Without a keyring (no Deps.GossipKeys) the routes answer 503; a bad op
// or a missing key is a 400 naming the field, before any node is asked.
func TestGossipKeysBadInput(t *testing.T) {
	a := newTestAPI(t)
	for _, tc := range []struct {
		body, field string
	}{
		{`{"op":"rotate","key":"x"}`, "op"},
		{`{"op":"install"}`, "key"},
		{`{"op":"use","key":"","extra":1}`, "extra"},
	} {
		code, body := a.do(http.MethodPost, "/v1/operator/gossip-keys", tc.body)
		if code != http.StatusBadRequest || !strings.Contains(body, tc.field) {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.body, code, body, tc.field)
		}
	}
	if code, body := a.do(http.MethodGet, "/v1/operator/gossip-keys", ""); code != http.StatusServiceUnavailable {
		t.Errorf("list without a keyring: %d %s, want 503", code, body)
	}
}

// After POST /v1/acl/internal-secret/rotate (management only) the new
// secret is in force and the previous one is still accepted (a node that
// has not applied the rotation yet sends it); any other is refused.
func TestRotateInternalSecret(t *testing.T) {
	a, s := newACLAPI(t)
	old := strings.Repeat("i", 40)
	if code, _ := a.send(http.MethodPost, "/v1/acl/internal-secret/rotate", secretFor("operator")); code != http.StatusForbidden {
		t.Errorf("operator rotates: %d, want 403", code)
	}
	code, body := a.send(http.MethodPost, "/v1/acl/internal-secret/rotate", secretFor("management"))
	if code != http.StatusOK || !strings.Contains(body, `"rotated": true`) || strings.Contains(body, SecretPrefix) {
		t.Fatalf("rotate: %d %s", code, body)
	}
	cur := s.acl.InternalSecret()
	if cur == old || cur == "" {
		t.Fatalf("secret not rotated: %q", cur)
	}
	for _, tc := range []struct {
		secret string
		want   int
	}{{cur, http.StatusOK}, {old, http.StatusOK}, {strings.Repeat("x", 40), http.StatusUnauthorized}} {
		code, body := a.send(http.MethodGet, "/v1/ready", "") // sanity: open
		if code != http.StatusOK {
			t.Fatalf("ready: %d %s", code, body)
		}
		// /v1/internal/submits is PermInternal; an empty POST is a 4xx past the guard.
		code, body = a.send(http.MethodPost, "/v1/internal/submits", "", HeaderInternalToken, tc.secret)
		if got := code == http.StatusUnauthorized; got != (tc.want == http.StatusUnauthorized) {
			t.Errorf("internal secret %q…: %d %s", tc.secret[:4], code, body)
		}
	}
}
