package exec

import (
	"os"
	"sync"
	"unicode/utf8"
)

// logWriter appends to a file and, when it would grow past max bytes,
// renames it to <path>.1 (replacing the older copy) and starts a new one. So
// at most ~2*max bytes per stream are on disk.
//
// Why a pipe and a writer rather than handing the file to the job: rotation
// must move bytes the job has not written yet to a new file, which only the
// reader of a pipe can do exactly (copytruncate loses or duplicates output).
// The copy costs one goroutine per stream in the supervisor.
type logWriter struct {
	mu   sync.Mutex
	path string
	max  int64
	f    *os.File
	size int64
	// tail keeps the last tailMax bytes for the result's stderr tail.
	tail    []byte
	tailMax int
}

func newLogWriter(path string, max int64, tailMax int) (*logWriter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &logWriter{path: path, max: max, f: f, size: fi.Size(), tailMax: tailMax}, nil
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keepTail(p)
	n := 0
	for len(p) > 0 {
		room := w.max - w.size
		if room <= 0 {
			if err := w.rotate(); err != nil {
				return n, err
			}
			room = w.max
		}
		chunk := p
		if int64(len(chunk)) > room {
			chunk = chunk[:room]
		}
		m, err := w.f.Write(chunk)
		n += m
		w.size += int64(m)
		if err != nil {
			return n, err
		}
		p = p[m:]
	}
	return n, nil
}

func (w *logWriter) rotate() error {
	if err := w.f.Close(); err != nil {
		return err
	}
	if err := os.Rename(w.path, w.path+".1"); err != nil {
		return err
	}
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	w.f, w.size = f, 0
	return nil
}

func (w *logWriter) keepTail(p []byte) {
	if w.tailMax <= 0 {
		return
	}
	if len(p) >= w.tailMax {
		w.tail = append(w.tail[:0], p[len(p)-w.tailMax:]...)
		return
	}
	w.tail = append(w.tail, p...)
	if over := len(w.tail) - w.tailMax; over > 0 {
		w.tail = append(w.tail[:0], w.tail[over:]...)
	}
}

// Tail returns the last bytes written, cut to start on a rune boundary and
// made valid UTF-8 so it survives JSON unchanged.
func (w *logWriter) Tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.tail
	for i := 0; i < len(b) && i < utf8.UTFMax && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
	}
	s := string(b)
	if !utf8.ValidString(s) {
		s = toValidUTF8(s)
	}
	return s
}

// toValidUTF8 replaces invalid bytes with '?' so the length never grows.
func toValidUTF8(s string) string {
	out := make([]byte, 0, len(s))
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && size == 1 {
			out = append(out, '?')
		} else {
			out = append(out, s[:size]...)
		}
		s = s[size:]
	}
	return string(out)
}

func (w *logWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.f.Close()
}
