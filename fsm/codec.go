package fsm

import (
	"encoding/json"
	"fmt"
	"time"
)

// The record codec. Every value stored in bbolt goes through encode and
// decode so the format can be swapped (for a faster one) in one place; the
// schema version in meta must change with it. JSON is deterministic here:
// struct fields keep their order and encoding/json sorts map keys.

func encode(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return b, nil
}

func decode(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: decode %T: %v", ErrCorrupt, v, err)
	}
	return nil
}

// idemRecord is the value stored under an idempotency key.
type idemRecord struct {
	JobID      string    `json:"job_id"`
	RecordedAt time.Time `json:"recorded_at"`
}

// Queue is a named concurrency limit.
type Queue struct {
	Name       string `json:"name"`
	MaxRunning int    `json:"max_running"`
}
