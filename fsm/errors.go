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

var (
	// ErrCorrupt means the state file cannot be used (not a bolt file,
	// truncated, or failed the consistency check after an unclean
	// shutdown). The caller rebuilds it from the raft snapshot and log.
	ErrCorrupt = errors.New("state file corrupt")
	// ErrClosed means the FSM was used after Close.
	ErrClosed = errors.New("fsm closed")
)
