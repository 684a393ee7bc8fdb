package exec

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestAckBufferedAfterDeadline: an ack that arrived while this process
// was stopped past the handoff deadline is still read once the spare is
// gone, so the worker does not start the attempt a second time.
func TestAckBufferedAfterDeadline(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours := os.NewFile(uintptr(fds[0]), "worker")
	theirs := os.NewFile(uintptr(fds[1]), "spare")
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		t.Fatal(err)
	}
	conn := c.(*net.UnixConn)
	defer conn.Close()
	if _, err := theirs.Write([]byte{ctlAck}); err != nil {
		t.Fatal(err)
	}
	theirs.Close() // the spare is gone
	// What the worker saw after its stop: the deadline already past.
	conn.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read past its deadline: %v, want the deadline error this test is about", err)
	}
	if !ackBuffered(conn) {
		t.Fatal("the ack sent before the spare died was not read: the attempt would be started twice")
	}
}
