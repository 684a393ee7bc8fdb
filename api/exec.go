package api

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Exec (docs/api.md "Exec"): POST /v1/jobs/{id}/exec with an ExecRequest
// body and the headers "Connection: Upgrade" and "Upgrade: foreman-exec/1".
// Refusals are ordinary JSON errors; once the command runs the node
// answers 101 Switching Protocols and from then on both sides send frames
// on the connection: one byte kind, four bytes big-endian payload length,
// the payload. The last frame from the node is ExecExit (or ExecError).
// Any node answers: the request is proxied, still an upgrade, to the node
// of the attempt.
const ExecUpgrade = "foreman-exec/1"

// Frame kinds.
const (
	ExecStdin      byte = 1 // client → node: bytes for the command's stdin
	ExecStdout     byte = 2 // node → client: the command's stdout (the terminal, with TTY)
	ExecStderr     byte = 3 // node → client: the command's stderr (never with TTY)
	ExecCloseStdin byte = 4 // client → node: end of stdin (empty payload)
	ExecResize     byte = 5 // client → node: the terminal's size, uint16 columns then uint16 rows
	ExecExit       byte = 6 // node → client: the command ended; int32 exit code (128+N for signal N)
	ExecError      byte = 7 // node → client: the stream failed; the payload says why
)

// MaxExecFrame bounds a frame's payload.
const MaxExecFrame = 64 << 10

// ExecRequest is the body of POST /v1/jobs/{id}/exec.
type ExecRequest struct {
	// Command is the argv to run (required); it is looked up in the
	// attempt's PATH.
	Command []string `json:"command"`
	// TTY runs the command on a terminal: one output stream, resizable.
	TTY bool `json:"tty,omitempty"`
	// Stdin forwards the client's stdin; without it the command reads
	// /dev/null (or the terminal, which then gets no input).
	Stdin bool `json:"stdin,omitempty"`
	// Width and Height are the terminal's first size (TTY only).
	Width  int `json:"width,omitempty"`
	Height int `json:"height,omitempty"`
}

// WindowSize is a terminal's size in characters.
type WindowSize struct{ Width, Height int }

// ExecStreams connects an exec to the caller's side.
type ExecStreams struct {
	// Stdin is read to its end and sent (nil: none); ExecRequest.Stdin
	// must be set for the command to see it.
	Stdin io.Reader
	// Stdout and Stderr receive the command's output (nil: discarded).
	Stdout, Stderr io.Writer
	// Resize sends the terminal's new size each time one arrives (TTY).
	Resize <-chan WindowSize
}

// WriteExecFrame writes one frame.
func WriteExecFrame(w io.Writer, kind byte, payload []byte) error {
	if len(payload) > MaxExecFrame {
		return fmt.Errorf("exec frame of %d bytes: over the %d limit", len(payload), MaxExecFrame)
	}
	var hdr [5]byte
	hdr[0] = kind
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	if _, err := w.Write(append(hdr[:], payload...)); err != nil {
		return err
	}
	return nil
}

// ReadExecFrame reads one frame into buf (which must hold MaxExecFrame
// bytes) and returns its kind and payload (a slice of buf).
func ReadExecFrame(r io.Reader, buf []byte) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxExecFrame || int(n) > len(buf) {
		return 0, nil, fmt.Errorf("exec frame of %d bytes: over the %d limit", n, MaxExecFrame)
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		return 0, nil, err
	}
	return hdr[0], buf[:n], nil
}

// ExecWriter sends each Write as frames of one kind; safe for concurrent
// use with the other writers of the same connection when they share mu.
type ExecWriter struct {
	W    io.Writer
	Kind byte
	Mu   *sync.Mutex
}

func (e ExecWriter) Write(p []byte) (int, error) {
	e.Mu.Lock()
	defer e.Mu.Unlock()
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), MaxExecFrame)]
		if err := WriteExecFrame(e.W, e.Kind, chunk); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

// ErrExecStream means the exec's stream broke before the command's exit
// code arrived (the connection dropped, or the node reported an error).
var ErrExecStream = errors.New("exec stream failed")

// Exec runs req.Command inside job id's live attempt (attempt 0: its
// latest) and returns the command's exit code once it ended. The job is
// never touched: cancelling ctx (or the connection dropping) kills the
// command only. A refusal (no such job, the job is not running, no exec
// permission) is an *Error.
func (c *Client) Exec(ctx context.Context, id string, attempt int, req ExecRequest, s ExecStreams) (int, error) {
	hdr := http.Header{}
	hdr.Set("Connection", "Upgrade")
	hdr.Set("Upgrade", ExecUpgrade)
	resp, err := c.send(ctx, Request{Method: http.MethodPost, Path: jobPath(id) + "/exec", Query: attemptQuery(attempt), Body: req, Header: hdr})
	if err != nil {
		return -1, err
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if resp.StatusCode != http.StatusSwitchingProtocols || !ok {
		resp.Body.Close()
		return -1, fmt.Errorf("%w: %s answered %s without switching to the exec stream", ErrExecStream, c.base.Host, resp.Status)
	}
	defer rwc.Close()
	stop := context.AfterFunc(ctx, func() { rwc.Close() })
	defer stop()

	var mu sync.Mutex
	send := func(kind byte, p []byte) error {
		mu.Lock()
		defer mu.Unlock()
		return WriteExecFrame(rwc, kind, p)
	}
	done := make(chan struct{})
	defer close(done)
	if s.Stdin != nil {
		go func() {
			if _, err := io.Copy(ExecWriter{W: rwc, Kind: ExecStdin, Mu: &mu}, s.Stdin); err == nil {
				_ = send(ExecCloseStdin, nil)
			}
		}()
	}
	if s.Resize != nil {
		go func() {
			for {
				select {
				case <-done:
					return
				case ws := <-s.Resize:
					var p [4]byte
					binary.BigEndian.PutUint16(p[:2], uint16(ws.Width))
					binary.BigEndian.PutUint16(p[2:], uint16(ws.Height))
					_ = send(ExecResize, p[:])
				}
			}
		}()
	}
	out := func(w io.Writer, p []byte) error {
		if w == nil {
			return nil
		}
		_, err := w.Write(p)
		return err
	}
	buf := make([]byte, MaxExecFrame)
	for {
		kind, p, err := ReadExecFrame(rwc, buf)
		if err != nil {
			if ctx.Err() != nil {
				return -1, ctx.Err()
			}
			return -1, fmt.Errorf("%w: %v", ErrExecStream, err)
		}
		switch kind {
		case ExecStdout:
			err = out(s.Stdout, p)
		case ExecStderr:
			err = out(s.Stderr, p)
		case ExecExit:
			if len(p) != 4 {
				return -1, fmt.Errorf("%w: exit frame of %d bytes", ErrExecStream, len(p))
			}
			return int(int32(binary.BigEndian.Uint32(p))), nil
		case ExecError:
			return -1, fmt.Errorf("%w: %s", ErrExecStream, p)
		}
		if err != nil {
			return -1, fmt.Errorf("writing the command's output: %w", err)
		}
	}
}
