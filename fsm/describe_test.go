package fsm

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// Every command type decodes, for the dump, into its own payload type;
// a type this build does not know and bytes that are no command are errors.
func TestDescribeCommand(t *testing.T) {
	at := time.Date(2026, 11, 28, 19, 42, 49, 0, time.UTC)
	for typ, proto := range payloadTypes {
		cmd, err := NewCommand(typ, at, proto)
		if err != nil {
			t.Fatal(err)
		}
		b, err := cmd.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, payload, err := DescribeCommand(b)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if got.Type != typ || !got.At.Equal(at) {
			t.Fatalf("%s: decoded as %s at %s", typ, got.Type, got.At)
		}
		if want := reflect.PointerTo(reflect.TypeOf(proto)); reflect.TypeOf(payload) != want {
			t.Fatalf("%s: payload is a %T, want %s", typ, payload, want)
		}
	}
	place, _ := NewCommand(CmdPlace, at, Place{Placements: []Placement{{JobID: "j1", Node: "n1"}}})
	b, _ := place.Encode()
	if _, p, err := DescribeCommand(b); err != nil || p.(*Place).Placements[0].JobID != "j1" {
		t.Fatalf("place: %+v, %v", p, err)
	}
	unknown := &Command{V: CommandVersion, Type: "from_a_newer_build", At: at, Payload: []byte{0xa0}}
	b, _ = unknown.Encode()
	if cmd, p, err := DescribeCommand(b); !errors.Is(err, ErrBadCommand) || cmd == nil || p != nil {
		t.Fatalf("unknown type: %v, %v, %v", cmd, p, err)
	}
	if _, _, err := DescribeCommand([]byte{0xff, 0x00}); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("garbage: %v", err)
	}
}
