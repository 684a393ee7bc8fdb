package exec

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// The user cache answers from memory while its file is unchanged, asks
// again once the file changes, and keeps failures the same way.
func TestIDCacheFollowsItsFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(file, []byte("alice:x:1000:1000::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lookups := 0
	ids := map[string]string{"alice": "1000"}
	c := &idCache{file: file, lookup: func(name string) (string, string, error) {
		lookups++
		id, ok := ids[name]
		if !ok {
			return "", "", errors.New("unknown user " + name)
		}
		return id, id, nil
	}}
	for range 3 {
		if id, _, err := c.get("alice"); err != nil || id != "1000" {
			t.Fatalf("alice = %q, %v; want 1000", id, err)
		}
		if _, _, err := c.get("bob"); err == nil {
			t.Fatal("bob was found before he was added")
		}
	}
	if lookups != 2 {
		t.Fatalf("%d lookups for 2 names asked 3 times each with the file unchanged, want 2", lookups)
	}

	// bob is added: the file changes (size and mtime), the next get asks again.
	ids["bob"] = "1001"
	later := time.Now().Add(time.Second)
	if err := os.WriteFile(file, []byte("alice:x:1000:1000::/:/bin/sh\nbob:x:1001:1001::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(file, later, later)
	if id, _, err := c.get("bob"); err != nil || id != "1001" {
		t.Fatalf("bob after the file changed = %q, %v; want 1001", id, err)
	}
	if lookups != 3 {
		t.Fatalf("%d lookups, want 3 (the change dropped every answer; bob asked once more)", lookups)
	}
}

func TestCredentialOfANumericUserNeedsNoLookup(t *testing.T) {
	uid := os.Geteuid() // any uid for root, only its own for anyone else
	cred, err := credential(strconv.Itoa(uid) + ":4343")
	if err != nil || int(cred.Uid) != uid || cred.Gid != 4343 {
		t.Fatalf("credential(%d:4343) = %+v, %v", uid, cred, err)
	}
	if _, err := credential("no-such-user-foreman"); err == nil {
		t.Fatal("an unknown user got a credential")
	}
}
