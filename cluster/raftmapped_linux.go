package cluster

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

const canReleaseMappings = true

// releaseFileMappings advises MADV_DONTNEED on every mapping of the file
// at path in this process (found in /proc/self/maps by device and inode).
// The caller guarantees that nothing unmaps or remaps the file meanwhile:
// advising memory that was unmapped and reused would discard its contents.
func releaseFileMappings(path string) error {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return err
	}
	maps, err := os.Open("/proc/self/maps")
	if err != nil {
		return err
	}
	defer maps.Close()
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		// start-end perms offset major:minor inode path
		f := strings.Fields(sc.Text())
		if len(f) < 6 || len(f[1]) < 4 || f[1][3] != 's' { // shared mappings only: bbolt's
			continue
		}
		if ino, err := strconv.ParseUint(f[4], 10, 64); err != nil || ino != st.Ino {
			continue
		}
		maj, min, ok := strings.Cut(f[3], ":")
		ma, err1 := strconv.ParseUint(maj, 16, 32)
		mi, err2 := strconv.ParseUint(min, 16, 32)
		if !ok || err1 != nil || err2 != nil || uint32(ma) != unix.Major(st.Dev) || uint32(mi) != unix.Minor(st.Dev) {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || end <= start {
			return fmt.Errorf("/proc/self/maps: bad range %q", f[0])
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_DONTNEED); errno != 0 {
			return fmt.Errorf("madvise %s: %w", path, errno)
		}
	}
	return sc.Err()
}
