#!/usr/bin/env bash
# bench-compare.sh OLD_BIN NEW_BIN [ROUNDS]: the foreman bench figures of `make bench` (the
# cluster phase: dev agent, three agents, a fourth for the sleep waves) for two builds side by
# side in one run. The builds take turns (old new, new old, ...), each round on a fresh cluster of
# its own binary, so a drift of the shared machine's speed hits both alike; the table gives each
# figure's median over the rounds and the new/old ratio of the medians.
#
#   BENCH_QUICK  1 (default) for the smaller job counts; 0 for make bench's full sizes
#   BENCH_BASE_PORT, BENCH_AGENT_ARGS  as for scripts/bench.sh
#
# Example: git worktree add /tmp/prev HEAD~5 && make -C /tmp/prev build &&
#          make build && scripts/bench-compare.sh /tmp/prev/bin/foreman bin/foreman 3
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 OLD_BIN NEW_BIN [ROUNDS]" >&2; exit 2; }
OLD=$(readlink -f "$1") NEW=$(readlink -f "$2") ROUNDS=${3:-3}
for b in "$OLD" "$NEW"; do [ -x "$b" ] || { echo "bench-compare: $b is not an executable" >&2; exit 2; }; done
W=$(mktemp -d /tmp/foreman-bench-compare.XXXXXX)
chmod o+x "$W" # jobs run as nobody by default and must reach their attempt dirs
measure() { # label bin round
  echo "bench-compare: round $3: $1 ($2)" >&2
  BENCH_RUNS=1 BENCH_QUICK=${BENCH_QUICK:-1} BENCH_DIR="$W/$1-$3" FOREMAN_BIN=$2 \
    ./scripts/bench.sh measure 2>>"$W/log" || echo "bench-compare: round $3 of $1 failed (see $W/log)" >&2
}
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then measure old "$OLD" "$r"; measure new "$NEW" "$r"
  else measure new "$NEW" "$r"; measure old "$OLD" "$r"; fi
done
python3 - "$W" "$ROUNDS" "$OLD" "$NEW" <<'PY'
import json, os, statistics, sys
w, rounds, old, new = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
figures = [  # file, field, what, higher is better
  ("submit_c64", "jobs_per_second", "submits/s, 64 clients, leader", True),
  ("submit_c64_follower", "jobs_per_second", "submits/s, 64 clients, follower", True),
  ("dev_submit_c64", "jobs_per_second", "submits/s, 64 clients, dev agent", True),
  ("submit_b1000", "jobs_per_second", "submits/s, batches of 1,000", True),
  ("latency", "start_p50_ms", "submit -> start p50 ms (process)", False),
  ("latency", "start_p99_ms", "submit -> start p99 ms (process)", False),
  ("latency", "finish_p50_ms", "submit -> result p50 ms (process)", False),
  ("latency_follower", "start_p50_ms", "submit -> start p50 ms, via a follower", False),
  ("dev_latency", "start_p50_ms", "submit -> start p50 ms, dev agent", False),
  ("latency_container", "start_p50_ms", "submit -> start p50 ms (container)", False),
  ("throughput", "completed_per_second", "completed no-op jobs/s (process)", True),
  ("throughput_container", "completed_per_second", "completed no-op jobs/s (container)", True),
  ("dag", "release_p50_ms", "workflow chain release p50 ms", False),
  ("dag", "random_submit_ms", "random DAG accept ms", False),
  ("dev_events", "submit_jobs_per_second_n", "submits/s with 100 event streams, dev agent", True),
  ("sleep", "efficiency", "sleep waves efficiency", True),
  ("latency", "errors", "latency jobs that did not succeed (want 0)", False),
  ("throughput", "failed", "throughput jobs that failed (want 0)", False),
]
def values(label, name, field):
    out = []
    for r in range(1, rounds + 1):
        p = os.path.join(w, "%s-%d" % (label, r), "results", name + ".json")
        if not os.path.exists(p): continue
        s, dec, i = open(p).read(), json.JSONDecoder(), 0
        while True:
            while i < len(s) and s[i].isspace(): i += 1
            if i >= len(s): break
            v, i = dec.raw_decode(s, i)
            if field in v: out.append(v[field])
    return out
print("old: %s\nnew: %s\n%d rounds, alternating; medians over rounds\n" % (old, new, rounds))
print("| figure | old | new | new/old | better |")
print("|---|---|---|---|---|")
for name, field, what, higher in figures:
    a, b = values("old", name, field), values("new", name, field)
    if not a or not b:
        print("| %s | %s | %s | n/a | |" % (what, a or "n/a", b or "n/a")); continue
    ma, mb = statistics.median(a), statistics.median(b)
    ratio = "%.3f" % (mb / ma) if ma else "n/a"
    print("| %s | %.4g | %.4g | %s | %s |" % (what, ma, mb, ratio, "higher" if higher else "lower"))
PY
echo "bench-compare: raw results and agent logs under $W" >&2
