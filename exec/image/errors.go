package image

import "errors"

// Sentinel errors; Store.Get wraps them with the reference and the detail.
var (
	// ErrBadReference: the reference cannot be parsed.
	ErrBadReference = errors.New("invalid image reference")
	// ErrNotFound: the registry, layout or archive has no such image.
	ErrNotFound = errors.New("not found")
	// ErrPull: fetching or reading the image failed (network, I/O, format).
	ErrPull = errors.New("pull failed")
	// ErrUnsafe: a layer entry tried to escape the rootfs or was otherwise refused.
	ErrUnsafe = errors.New("unsafe layer entry")
	// ErrInvalidConfig: a Config field is invalid; Validate says which.
	ErrInvalidConfig = errors.New("invalid image store config")
)
