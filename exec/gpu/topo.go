package gpu

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/foreman-sched/foreman/fsm"
)

// ansi matches the terminal escapes nvidia-smi puts around topo -m's header.
var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// ParseTopo reads `nvidia-smi topo -m`: the GPU-by-GPU block of the
// matrix, links[i][j] being how GPU i reaches GPU j ("X", "NV18", "PIX",
// "PXB", "PHB", "NODE", "SYS"). NIC rows and columns, the affinity
// columns and the legend are ignored.
func ParseTopo(b []byte) ([][]string, error) {
	lines := strings.Split(ansi.ReplaceAllString(string(b), ""), "\n")
	// The header is the first line whose first field is GPU0.
	h := -1
	var n int
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "GPU0" {
			h = i
			for n < len(f) && f[n] == "GPU"+strconv.Itoa(n) {
				n++
			}
			break
		}
	}
	if h < 0 {
		return nil, fmt.Errorf("no header line starting with GPU0")
	}
	if n > 1024 {
		return nil, fmt.Errorf("%d devices in the header", n)
	}
	links := make([][]string, n)
	for _, line := range lines[h+1:] {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "GPU") {
			continue
		}
		i, err := strconv.Atoi(f[0][3:])
		if err != nil || i < 0 || i >= n {
			return nil, fmt.Errorf("row %q: not a device of the header", f[0])
		}
		if links[i] != nil {
			return nil, fmt.Errorf("row %s twice", f[0])
		}
		if len(f) < n+1 {
			return nil, fmt.Errorf("row %s: %d links, want %d", f[0], len(f)-1, n)
		}
		row := make([]string, n)
		for j := range n {
			if !validLink(f[1+j]) {
				return nil, fmt.Errorf("row %s column GPU%d: %q is not a link type", f[0], j, f[1+j])
			}
			row[j] = f[1+j]
		}
		if row[i] != "X" {
			return nil, fmt.Errorf("row %s: GPU%d to itself is %q, want X", f[0], i, row[i])
		}
		links[i] = row
	}
	for i, row := range links {
		if row == nil {
			return nil, fmt.Errorf("no row for GPU%d", i)
		}
	}
	return links, nil
}

func validLink(s string) bool {
	return s == "X" || fsm.LinkScore(s) > 0
}
