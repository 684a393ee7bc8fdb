package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"testing"
)

// chunked encodes pieces as a chunked body, each non-empty piece one
// chunk, as net/http's client writes a streaming request body.
func chunked(pieces ...[]byte) []byte {
	var b bytes.Buffer
	w := httputil.NewChunkedWriter(&b)
	for _, p := range pieces {
		_, _ = w.Write(p)
	}
	_ = w.Close()
	b.WriteString("\r\n")
	return b.Bytes()
}

func rawUpBody(raw []byte, isChunked bool) *upBody {
	b := &upBody{br: bufio.NewReaderSize(bytes.NewReader(raw), maxChunkLine), chunked: isChunked}
	if !isChunked {
		b.left = int64(len(raw))
	}
	return b
}

// readAll reads every line until the body ends or fails.
func readAll(b *upBody) (lines []string, err error) {
	for {
		line, err := b.readLine()
		if err != nil {
			return lines, err
		}
		lines = append(lines, string(line))
	}
}

func TestUpBodyReadsFramesAcrossChunks(t *testing.T) {
	body := chunked([]byte(`{"type":"hello"}`+"\n"+`{"type":"beat","se`), []byte(`q":1}`+"\r\n"), []byte(`{"type":"beat","seq":2}`+"\n"+`last`))
	lines, err := readAll(rawUpBody(body, true))
	want := []string{`{"type":"hello"}`, `{"type":"beat","seq":1}`, `{"type":"beat","seq":2}`, `last`}
	if !errors.Is(err, io.EOF) || strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("read %q, %v; want %q, EOF", lines, err, want)
	}
	// A body of a stated length (no chunks) reads the same.
	lines, err = readAll(rawUpBody([]byte("a\nb"), false))
	if !errors.Is(err, io.EOF) || strings.Join(lines, "|") != "a|b" {
		t.Fatalf("length-delimited: read %q, %v; want [a b], EOF", lines, err)
	}
}

func TestUpBodyKeepsWhatNetHTTPReadAhead(t *testing.T) {
	body := chunked([]byte("one\ntwo\n"), []byte("three\n"))
	cut := 9 // the first chunk's head and part of its data were read ahead
	client, server := net.Pipe()
	go func() {
		_, _ = client.Write(body[cut:])
		client.Close()
	}()
	ahead := bufio.NewReader(bytes.NewReader(body[:cut]))
	if _, err := ahead.Peek(cut); err != nil {
		t.Fatal(err)
	}
	r := &http.Request{TransferEncoding: []string{"chunked"}, ContentLength: -1}
	lines, err := readAll(newUpBody(r, server, ahead))
	if !errors.Is(err, io.EOF) || strings.Join(lines, "|") != "one|two|three" {
		t.Fatalf("read %q, %v; want [one two three], EOF", lines, err)
	}
}

func TestUpBodyRefusesBadFraming(t *testing.T) {
	for name, raw := range map[string]string{
		"size not hex":          "zz\r\nab\n\r\n0\r\n\r\n",
		"data past its size":    "2\r\nabc\n\r\n0\r\n\r\n",
		"cut inside a chunk":    "9\r\nabc",
		"cut before the end":    "3\r\nab\n\r\n",
		"framing line too long": strings.Repeat("1", maxChunkLine+1) + "\r\n",
		"frame over the limit":  string(chunked(bytes.Repeat([]byte("x"), maxUpFrame+1), []byte("\n"))),
	} {
		t.Run(name, func(t *testing.T) {
			lines, err := readAll(rawUpBody([]byte(raw), true))
			if err == nil || errors.Is(err, io.EOF) {
				t.Fatalf("read %q and then %v; want an error other than EOF", lines, err)
			}
		})
	}
}

// FuzzUpBody checks the reader against the plain reading of the same
// bytes: the lines of data, whatever chunks carry them.
func FuzzUpBody(f *testing.F) {
	f.Add([]byte(`{"type":"hello"}`+"\n"+`{"type":"beat","seq":1}`+"\r\n"), []byte{3, 0, 7})
	f.Add([]byte("a\n\nb"), []byte{1})
	f.Add([]byte(""), []byte{})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		var pieces [][]byte
		rest := data
		for _, c := range cuts {
			n := min(int(c), len(rest))
			pieces, rest = append(pieces, rest[:n]), rest[n:]
		}
		pieces = append(pieces, rest)
		var want []string
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			want = append(want, sc.Text())
		}
		for _, isChunked := range []bool{true, false} {
			raw := data
			if isChunked {
				raw = chunked(pieces...)
			}
			got, err := readAll(rawUpBody(raw, isChunked))
			if len(data) > maxUpFrame {
				continue // may be refused, never over-read: the reader bounds itself
			}
			if !errors.Is(err, io.EOF) || strings.Join(got, "\x00") != strings.Join(want, "\x00") || len(got) != len(want) {
				t.Fatalf("chunked=%v: read %q, %v; want %q, EOF", isChunked, got, err, want)
			}
		}
	})
}
