package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
)

// upBody reads a work stream's request body one up frame (one line) at a
// time, straight off its taken-over connection: chunked (RFC 9112 §7.1,
// what a streaming client sends) or of a stated length. By hand rather
// than through httputil's chunked reader and a bufio.Reader on top: the
// stream's goroutine spends its life blocked in here, and each layer is a
// frame the garbage collector scans on every cycle, for every stream
// (workconn.go).
type upBody struct {
	br      *bufio.Reader
	left    int64 // bytes of the current chunk (or the whole body) not read yet
	chunked bool  // more chunks may follow the current one
	line    []byte
}

// maxChunkLine bounds a chunk's size line (its extensions included) and a
// trailer line: what the reader's buffer holds.
const maxChunkLine = 1024

// newUpBody reads r's body from conn, after what net/http had read ahead
// into hijacked.
func newUpBody(r *http.Request, conn net.Conn, hijacked *bufio.Reader) *upBody {
	var src io.Reader = conn
	if n := hijacked.Buffered(); n > 0 {
		ahead, _ := hijacked.Peek(n)
		src = io.MultiReader(bytes.NewReader(bytes.Clone(ahead)), conn)
	}
	b := &upBody{br: bufio.NewReaderSize(src, maxChunkLine)}
	if len(r.TransferEncoding) > 0 && r.TransferEncoding[0] == "chunked" {
		b.chunked = true
	} else {
		b.left = max(r.ContentLength, 0)
	}
	return b
}

// readLine returns the next line less its "\n" or "\r\n" (valid until
// the next call), the body's last line even without one, and io.EOF at the
// body's end.
func (b *upBody) readLine() ([]byte, error) {
	b.line = b.line[:0]
	for {
		if b.left == 0 {
			if !b.chunked {
				if len(b.line) > 0 {
					return bytes.TrimSuffix(b.line, []byte("\r")), nil
				}
				return nil, io.EOF
			}
			if err := b.nextChunk(); err != nil {
				return nil, err
			}
			continue
		}
		if _, err := b.br.Peek(1); err != nil {
			return nil, unexpectedEOF(err)
		}
		buf, _ := b.br.Peek(int(min(int64(b.br.Buffered()), b.left)))
		take := len(buf)
		end := bytes.IndexByte(buf, '\n')
		if end >= 0 {
			take = end + 1
		}
		if len(b.line)+take > maxUpFrame+2 {
			return nil, fmt.Errorf("frame over %d bytes", maxUpFrame)
		}
		b.line = append(b.line, buf[:take]...)
		_, _ = b.br.Discard(take)
		b.left -= int64(take)
		if b.left == 0 && b.chunked {
			if err := b.chunkEnd(); err != nil {
				return nil, err
			}
		}
		if end >= 0 {
			line := bytes.TrimSuffix(b.line[:len(b.line)-1], []byte("\r"))
			if len(line) > maxUpFrame {
				return nil, fmt.Errorf("frame over %d bytes", maxUpFrame)
			}
			return line, nil
		}
	}
}

// nextChunk reads a chunk's size line; at the last chunk, the trailer and
// the body's end.
func (b *upBody) nextChunk() error {
	line, err := b.chunkLine()
	if err != nil {
		return err
	}
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i] // extensions mean nothing here
	}
	size, err := strconv.ParseUint(string(bytes.TrimSpace(line)), 16, 62)
	if err != nil {
		return fmt.Errorf("chunked body: bad chunk size %.20q", line)
	}
	if size > 0 {
		b.left = int64(size)
		return nil
	}
	for { // the trailer, up to its empty line
		line, err := b.chunkLine()
		if err != nil {
			return err
		}
		if len(line) == 0 {
			b.chunked = false
			return nil
		}
	}
}

// chunkEnd reads the line end that follows a chunk's data.
func (b *upBody) chunkEnd() error {
	line, err := b.chunkLine()
	if err != nil {
		return err
	}
	if len(line) != 0 {
		return errors.New("chunked body: a chunk's data runs past its size")
	}
	return nil
}

// chunkLine reads a line of the chunked framing, less its line end.
func (b *upBody) chunkLine() ([]byte, error) {
	line, err := b.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("chunked body: a framing line over %d bytes", maxChunkLine)
	}
	if err != nil {
		return nil, unexpectedEOF(err)
	}
	return bytes.TrimSuffix(line[:len(line)-1], []byte("\r")), nil
}

// unexpectedEOF is err, but io.ErrUnexpectedEOF for io.EOF: the body ended
// inside a chunk or a line.
func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
