package cluster

import "testing"

func TestTrailingLogsFor(t *testing.T) {
	for _, tc := range []struct {
		budget, bytes, entries, configured, want uint64
	}{
		{64 << 20, 0, 0, 10240, 10240},                   // nothing stored yet: as configured
		{64 << 20, 480 << 20, 1000, 10240, 133},          // ~490 KiB entries: ~64 MiB of them
		{64 << 20, 100 << 20, 1 << 20, 10240, 10240},     // 100 B entries: the count binds
		{1 << 20, 1 << 30, 1000, 10240, minTrailingLogs}, // huge entries: never below the floor
		{64 << 20, 1 << 20, 1000, 10, minTrailingLogs},   // a configured count below the floor
	} {
		if got := trailingLogsFor(tc.budget, tc.bytes, tc.entries, tc.configured); got != tc.want {
			t.Errorf("trailingLogsFor(%d, %d, %d, %d) = %d, want %d", tc.budget, tc.bytes, tc.entries, tc.configured, got, tc.want)
		}
	}
}
