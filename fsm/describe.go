package fsm

import (
	"fmt"
	"reflect"
)

// DescribeCommand decodes a raft log entry's command and its payload into
// the payload's type, for a readable dump of the log (foreman operator raft
// dump). The payload is nil when its type is unknown to this build.
func DescribeCommand(data []byte) (*Command, any, error) {
	cmd, err := DecodeCommand(data)
	if err != nil {
		return nil, nil, err
	}
	proto, ok := payloadTypes[cmd.Type]
	if !ok {
		return cmd, nil, fmt.Errorf("%w: unknown command type %q", ErrBadCommand, cmd.Type)
	}
	p := reflect.New(reflect.TypeOf(proto))
	if err := cmd.DecodePayload(p.Interface()); err != nil {
		return cmd, nil, err
	}
	return cmd, p.Interface(), nil
}
