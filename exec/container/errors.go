package container

import "errors"

// Sentinel errors. Start wraps them with %w and adds the detail a user needs.
var (
	// ErrUnavailable: this host cannot run containers (not Linux, not root,
	// no cgroups). Available wraps it with what is missing.
	ErrUnavailable = errors.New("container driver unavailable")
	// ErrCommandNotFound: argv[0] does not exist in the container's rootfs.
	ErrCommandNotFound = errors.New("not found in rootfs")
	// ErrNoCommand: the job has no command and its image has no Entrypoint/Cmd.
	ErrNoCommand = errors.New("no command: the job has none and the image has no Entrypoint or Cmd")
	// ErrUser: the job's user cannot be resolved in the rootfs.
	ErrUser = errors.New("invalid user")
	// ErrMemoryTooLow: the memory limit is too small for the container to start.
	ErrMemoryTooLow = errors.New("memory limit too low to start the container")
	// ErrInvalidTask: a Task field is missing or malformed.
	ErrInvalidTask = errors.New("invalid task")
	// ErrStart: libcontainer failed to create or start the container.
	ErrStart = errors.New("container start failed")
	// ErrInvalidConfig: a Config field is invalid; Validate says which.
	ErrInvalidConfig = errors.New("invalid container driver config")
)
