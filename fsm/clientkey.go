package fsm

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// ClientKey is what a server presents to the client agent named node when
// it calls the client's port under ACL (a proxied log or artifact, a
// checkpoint): HMAC-SHA256 of the node's name keyed by the
// cluster-internal secret. A client never holds the secret itself; its
// server hands it its own key over its authenticated work stream, so a
// client that leaks its key exposes only itself. "" without a secret.
func ClientKey(internalSecret, node string) string {
	if internalSecret == "" {
		return ""
	}
	m := hmac.New(sha256.New, []byte(internalSecret))
	m.Write([]byte("foreman client key\x00" + node))
	return hex.EncodeToString(m.Sum(nil))
}
