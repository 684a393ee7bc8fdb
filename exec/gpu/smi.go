package gpu

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"strconv"
	"strings"
	"time"
)

// smiFallbackDir is where GPU cloud images keep the driver's tools, off PATH.
const smiFallbackDir = "/usr/local/nvidia/bin"

// QueryFields is the --query-gpu list, in QueryRow's column order.
const QueryFields = "index,uuid,name,pci.bus_id,memory.total,compute_cap,driver_version"

// QueryRow is one line of `nvidia-smi --query-gpu=QueryFields
// --format=csv,noheader,nounits`.
type QueryRow struct {
	Index     int
	UUID      string
	Model     string
	BusID     string // normalized (NormalizeBusID)
	MemoryMiB int64
	Compute   string // "9.0"; "" when nvidia-smi cannot say
	Driver    string
}

// findSMI returns the nvidia-smi to run: the configured path when it is
// an executable file, else the one on PATH, else smiFallbackDir's.
func findSMI(configured string) string {
	if configured != "" {
		if executable(configured) {
			return configured
		}
		return ""
	}
	if p, err := osexec.LookPath("nvidia-smi"); err == nil {
		return p
	}
	if p := smiFallbackDir + "/nvidia-smi"; executable(p) {
		return p
	}
	return ""
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// smiRunner runs nvidia-smi with a deadline per call.
type smiRunner struct {
	path    string
	timeout time.Duration
}

// ErrSMITimeout means nvidia-smi did not answer within Config.Timeout (a
// wedged driver does that); it was killed.
var ErrSMITimeout = errors.New("nvidia-smi did not answer in time")

func (r smiRunner) run(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	cmd := osexec.CommandContext(ctx, r.path, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	// A child that keeps the pipes open after nvidia-smi is killed must
	// not hold Wait either.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		return nil, fmt.Errorf("%s %s: %w (%s): killed", r.path, strings.Join(args, " "), ErrSMITimeout, r.timeout)
	}
	if err != nil {
		msg := strings.TrimSpace(errb.String())
		if msg == "" {
			msg = strings.TrimSpace(out.String())
		}
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		return nil, fmt.Errorf("%s %s: %v: %s", r.path, strings.Join(args, " "), err, msg)
	}
	if out.Len() > 4<<20 {
		return nil, fmt.Errorf("%s %s: over 4 MiB of output", r.path, strings.Join(args, " "))
	}
	return out.Bytes(), nil
}

// ParseQuery reads --query-gpu CSV rows. A row that does not parse is
// skipped and described in bad; "[N/A]" and "[Not Supported]" read as
// unknown.
func ParseQuery(b []byte) (rows []QueryRow, bad []string) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		r, err := parseQueryRow(text)
		if err != nil {
			bad = append(bad, fmt.Sprintf("line %d: %v", line, err))
			continue
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		bad = append(bad, err.Error())
	}
	return rows, bad
}

func parseQueryRow(text string) (QueryRow, error) {
	f := strings.Split(text, ",")
	if len(f) != 7 {
		return QueryRow{}, fmt.Errorf("%d fields, want 7 (%s)", len(f), QueryFields)
	}
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
		if strings.HasPrefix(f[i], "[") { // [N/A], [Not Supported], [Unknown Error]
			f[i] = ""
		}
	}
	var r QueryRow
	var err error
	if r.Index, err = strconv.Atoi(f[0]); err != nil || r.Index < 0 || r.Index > 1023 {
		return r, fmt.Errorf("index %q: want 0..1023", f[0])
	}
	if r.UUID = f[1]; !validUUID(r.UUID) {
		return r, fmt.Errorf("uuid %q: want GPU-<hex and dashes>", f[1])
	}
	if r.Model = f[2]; !printable(r.Model) {
		return r, fmt.Errorf("name %q: not printable text", f[2])
	}
	if r.BusID, err = NormalizeBusID(f[3]); err != nil {
		return r, fmt.Errorf("pci.bus_id: %w", err)
	}
	if f[4] != "" {
		if r.MemoryMiB, err = strconv.ParseInt(f[4], 10, 64); err != nil || r.MemoryMiB < 0 {
			return r, fmt.Errorf("memory.total %q: want MiB", f[4])
		}
	}
	if f[5] != "" {
		if _, _, err := ParseCompute(f[5]); err != nil {
			return r, fmt.Errorf("compute_cap: %w", err)
		}
		r.Compute = f[5]
	}
	if f[6] != "" && !isVersion(f[6]) {
		return r, fmt.Errorf("driver_version %q: want a version", f[6])
	}
	r.Driver = f[6]
	return r, nil
}

// ParseCompute reads a compute capability ("9.0", "12.1").
func ParseCompute(s string) (major, minor int, err error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), ".")
	if ok {
		major, err = strconv.Atoi(a)
		if err == nil {
			minor, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || major < 0 || minor < 0 || major > 99 || minor > 99 {
		return 0, 0, fmt.Errorf("%q: want MAJOR.MINOR, such as 9.0", s)
	}
	return major, minor, nil
}

// ParseVersions reads "Driver Version : …" and "CUDA Version : …" from
// `nvidia-smi -q`'s header.
func ParseVersions(b []byte) (driver, cuda string) {
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if !isVersion(v) {
			continue
		}
		switch strings.TrimSpace(k) {
		case "Driver Version":
			driver = v
		case "CUDA Version":
			cuda = v
		}
	}
	return driver, cuda
}
