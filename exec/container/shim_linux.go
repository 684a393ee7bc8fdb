package container

// The PID-1 shim's fast path is a C constructor (shim_linux.c) that runs
// before the Go runtime whenever this binary is started as `shim`; this
// import makes cgo compile it into every binary that links the driver.

// #cgo CFLAGS: -Wall -O2
import "C"
