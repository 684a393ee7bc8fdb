package fsm

import "syscall"

const canReleaseMapping = true

// releaseMapping advises MADV_DONTNEED on [addr, addr+size) of a shared
// read-only file mapping: the kernel unmaps the pages; the file and the
// page cache are untouched.
func releaseMapping(addr uintptr, size int64) error {
	if addr == 0 || size <= 0 {
		return nil
	}
	if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, addr, uintptr(size), syscall.MADV_DONTNEED); errno != 0 {
		return errno
	}
	return nil
}
