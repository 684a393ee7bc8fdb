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
