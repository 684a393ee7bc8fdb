package fsm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// ErrNewerState means a state file (or a raft snapshot of one) was written
// by a newer foreman than this binary: a newer SchemaVersion, or a data dir
// whose log holds entries of a newer CommandVersion. Nothing was changed;
// the caller must stop rather than rebuild or overwrite it (a downgrade is
// not supported: docs/operations.md, "Compatibility").
var ErrNewerState = errors.New("state written by a newer foreman")

// FileVersion is what a state file says about the binaries that wrote it.
type FileVersion struct {
	// Schema is the file's SchemaVersion (0: a file with no meta yet).
	Schema int
	// CommandVersion is the newest CommandVersion of any binary that has
	// opened the file for writing (0: only binaries from before it was
	// recorded): the raft log beside it may hold entries of that version.
	CommandVersion int
	// WrittenBy is the foreman version that last opened the file for
	// writing ("" before it was recorded, or a binary without a version).
	WrittenBy string
	// Features is every feature (features.go) known to a binary that has
	// opened the file for writing (0: only binaries from before it was
	// recorded). New command kinds and fields come with a new feature, not
	// a new CommandVersion (a rolling upgrade needs the envelope to stay
	// readable), so this is what tells a binary that the log beside the
	// file may hold entries it would not apply as the newer one did.
	Features FeatureSet
}

// Newer reports, as an error wrapping ErrNewerState, whether v needs a
// newer binary than this one; what names the file, binary this binary's
// version. The message is one line: what wrote it, what this binary reads.
func (v FileVersion) Newer(what, binary string) error {
	return v.newer(what, binary, true)
}

// newer is Newer, checking the features too when features is set.
func (v FileVersion) newer(what, binary string, features bool) error {
	var wrote string
	var have int
	switch {
	case v.Schema > SchemaVersion:
		wrote, have = fmt.Sprintf("schema %d", v.Schema), SchemaVersion
	case v.CommandVersion > CommandVersion:
		wrote, have = fmt.Sprintf("command version %d", v.CommandVersion), CommandVersion
	case features && v.Features&^KnownFeatures != 0:
		return v.newerFeatures(what, binary)
	default:
		return nil
	}
	by, self, fix := v.names(binary)
	kind := strings.TrimRight(strings.TrimRight(wrote, "0123456789"), " ")
	return fmt.Errorf("%w: %s written by %s (%s), %s understands up to %s %d; %s",
		ErrNewerState, what, wrote, by, self, kind, have, fix)
}

// newerFeatures is Newer's line for a file opened by a binary that knew
// features this one does not: bits, since their names are unknown here.
func (v FileVersion) newerFeatures(what, binary string) error {
	var bits []string
	for b := range 64 {
		if f := FeatureSet(1) << b; v.Features&^KnownFeatures&f != 0 {
			bits = append(bits, strconv.Itoa(b))
		}
	}
	by, self, fix := v.names(binary)
	return fmt.Errorf("%w: %s written by %s with features %s that %s does not know; %s",
		ErrNewerState, what, by, strings.Join(bits, ","), self, fix)
}

// names are the words of Newer's line: the binary that wrote the file,
// this binary, and what to run instead.
func (v FileVersion) names(binary string) (by, self, fix string) {
	by, fix = "a foreman that did not record its version", "run a newer foreman"
	if v.WrittenBy != "" {
		by, fix = "foreman "+v.WrittenBy, "run foreman "+v.WrittenBy+" or newer"
	}
	self = "this binary"
	if binary != "" {
		self += " (foreman " + binary + ")"
	}
	return by, self, fix
}

// readFileVersion reads the version records of an open state file.
func readFileVersion(tx *bolt.Tx) (FileVersion, error) {
	var v FileVersion
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return v, nil
	}
	for _, f := range []struct {
		key []byte
		dst *int
	}{{metaSchemaVersion, &v.Schema}, {metaCommandVersion, &v.CommandVersion}} {
		if b := meta.Get(f.key); b != nil {
			n, err := strconv.Atoi(string(b))
			if err != nil || n < 1 {
				return v, fmt.Errorf("%w: %s %q", ErrCorrupt, f.key, b)
			}
			*f.dst = n
		}
	}
	v.WrittenBy = string(meta.Get(metaWrittenBy))
	if b := meta.Get(metaFeatures); b != nil {
		n, err := strconv.ParseUint(string(b), 10, 64)
		if err != nil {
			return v, fmt.Errorf("%w: %s %q", ErrCorrupt, metaFeatures, b)
		}
		v.Features = FeatureSet(n)
	}
	return v, nil
}

// ReadFileVersion opens the state file at path read-only and returns its
// version records; it changes nothing (a read-only bbolt open takes a
// shared lock and writes no page). A missing file gives an error that
// wraps fs.ErrNotExist; a file another process holds, bbolt's timeout.
func ReadFileVersion(path string) (FileVersion, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: openTimeout})
	if err != nil {
		return FileVersion{}, fmt.Errorf("read state file %s: %w", path, err)
	}
	defer db.Close()
	var v FileVersion
	err = db.View(func(tx *bolt.Tx) error {
		v, err = readFileVersion(tx)
		return err
	})
	return v, err
}

// recordVersion is the migration every Open runs (after the schema ones):
// it records this binary's CommandVersion when it is newer than the file's
// (never lowering it), the features it knows (added to the file's, never
// removed) and, when set, this binary's version as the writer.
// A file from before these records gets them at its first Open; running it
// again changes nothing.
func recordVersion(meta *bolt.Bucket, have FileVersion, binary string) error {
	if have.CommandVersion < CommandVersion {
		if err := meta.Put(metaCommandVersion, []byte(strconv.Itoa(CommandVersion))); err != nil {
			return err
		}
	}
	if all := have.Features | KnownFeatures; all != have.Features {
		if err := meta.Put(metaFeatures, []byte(strconv.FormatUint(uint64(all), 10))); err != nil {
			return err
		}
	}
	if binary != "" && binary != have.WrittenBy {
		return meta.Put(metaWrittenBy, []byte(binary))
	}
	return nil
}
