package fsm

import (
	"errors"
	"strings"
	"testing"
)

func TestACLApply(t *testing.T) {
	h := newHarness(t)
	hash := strings.Repeat("a", 64)
	boot := ACLToken{AccessorID: "boot", SecretHash: hash, Roles: []ACLRole{{Role: "management"}}}
	h.must(CmdACLBootstrap, ACLBootstrap{Token: boot})
	again := boot
	again.AccessorID, again.SecretHash = "boot2", strings.Repeat("b", 64)
	if r := h.apply(CmdACLBootstrap, ACLBootstrap{Token: again}); !errors.Is(r.Err, ErrConflict) || !strings.Contains(r.Err.Error(), "already bootstrapped") {
		t.Errorf("second bootstrap: %v", r.Err)
	}
	for name, bad := range map[string]ACLToken{
		"short hash":   {AccessorID: "x", SecretHash: "abc", Roles: []ACLRole{{Role: "read", Namespace: "a"}}},
		"no roles":     {AccessorID: "x", SecretHash: strings.Repeat("c", 64)},
		"slash in id":  {AccessorID: "x/y", SecretHash: strings.Repeat("c", 64), Roles: []ACLRole{{Role: "operator"}}},
		"same secret":  {AccessorID: "y", SecretHash: hash, Roles: []ACLRole{{Role: "operator"}}},
		"same account": {AccessorID: "boot", SecretHash: strings.Repeat("d", 64), Roles: []ACLRole{{Role: "operator"}}},
	} {
		if r := h.apply(CmdACLCreateToken, ACLCreateToken{Token: bad}); r.Err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	h.must(CmdACLCreateToken, ACLCreateToken{Token: ACLToken{AccessorID: "r", SecretHash: strings.Repeat("e", 64), Roles: []ACLRole{{Role: "read", Namespace: "a"}}}})
	err := h.f.View(func(tx *Tx) error {
		tok, err := tx.ACLTokenByHash(strings.Repeat("e", 64))
		if err != nil || tok.AccessorID != "r" || tok.CreateIndex == 0 || tok.CreatedAt.IsZero() {
			t.Errorf("by hash: %+v %v", tok, err)
		}
		if !tx.ACLBootstrapped() {
			t.Error("not bootstrapped")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	h.must(CmdACLRevokeToken, ACLRevokeToken{AccessorID: "r"})
	if r := h.apply(CmdACLRevokeToken, ACLRevokeToken{AccessorID: "r"}); !errors.Is(r.Err, ErrNotFound) {
		t.Errorf("revoke twice: %v", r.Err)
	}
	_ = h.f.View(func(tx *Tx) error {
		if _, err := tx.ACLTokenByHash(strings.Repeat("e", 64)); !errors.Is(err, ErrNotFound) {
			t.Errorf("revoked token still found: %v", err)
		}
		return nil
	})
	if r := h.apply(CmdACLInternal, ACLInternal{Secret: "short"}); !errors.Is(r.Err, ErrBadCommand) {
		t.Errorf("short internal secret: %v", r.Err)
	}
	h.must(CmdACLInternal, ACLInternal{Secret: strings.Repeat("s", 43)})
	if r := h.apply(CmdACLInternal, ACLInternal{Secret: strings.Repeat("t", 43)}); !errors.Is(r.Err, ErrConflict) {
		t.Errorf("second internal secret: %v", r.Err)
	}
	// Rotation: the current secret becomes the previous one.
	if r := h.apply(CmdACLInternal, ACLInternal{Secret: strings.Repeat("s", 43), Rotate: true}); !errors.Is(r.Err, ErrBadCommand) {
		t.Errorf("rotate to the same secret: %v", r.Err)
	}
	h.must(CmdACLInternal, ACLInternal{Secret: strings.Repeat("t", 43), Rotate: true})
	h.must(CmdACLInternal, ACLInternal{Secret: strings.Repeat("u", 43), Rotate: true})
	_ = h.f.View(func(tx *Tx) error {
		if cur, prev := tx.ACLInternalSecret(), tx.ACLInternalPrevious(); cur != strings.Repeat("u", 43) || prev != strings.Repeat("t", 43) {
			t.Errorf("after two rotations: current %q previous %q", cur, prev)
		}
		return nil
	})
}

// Rotating before any secret is set is refused (nothing to rotate).
func TestACLInternalRotateUnset(t *testing.T) {
	h := newHarness(t)
	if r := h.apply(CmdACLInternal, ACLInternal{Secret: strings.Repeat("t", 43), Rotate: true}); !errors.Is(r.Err, ErrConflict) {
		t.Errorf("rotate with none set: %v", r.Err)
	}
}
