#!/usr/bin/env bash
# bench-rolling-clients.sh BIN: a rolling restart of three servers under 5,000 busy simulated
# clients (issue 38). Starts three servers of BIN on 127.0.0.1 (ports BASE+10, +20, +30), runs
# `foreman bench nodes --clients N --jobs N --job-time 20s` against the leader and, once the jobs
# are out, restarts the servers one at a time (SIGTERM, start again from the same data dir, on
# once it knows a leader: the followers first, the leader last). Then it reads a follower's
# `GET /v1/cluster/raft` every 3 s until the clients per server are within ±20% of even, waits for
# the bench, and prints the jobs that needed a second attempt, the failed ones and the bench's
# false_lost (attempts taken from a live client): each must be 0.
#
#   ROLLING_CLIENTS (5000), ROLLING_BASE_PORT (18560)
#
# Example: make build && scripts/bench-rolling-clients.sh bin/foreman
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BIN" >&2; exit 2; }
BIN=$(readlink -f "$1")
[ -x "$BIN" ] || { echo "bench-rolling-clients: $1 is not an executable" >&2; exit 2; }
N=${ROLLING_CLIENTS:-5000} BASE=${ROLLING_BASE_PORT:-18560}
W=$(mktemp -d /tmp/foreman-rolling.XXXXXX)
chmod o+x "$W"
port() { echo $((BASE + 10 * $1)); }
start_agent() { # i [again]
	local i=$1 join=""
	[ "$i" -gt 1 ] && join="--join 127.0.0.1:$(port 1)"
	[ "${2:-}" = again ] && join="--join 127.0.0.1:$(port 1),127.0.0.1:$(port 2),127.0.0.1:$(port 3)"
	# shellcheck disable=SC2086
	"$BIN" agent --name "sv$i" --data-dir "$W/n$i/data" --bind 127.0.0.1 --port "$(port "$i")" \
		--default-driver process --log-level warn --bootstrap-expect 3 $join >>"$W/n$i/log" 2>&1 &
	echo $! >"$W/n$i/pid"
}
BPID=""
stop() {
	[ -n "$BPID" ] && kill "$BPID" 2>/dev/null || true
	for i in 1 2 3; do kill "$(cat "$W/n$i/pid")" 2>/dev/null || true; done
	sleep 2
	pkill -9 -f "$W" 2>/dev/null || true
	rm -rf "$W"
}
trap stop EXIT
for i in 1 2 3; do mkdir -p "$W/n$i"; start_agent "$i"; done
export FOREMAN_ADDR=127.0.0.1:$(port 1)
for _ in $(seq 1 120); do
	[ "$("$BIN" node ls --json 2>/dev/null | grep -c '"gossip": "alive"')" = 3 ] && break
	sleep 0.5
done
L=$("$BIN" cluster raft 2>/dev/null | awk '/^Leader:/{print $3}')
echo "leader $L"
FOREMAN_ADDR=$L "$BIN" bench nodes --clients "$N" --idle 10s --submits 0 --jobs "$N" --job-time 20s \
	--kill 0 --hold 0 --json >"$W/bench.json" 2>"$W/bench.err" &
BPID=$!
spread() {
	curl -s "http://$1/v1/cluster/raft" | python3 -c "
import json, sys
d = json.load(sys.stdin)
print(' '.join(str(s.get('clients')) for s in d.get('servers', [])))"
}
for _ in $(seq 1 600); do grep -q "jobs submitted for the clients" "$W/bench.err" && break; sleep 1; done
echo "attached: $(grep 'attached in' "$W/bench.err" | head -1)"
order=""
for i in 1 2 3; do [ "127.0.0.1:$(port "$i")" != "$L" ] && order="$order $i"; done
for i in 1 2 3; do [ "127.0.0.1:$(port "$i")" = "$L" ] && order="$order $i"; done
t0=$(date +%s)
for i in $order; do
	kill "$(cat "$W/n$i/pid")"
	while kill -0 "$(cat "$W/n$i/pid")" 2>/dev/null; do sleep 0.2; done
	start_agent "$i" again
	for _ in $(seq 1 120); do
		FOREMAN_ADDR=127.0.0.1:$(port "$i") "$BIN" cluster raft --json 2>/dev/null | grep -q '"leader": "[^"]' && break
		sleep 1
	done
	echo "sv$i back after $(($(date +%s) - t0)) s; clients per server $(spread "127.0.0.1:$(port "$i")")"
done
t1=$(date +%s)
echo "rolling restart done in $((t1 - t0)) s"
for _ in $(seq 1 40); do
	s=$(spread "127.0.0.1:$(port 1)")
	ok=$(python3 -c "
c = [int(x) for x in '$s'.split() if x != 'None']
e = $N / 3
print('even' if len(c) == 3 and sum(c) >= 0.98 * $N and all(abs(x - e) <= 0.2 * e for x in c) else 'no')")
	echo "+$(($(date +%s) - t1)) s after the last restart: $s ($ok)"
	[ "$ok" = even ] && break
	sleep 3
done
wait "$BPID"
BPID=""
python3 -c "
import json
d = json.load(open('$W/bench.json'))
print('bench: jobs', d.get('jobs'), 'false_lost', d.get('false_lost'), 'first_report_error', d.get('first_report_error'))"
"$BIN" job ls --limit 0 --json | python3 -c "
import json, sys
d = json.load(sys.stdin)
js = d if isinstance(d, list) else d.get('jobs', d)
print('jobs', len(js), 'with a second attempt', sum(1 for j in js if j.get('attempts', 0) > 1),
      'failed', sum(1 for j in js if j.get('state') == 'failed'))"
