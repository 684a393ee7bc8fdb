package fsm

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/iotest"
)

// snapshotImage returns the bytes raft would store for h's state.
func snapshotImage(t *testing.T, h *harness) []byte {
	t.Helper()
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	defer snap.Release()
	var buf bytes.Buffer
	if _, err := snap.(*snapshot).tx.WriteTo(&buf); err != nil {
		t.Fatalf("write image: %v", err)
	}
	return buf.Bytes()
}

func busyHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.must(CmdInit, InitCluster{ClusterID: "old-cluster"})
	h.addNode("a1")
	h.addNode("a2")
	h.submit(jobID(1), jobID(2), jobID(3))
	h.place(jobID(1), "a1")
	h.place(jobID(2), "a2")
	return h
}

func backupFile(t *testing.T, h BackupHeader, image []byte) []byte {
	t.Helper()
	h.Size = int64(len(image))
	var buf bytes.Buffer
	if err := WriteBackup(&buf, h, bytes.NewReader(image)); err != nil {
		t.Fatalf("write backup: %v", err)
	}
	size, err := h.FileSize()
	if err != nil || size != int64(buf.Len()) {
		t.Fatalf("FileSize = %d, %v; wrote %d", size, err, buf.Len())
	}
	return buf.Bytes()
}

func TestBackupRoundTripAndInspect(t *testing.T) {
	h := busyHarness(t)
	image := snapshotImage(t, h)
	file := backupFile(t, BackupHeader{Format: BackupFormat, SchemaVersion: SchemaVersion, Index: h.idx, Term: 1}, image)

	var got bytes.Buffer
	hdr, err := ReadBackup(bytes.NewReader(file), &got)
	if err != nil {
		t.Fatalf("read backup: %v", err)
	}
	if hdr.Index != h.idx || !bytes.Equal(got.Bytes(), image) {
		t.Fatalf("round trip: index %d (want %d), image equal %v", hdr.Index, h.idx, bytes.Equal(got.Bytes(), image))
	}
	path := filepath.Join(t.TempDir(), "image.db")
	if err := os.WriteFile(path, got.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	info, err := CheckImage(path, nil, nil)
	if err != nil {
		t.Fatalf("check image: %v", err)
	}
	c := info.Counts
	if info.AppliedIndex != h.idx || info.ClusterID != "old-cluster" || c.Jobs != 3 || c.JobsByState["running"] != 2 ||
		c.JobsByState["queued"] != 1 || c.LiveAttempts != 2 || c.Nodes != 2 || !slices.Equal(c.NodeNames, []string{"a1", "a2"}) {
		t.Fatalf("image info = %+v", info)
	}
}

func TestBackupRefusesBadFiles(t *testing.T) {
	h := busyHarness(t)
	image := snapshotImage(t, h)
	good := backupFile(t, BackupHeader{Format: BackupFormat, SchemaVersion: SchemaVersion, Index: h.idx, Term: 1}, image)
	flip := func(at int) []byte {
		b := slices.Clone(good)
		b[at] ^= 0x40
		return b
	}
	cases := []struct {
		name string
		file []byte
		want error
	}{
		{"empty", nil, ErrBadBackup},
		{"not a snapshot", []byte("hello world, this is not it"), ErrBadBackup},
		{"truncated in the magic", good[:4], ErrBadBackup},
		{"truncated in the header", good[:20], ErrBadBackup},
		{"truncated in the image", good[:len(good)/2], ErrBadBackup},
		{"truncated in the checksum", good[:len(good)-5], ErrBadBackup},
		{"corrupt image byte", flip(len(good) / 2), ErrBadBackup},
		{"corrupt checksum byte", flip(len(good) - 1), ErrBadBackup},
		{"trailing data", append(slices.Clone(good), 'x'), ErrBadBackup},
		{"newer format", backupFile(t, BackupHeader{Format: BackupFormat + 1, SchemaVersion: SchemaVersion}, image), ErrBackupVersion},
		{"newer schema", backupFile(t, BackupHeader{Format: BackupFormat, SchemaVersion: SchemaVersion + 1}, image), ErrBackupVersion},
	}
	cases = append(cases, struct {
		name string
		file []byte
		want error
	}{"sender gone mid-image", nil, ErrBadBackup})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r io.Reader = bytes.NewReader(tc.file)
			if tc.file == nil && tc.name != "empty" {
				r = io.MultiReader(bytes.NewReader(good[:len(good)/2]), iotest.ErrReader(io.ErrUnexpectedEOF))
			}
			_, err := ReadBackup(r, io.Discard)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestCheckImageRefusesGarbage(t *testing.T) {
	h := busyHarness(t)
	image := snapshotImage(t, h)
	for name, b := range map[string][]byte{
		"truncated": image[:len(image)/3],
		"garbage":   bytes.Repeat([]byte{0xAB}, 64<<10),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "image.db")
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := CheckImage(path, nil, nil); !errors.Is(err, ErrBadBackup) {
				t.Fatalf("err = %v, want ErrBadBackup", err)
			}
		})
	}
}

func TestCheckImageFix(t *testing.T) {
	h := busyHarness(t)
	image := snapshotImage(t, h)
	path := filepath.Join(t.TempDir(), "image.db")
	if err := os.WriteFile(path, image, 0o600); err != nil {
		t.Fatal(err)
	}
	info, err := CheckImage(path, &ImageFix{ClusterID: "new-cluster", Members: map[string]bool{"a2": true, "b1": true}, At: t0}, nil)
	if err != nil {
		t.Fatalf("check image: %v", err)
	}
	if info.ClusterID != "new-cluster" {
		t.Fatalf("cluster ID = %q", info.ClusterID)
	}
	g, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	err = g.View(func(tx *Tx) error {
		nodes, err := tx.Nodes()
		for _, n := range nodes {
			want := NodeAlive
			if n.Name == "a1" {
				want = NodeDead
			}
			if n.Gossip != want {
				t.Errorf("node %s is %s, want %s", n.Name, n.Gossip, want)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, g)
}
