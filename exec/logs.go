package exec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// tailPoll is how often a followed log is checked for growth. Tailing a
// file is the one place where a short poll is used: the writer is another
// process, and an fsnotify dependency would buy little for a human-facing
// stream. It starts at tailPollMin after output (or the start) and backs
// off to tailPoll: a short job's end is seen within milliseconds (the
// fixed 100 ms poll was most of `foreman run -- true`'s 120 ms), a quiet
// long one costs ten stats a second.
const (
	tailPoll    = 100 * time.Millisecond
	tailPollMin = 2 * time.Millisecond
)

// StreamLog writes an attempt's stdout or stderr to out: the rotated part
// first, then the current file. With follow it keeps streaming until the
// attempt has finished and its last bytes are written. ErrNoSuchAttempt when
// the attempt's files are not on this node.
func (w *Worker) StreamLog(ctx context.Context, jobID string, attempt int, stream string, follow bool, out io.Writer) error {
	var name string
	switch stream {
	case "stdout", "":
		name = StdoutName
	case "stderr":
		name = StderrName
	default:
		return fmt.Errorf("%w: %q", ErrBadStream, stream)
	}
	dir := w.AttemptDir(jobID, attempt)
	if !exists(filepath.Join(dir, TaskFileName)) {
		return fmt.Errorf("%w: job %s attempt %d", ErrNoSuchAttempt, jobID, attempt)
	}
	return streamFile(ctx, dir, filepath.Join(dir, name), follow, out, w.attemptEnded)
}

// streamFile copies path to out; with follow until result.json appears in
// dir. ended (nil: none) returns a channel closed when an attempt ends
// here: the follow then looks at once instead of at its next poll.
func streamFile(ctx context.Context, dir, path string, follow bool, out io.Writer, ended func() <-chan struct{}) error {
	if err := copyFile(path+".1", out); err != nil {
		return err
	}
	finished := func() bool { return exists(filepath.Join(dir, ResultFileName)) }
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	wait := tailPollMin
	for {
		var endedC <-chan struct{}
		if ended != nil {
			endedC = ended() // before looking: an end after the look wakes us
		}
		// Read "finished" before copying: result.json is written only
		// after all output reached the file, so one more copy gets it all.
		done := !follow || finished()
		if f == nil {
			var err error
			f, err = os.Open(path)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			if err != nil {
				f = nil
			}
		}
		if f != nil {
			n, err := io.Copy(out, f)
			if err != nil {
				return err
			}
			if n > 0 {
				wait = tailPollMin
			}
			// Rotated since we opened it: what we hold is now path.1 and
			// fully read; continue with the new file.
			if cur, err := os.Stat(path); err == nil {
				if held, err := f.Stat(); err == nil && !os.SameFile(cur, held) {
					f.Close()
					f = nil
					continue
				}
			}
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-endedC:
		case <-time.After(wait):
		}
		wait = min(2*wait, tailPoll)
	}
}

func copyFile(path string, out io.Writer) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(out, f)
	return err
}
