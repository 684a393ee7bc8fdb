package exec

import "errors"

var (
	// ErrUnknownDriver means a task names a driver that is not registered.
	ErrUnknownDriver = errors.New("unknown driver")
	// ErrCommandNotFound means the job's command does not resolve to an executable.
	ErrCommandNotFound = errors.New("command not found")
	// ErrNoCommand means the job spec has an empty command.
	ErrNoCommand = errors.New("job has no command")
	// ErrNoSuchAttempt means the attempt's files are not on this node.
	ErrNoSuchAttempt = errors.New("no such attempt on this node")
	// ErrBadStream means a log stream other than stdout or stderr was asked for.
	ErrBadStream = errors.New("unknown log stream (want stdout or stderr)")
	// ErrBadTaskFile means task.json is missing or unreadable.
	ErrBadTaskFile = errors.New("bad task file")
	// ErrBadSignal means a kill_signal names no known signal.
	ErrBadSignal = errors.New("bad signal")
	// ErrUserNotAllowed means a job asks to run as a user this node's
	// WorkerConfig.JobUsers does not list.
	ErrUserNotAllowed = errors.New("user not allowed on this node")
	// ErrJobUserCannotReach means process jobs of a user other than root
	// cannot reach their attempt dirs: a dir above the data dir is not
	// searchable by others (CheckJobUserReach).
	ErrJobUserCannotReach = errors.New("job user cannot reach the data dir")
	// ErrInvalidConfig means a WorkerConfig failed Validate.
	ErrInvalidConfig = errors.New("invalid exec config")
)

// Errors of foreman exec (execsession.go).
var (
	// ErrAttemptEnded means the attempt has finished: there is nothing
	// left to run a command in.
	ErrAttemptEnded = errors.New("the attempt has ended")
	// ErrExecUnsupported means the attempt's driver has no process to run
	// a command beside (the http driver).
	ErrExecUnsupported = errors.New("exec is not supported by this driver")
	// ErrExecStart means the command could not be started inside the
	// attempt (not found there, or the attempt's container is gone).
	ErrExecStart = errors.New("exec: cannot start the command")
)
