package workload

// ProbeScript is the job body: it appends start and end records to a
// per-node file and, on completion, an effect to the shared fencing sink
// file. Appends of one short line are atomic (O_APPEND), and every
// namespace shares one filesystem and one clock, so the records of all
// nodes can be compared.
const ProbeScript = `d="$JEPSEN_DIR"; n="$FOREMAN_NODE"
r="$FOREMAN_JOB_ID $FOREMAN_ATTEMPT $FOREMAN_FENCING_TOKEN $n"
echo "start $r $(date +%s%N)" >> "$d/exec-$n.log"
sleep "$JEPSEN_SLEEP"
echo "end $r $(date +%s%N)" >> "$d/exec-$n.log"
echo "effect $r $(date +%s%N)" >> "$d/sink.log"
`

// ProbeSpec is the JobSpec of one probe job.
func ProbeSpec(name, dir, sleep string) map[string]any {
	return map[string]any{
		"name":         name,
		"command":      []string{"/bin/sh", "-c", ProbeScript},
		"driver":       "process",
		"max_attempts": 5,
		"env": map[string]string{
			"JEPSEN_DIR":   dir,
			"JEPSEN_SLEEP": sleep,
			"PATH":         "/usr/local/bin:/usr/bin:/bin",
		},
	}
}
