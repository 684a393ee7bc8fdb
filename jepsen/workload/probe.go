package workload

import (
	"strconv"
	"time"
)

// ProbeScript is the job body: it appends start and end records to a
// per-node file (long probes also a tick every 0.5 s, so an execution that
// was killed, and so never wrote end, still shows how long it ran) and, on completion, an effect to the shared fencing sink
// file. Appends of one short line are atomic (O_APPEND), and every
// namespace shares one filesystem and one clock, so the records of all
// nodes can be compared.
const ProbeScript = `d="$JEPSEN_DIR"; n="$FOREMAN_NODE"
r="$FOREMAN_JOB_ID $FOREMAN_ATTEMPT $FOREMAN_FENCING_TOKEN $n"
echo "start $r $(date +%s%N)" >> "$d/exec-$n.log"
t="${JEPSEN_TICKS:-0}"; i=0
if [ "$t" -eq 0 ]; then sleep "$JEPSEN_SLEEP"; fi
while [ "$i" -lt "$t" ]; do
  sleep 0.5; echo "tick $r $(date +%s%N)" >> "$d/exec-$n.log"; i=$((i+1))
done
echo "end $r $(date +%s%N)" >> "$d/exec-$n.log"
echo "effect $r $(date +%s%N)" >> "$d/sink.log"
if [ -n "$FOREMAN_ARRAY_INDEX" ] && [ "$FOREMAN_ARRAY_INDEX" = "${JEPSEN_FAIL_INDEX:-}" ]; then exit 1; fi
exit "${JEPSEN_EXIT:-0}"
`

// TickEvery is the probe's tick period.
const TickEvery = 500 * time.Millisecond

// ProbeSpec is the JobSpec of one probe job; probes of a second or more
// tick instead of sleeping in one go.
func ProbeSpec(name, dir, sleep string) map[string]any {
	ticks := 0
	if f, err := strconv.ParseFloat(sleep, 64); err == nil && f >= 1 {
		ticks = int(f * float64(time.Second/TickEvery))
	}
	return map[string]any{
		"name":         name,
		"command":      []string{"/bin/sh", "-c", ProbeScript},
		"driver":       "process",
		"max_attempts": 5,
		"env": map[string]string{
			"JEPSEN_DIR":   dir,
			"JEPSEN_SLEEP": sleep,
			"JEPSEN_TICKS": strconv.Itoa(ticks),
			"PATH":         "/usr/local/bin:/usr/bin:/bin",
		},
	}
}
