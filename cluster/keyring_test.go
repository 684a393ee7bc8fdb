package cluster_test

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/cluster"
)

func TestDecodeGossipKey(t *testing.T) {
	k := gossipKey(t)
	got, err := cluster.DecodeGossipKey(base64.StdEncoding.EncodeToString(k))
	if err != nil || string(got) != string(k) {
		t.Fatalf("round trip: %v", err)
	}
	for _, bad := range []string{"", "not base64!", base64.StdEncoding.EncodeToString([]byte("short"))} {
		if _, err := cluster.DecodeGossipKey(bad); !errors.Is(err, cluster.ErrBadKey) {
			t.Errorf("%q: %v, want ErrBadKey", bad, err)
		}
	}
	if fp := cluster.KeyFingerprint(k); len(fp) != 16 || strings.Contains(base64.StdEncoding.EncodeToString(k), fp) {
		t.Errorf("fingerprint %q", fp)
	}
}

// LoadKeyring: no file is no keyring; a file with keys gives them primary
// first; a damaged file is an error naming it (the agent refuses to start
// rather than fall back to --gossip-key keys the cluster may have removed).
func TestLoadKeyring(t *testing.T) {
	dir := t.TempDir()
	if keys, err := cluster.LoadKeyring(dir); keys != nil || err != nil {
		t.Fatalf("no file: %v %v", keys, err)
	}
	a, b := gossipKey(t), gossipKey(t)
	body := `{"keys":["` + base64.StdEncoding.EncodeToString(a) + `","` + base64.StdEncoding.EncodeToString(b) + `"]}`
	if err := os.WriteFile(filepath.Join(dir, cluster.KeyringFile), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := cluster.LoadKeyring(dir)
	if err != nil || len(keys) != 2 || string(keys[0]) != string(a) || string(keys[1]) != string(b) {
		t.Fatalf("got %d keys, %v", len(keys), err)
	}
	for _, bad := range []string{`{"keys":[]}`, `nonsense`, `{"keys":["AAAA"]}`} {
		if err := os.WriteFile(filepath.Join(dir, cluster.KeyringFile), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := cluster.LoadKeyring(dir); err == nil || !strings.Contains(err.Error(), cluster.KeyringFile) {
			t.Errorf("%s: %v, want an error naming the file", bad, err)
		}
	}
}
