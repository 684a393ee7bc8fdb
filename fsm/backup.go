package fsm

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// A backup file (`foreman operator snapshot save`) is one raft snapshot of
// the state with what it takes to check and describe it offline:
//
//	magic     8 bytes   "FMSNAP1\n"
//	length    4 bytes   big-endian length of the header
//	header    JSON      BackupHeader
//	image     Size bytes: the state file image (a raft snapshot of this FSM)
//	checksum  32 bytes  SHA-256 of everything before it
//
// The header comes first so that inspect and restore can refuse a file
// from a newer foreman before reading the image; the checksum comes last
// so that save can stream the image without holding it twice.

// BackupFormat is the layout above; a file with a higher Format is refused.
const BackupFormat = 1

var backupMagic = []byte("FMSNAP1\n")

// maxBackupHeader bounds the header a reader accepts (it is ~1 KB).
const maxBackupHeader = 1 << 20

var (
	// ErrBadBackup means a backup file is not usable: not a foreman
	// snapshot, truncated, failing its checksum, or holding an image that
	// does not open. The message says which.
	ErrBadBackup = errors.New("bad snapshot file")
	// ErrBackupVersion means a backup file was written by a newer foreman
	// (a higher format or schema version than this binary understands).
	ErrBackupVersion = errors.New("snapshot file is from a newer foreman")
)

// BackupHeader describes a backup file.
type BackupHeader struct {
	Format        int    `json:"format"`
	SchemaVersion int    `json:"schema_version"` // of the state image (SchemaVersion)
	Index         uint64 `json:"index"`          // raft index of the snapshot
	Term          uint64 `json:"term"`
	Size          int64  `json:"size"` // bytes of the state image
	ClusterID     string `json:"cluster_id,omitempty"`
	// Node is the leader that took the snapshot.
	Node      string      `json:"node,omitempty"`
	CreatedAt time.Time   `json:"created_at"`
	Counts    StateCounts `json:"counts"`
}

func (h *BackupHeader) encode() ([]byte, error) {
	body, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(backupMagic)+4+len(body))
	out = append(out, backupMagic...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(body)))
	return append(out, body...), nil
}

// FileSize is the length of the backup file that WriteBackup writes for h.
func (h BackupHeader) FileSize() (int64, error) {
	head, err := h.encode()
	if err != nil {
		return 0, err
	}
	return int64(len(head)) + h.Size + sha256.Size, nil
}

// WriteBackup writes a backup file: h, then exactly h.Size bytes of image,
// then the checksum.
func WriteBackup(w io.Writer, h BackupHeader, image io.Reader) error {
	head, err := h.encode()
	if err != nil {
		return err
	}
	sum := sha256.New()
	mw := io.MultiWriter(w, sum)
	if _, err := mw.Write(head); err != nil {
		return err
	}
	n, err := io.Copy(mw, io.LimitReader(image, h.Size))
	if err != nil {
		return err
	}
	if n != h.Size {
		return fmt.Errorf("snapshot image is %d bytes, header says %d", n, h.Size)
	}
	_, err = w.Write(sum.Sum(nil))
	return err
}

// ReadBackup reads a backup file from r, copying its image to image, and
// returns the header once the checksum matched. Errors wrap ErrBadBackup
// or ErrBackupVersion; image may then hold part of the image.
func ReadBackup(r io.Reader, image io.Writer) (BackupHeader, error) {
	var h BackupHeader
	sum := sha256.New()
	br := bufio.NewReaderSize(r, 64<<10)
	tr := io.TeeReader(br, sum)
	var fixed [12]byte
	n, err := io.ReadFull(tr, fixed[:])
	m := min(n, len(backupMagic))
	if !bytes.Equal(fixed[:m], backupMagic[:m]) || n == 0 {
		return h, fmt.Errorf("%w: not a foreman snapshot file", ErrBadBackup)
	}
	if err != nil {
		return h, fmt.Errorf("%w: truncated: %d bytes, shorter than the file header", ErrBadBackup, n)
	}
	hlen := binary.BigEndian.Uint32(fixed[len(backupMagic):])
	if hlen > maxBackupHeader {
		return h, fmt.Errorf("%w: header length %d is over the limit of %d (corrupt)", ErrBadBackup, hlen, maxBackupHeader)
	}
	head := make([]byte, hlen)
	if _, err := io.ReadFull(tr, head); err != nil {
		return h, fmt.Errorf("%w: truncated inside the header", ErrBadBackup)
	}
	if err := json.Unmarshal(head, &h); err != nil {
		return h, fmt.Errorf("%w: header: %v", ErrBadBackup, err)
	}
	if h.Format > BackupFormat {
		return h, fmt.Errorf("%w: format %d (this binary reads up to %d); use the foreman version that wrote it or a newer one", ErrBackupVersion, h.Format, BackupFormat)
	}
	if h.Format < 1 || h.Size < 0 {
		return h, fmt.Errorf("%w: header: format %d, size %d (corrupt)", ErrBadBackup, h.Format, h.Size)
	}
	src := &readErrs{r: io.LimitReader(tr, h.Size)}
	copied, err := io.Copy(image, src)
	if src.err != nil {
		// The sender went away mid-file: as good as truncated.
		return h, fmt.Errorf("%w: reading the image: %v", ErrBadBackup, src.err)
	}
	if err != nil {
		return h, fmt.Errorf("write snapshot image: %w", err)
	}
	if copied < h.Size {
		return h, fmt.Errorf("%w: truncated: the image has %d of %d bytes", ErrBadBackup, copied, h.Size)
	}
	want := sum.Sum(nil)
	got := make([]byte, sha256.Size)
	if m, err := io.ReadFull(br, got); err != nil {
		return h, fmt.Errorf("%w: truncated: the checksum has %d of %d bytes", ErrBadBackup, m, sha256.Size)
	}
	if !bytes.Equal(got, want) {
		return h, fmt.Errorf("%w: checksum mismatch (the file is corrupt)", ErrBadBackup)
	}
	if m, _ := br.Read(make([]byte, 1)); m > 0 {
		return h, fmt.Errorf("%w: data after the checksum", ErrBadBackup)
	}
	if h.SchemaVersion > SchemaVersion {
		return h, fmt.Errorf("%w: state schema version %d (this binary understands up to %d); upgrade foreman before restoring it", ErrBackupVersion, h.SchemaVersion, SchemaVersion)
	}
	return h, nil
}

// readErrs remembers a read error, to tell it from a write error after
// io.Copy.
type readErrs struct {
	r   io.Reader
	err error
}

func (r *readErrs) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}
