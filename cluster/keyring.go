package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/foreman-sched/foreman/fsm"
)

// Gossip key rotation without downtime (docs/security.md, "Rotation"):
// memberlist's keyring decrypts with every installed key and encrypts with
// the primary one. Install the new key on every node, make it primary on
// every node, then remove the old one. Each step goes to every alive
// member (GossipKeyringAll), each node applies it to its own keyring and
// writes the keyring to its data dir, which overrides --gossip-key from
// then on (a restarted node keeps the rotated keys).

// Gossip keyring operations.
const (
	KeyringList    = "list"
	KeyringInstall = "install"
	KeyringUse     = "use"
	KeyringRemove  = "remove"
)

// KeyringFile is the keyring a node writes to its data dir on every change.
const KeyringFile = "gossip-keyring.json"

var (
	// ErrGossipPlain: the node's gossip is not encrypted; there is no
	// keyring to rotate.
	ErrGossipPlain = errors.New("gossip is not encrypted on this node (agents need --gossip-key to have a keyring)")
	// ErrBadKey: the key is not base64 of 16, 24 or 32 bytes.
	ErrBadKey = errors.New("key: want base64 of 16, 24 or 32 bytes (foreman tls gossip-key makes one)")
	// ErrKeyring: memberlist refused the change (remove the primary key,
	// use a key not installed) or it is not installed on every node.
	ErrKeyring = errors.New("keyring")
)

// GossipKey describes one installed key by fingerprint (the first 8 bytes
// of its SHA-256, hex): the key itself never leaves the node.
type GossipKey struct {
	Fingerprint string `json:"fingerprint"`
	Primary     bool   `json:"primary,omitempty"`
}

// KeyFingerprint is how a key is shown.
func KeyFingerprint(key []byte) string {
	h := sha256.Sum256(key)
	return hex.EncodeToString(h[:8])
}

// DecodeGossipKey decodes a base64 gossip key.
func DecodeGossipKey(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not valid base64", ErrBadKey)
	}
	if l := len(b); l != 16 && l != 24 && l != 32 {
		return nil, fmt.Errorf("%w: got %d bytes", ErrBadKey, l)
	}
	return b, nil
}

var keyringMu sync.Mutex

// GossipEncrypted reports whether this node's gossip is encrypted (a
// --gossip-key or a keyring saved in the data dir).
func (n *Node) GossipEncrypted() bool { return n.keyring != nil }

// GossipKeyring applies op (list, install, use, remove) with key (base64;
// empty for list) to this node's keyring and returns its keys.
func (n *Node) GossipKeyring(op, key string) ([]GossipKey, error) {
	kr := n.keyring
	if kr == nil {
		return nil, ErrGossipPlain
	}
	keyringMu.Lock()
	defer keyringMu.Unlock()
	if op != KeyringList {
		k, err := DecodeGossipKey(key)
		if err != nil {
			return nil, err
		}
		switch op {
		case KeyringInstall:
			err = kr.AddKey(k)
		case KeyringUse:
			err = kr.UseKey(k)
		case KeyringRemove:
			err = kr.RemoveKey(k)
		default:
			return nil, fmt.Errorf("%w: op %q: want list, install, use or remove", ErrBadKey, op)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s %s: %v", ErrKeyring, op, KeyFingerprint(k), err)
		}
		if err := n.saveKeyring(); err != nil {
			return nil, fmt.Errorf("%w: %s applied but not saved to the data dir (a restart would lose it): %v", ErrKeyring, op, err)
		}
		n.logger.Info("gossip keyring changed", "op", op, "key", KeyFingerprint(k))
	}
	return describeKeys(kr.GetKeys(), kr.GetPrimaryKey()), nil
}

func describeKeys(keys [][]byte, primary []byte) []GossipKey {
	out := make([]GossipKey, 0, len(keys))
	for _, k := range keys {
		out = append(out, GossipKey{Fingerprint: KeyFingerprint(k), Primary: bytes.Equal(k, primary)})
	}
	return out
}

// keyringOnDisk is KeyringFile: the primary key first.
type keyringOnDisk struct {
	Keys []string `json:"keys"`
}

func (n *Node) saveKeyring() error {
	kr := n.keyring
	primary := kr.GetPrimaryKey()
	d := keyringOnDisk{Keys: []string{base64.StdEncoding.EncodeToString(primary)}}
	for _, k := range kr.GetKeys() {
		if !bytes.Equal(k, primary) {
			d.Keys = append(d.Keys, base64.StdEncoding.EncodeToString(k))
		}
	}
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	p := filepath.Join(n.cfg.DataDir, KeyringFile)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// LoadKeyring reads dataDir's KeyringFile: the keys (primary first), or
// nil when there is none.
func LoadKeyring(dataDir string) ([][]byte, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, KeyringFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var d keyringOnDisk
	if err := json.Unmarshal(b, &d); err != nil || len(d.Keys) == 0 {
		return nil, fmt.Errorf("%s: not a keyring (%v)", KeyringFile, err)
	}
	var keys [][]byte
	for _, s := range d.Keys {
		k, err := DecodeGossipKey(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", KeyringFile, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// NodeKeys is one node's answer to a cluster-wide keyring operation.
type NodeKeys struct {
	Node  string      `json:"node"`
	Keys  []GossipKey `json:"keys,omitempty"`
	Error string      `json:"error,omitempty"`
}

type keyringRequest struct {
	Op  string `json:"op"`
	Key string `json:"key,omitempty"`
}

// GossipKeyringAll applies op on every alive member (this node directly,
// the others over /v1/internal/keyring) and returns each node's keys or
// error, sorted by node. use is refused unless every alive member has the
// key installed; remove unless no member uses it as primary.
func (n *Node) GossipKeyringAll(ctx context.Context, op, key string) ([]NodeKeys, error) {
	if op != KeyringList {
		k, err := DecodeGossipKey(key)
		if err != nil {
			return nil, err
		}
		if op == KeyringUse || op == KeyringRemove {
			list, err := n.GossipKeyringAll(ctx, KeyringList, "")
			if err != nil {
				return nil, err
			}
			fp := KeyFingerprint(k)
			for _, nk := range list {
				if nk.Error != "" {
					return nil, fmt.Errorf("%w: %s unreachable (%s); not changing any node", ErrKeyring, nk.Node, nk.Error)
				}
				has, primary := false, false
				for _, g := range nk.Keys {
					if g.Fingerprint == fp {
						has, primary = true, g.Primary
					}
				}
				if op == KeyringUse && !has {
					return nil, fmt.Errorf("%w: key %s is not installed on %s: install it on every node first", ErrKeyring, fp, nk.Node)
				}
				if op == KeyringRemove && primary {
					return nil, fmt.Errorf("%w: key %s is the primary key on %s: use another key first", ErrKeyring, fp, nk.Node)
				}
			}
		}
	}
	var (
		mu  sync.Mutex
		out []NodeKeys
		wg  sync.WaitGroup
	)
	for _, m := range n.members.list() {
		if m.Status != fsm.NodeAlive && m.Status != fsm.NodeSuspect {
			continue
		}
		wg.Add(1)
		go func(m Member) {
			defer wg.Done()
			nk := NodeKeys{Node: m.Name}
			var err error
			if m.Name == n.cfg.Name {
				nk.Keys, err = n.GossipKeyring(op, key)
			} else {
				nk.Keys, err = n.remoteKeyring(ctx, m.HTTPAddr, keyringRequest{Op: op, Key: key})
			}
			if err != nil {
				nk.Error = err.Error()
			}
			mu.Lock()
			out = append(out, nk)
			mu.Unlock()
		}(m)
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, nil
}

func (n *Node) remoteKeyring(ctx context.Context, addr string, kr keyringRequest) ([]GossipKey, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := n.internalCall(ctx, http.MethodPost, addr, "keyring", kr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Keys  []GossipKey `json:"keys"`
		Error string      `json:"error"`
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, out.Error)
	}
	return out.Keys, nil
}

// handleKeyring serves POST /v1/internal/keyring: op on this node only.
func (n *Node) handleKeyring(w http.ResponseWriter, r *http.Request) {
	var kr keyringRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&kr); err != nil {
		writeKeyring(w, http.StatusBadRequest, nil, "body: "+err.Error())
		return
	}
	keys, err := n.GossipKeyring(kr.Op, kr.Key)
	switch {
	case err == nil:
		writeKeyring(w, http.StatusOK, keys, "")
	case errors.Is(err, ErrBadKey):
		writeKeyring(w, http.StatusBadRequest, nil, err.Error())
	default:
		writeKeyring(w, http.StatusConflict, nil, err.Error())
	}
}

func writeKeyring(w http.ResponseWriter, status int, keys []GossipKey, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"keys": keys, "error": msg})
}
