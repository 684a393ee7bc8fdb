package fsm

import "errors"

var (
	// ErrBadCommand means a raft entry could not be decoded.
	ErrBadCommand = errors.New("malformed command")
	// ErrUnsupportedVersion means an entry was written by a newer binary.
	ErrUnsupportedVersion = errors.New("unsupported command version")
	// ErrNotFound means the named job, attempt or node does not exist.
	ErrNotFound = errors.New("not found")
	// ErrStaleToken means a report carried a fencing token that is not current.
	ErrStaleToken = errors.New("stale fencing token")
	// ErrConflict means the object is in a state that does not allow the change.
	ErrConflict = errors.New("conflict")
)
