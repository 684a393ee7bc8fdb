package cluster

import (
	"encoding/json"
	"testing"
)

// TestFramesByHandAreMarshal's: the work and ping frames written by hand
// are byte for byte what json.Marshal writes for the same WorkFrame.
func TestFramesByHandAreMarshal(t *testing.T) {
	works := []any{
		nil,
		[]map[string]any{},
		[]map[string]any{{"job_id": "01J<&>", "num": 2, "spec": map[string]any{"command": []string{"sh", "-c", "echo \"hi\"\n"}}}},
	}
	for _, w := range works {
		b, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		for _, contact := range []bool{false, true} {
			for _, index := range []uint64{0, 1, 1 << 63} {
				want, err := json.Marshal(WorkFrame{Type: WorkFrameWork, Index: index, LeaderContact: contact, Work: b})
				if err != nil {
					t.Fatal(err)
				}
				if got := appendWork(nil, index, contact, b); string(got) != string(want) {
					t.Errorf("work frame:\n got %s\nwant %s", got, want)
				}
				for _, acked := range []uint64{0, 7} {
					want, err := json.Marshal(WorkFrame{Type: WorkFramePing, Index: index, LeaderContact: contact, Acked: acked})
					if err != nil {
						t.Fatal(err)
					}
					if got := appendPing(nil, index, contact, acked); string(got) != string(want) {
						t.Errorf("ping frame:\n got %s\nwant %s", got, want)
					}
				}
			}
		}
	}
}
