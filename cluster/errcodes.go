package cluster

import (
	"errors"
	"fmt"
	"strings"

	"github.com/foreman-sched/foreman/fsm"
)

// errorCodes maps sentinels to the codes a forwarded apply carries, so
// errors.Is still works on the follower that forwarded it.
var errorCodes = []struct {
	code string
	err  error
}{
	{"not_leader", ErrNotLeader},
	{"no_leader", ErrNoLeader},
	{"indeterminate", ErrIndeterminate},
	{"shutdown", ErrShutdown},
	{"bad_command", fsm.ErrBadCommand},
	{"unsupported_version", fsm.ErrUnsupportedVersion},
	{"not_found", fsm.ErrNotFound},
	{"stale_token", fsm.ErrStaleToken},
	{"conflict", fsm.ErrConflict},
	{"feature_held", fsm.ErrFeatureHeld},
}

func errorCode(err error) string {
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return "apply_error"
}

// decodeError rebuilds an error from its code and message. The message
// already starts with the sentinel's text; it is kept whole.
func decodeError(code, msg string) error {
	for _, c := range errorCodes {
		if c.code == code {
			rest := strings.TrimPrefix(strings.TrimPrefix(msg, c.err.Error()), ": ")
			if rest == "" || rest == msg && msg == c.err.Error() {
				return c.err
			}
			return fmt.Errorf("%w: %s", c.err, rest)
		}
	}
	return errors.New(msg)
}
