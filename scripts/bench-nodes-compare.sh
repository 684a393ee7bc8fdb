#!/usr/bin/env bash
# bench-nodes-compare.sh OLD_BIN NEW_BIN [ROUNDS]: `foreman bench nodes`' jobs phase (the control
# plane alone: simulated clients, no process started) for two builds side by side. Each round
# starts three servers of each build in turn (old new, new old, ...) on a fresh data dir and runs
# the bench with NEW_BIN (so both are measured by the same bench, with its cost map), then prints
# each run's placements/s and per-job cost, and the medians' new/old ratios.
#
#   NODES_CLIENTS (5000), NODES_JOBS (30000), NODES_JOB_TIME (100ms), NODES_BASE_PORT (18700)
#
# Example: git worktree add /tmp/prev HEAD~5 && make -C /tmp/prev build &&
#          make build && scripts/bench-nodes-compare.sh /tmp/prev/bin/foreman bin/foreman 3
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 OLD_BIN NEW_BIN [ROUNDS]" >&2; exit 2; }
OLD=$(readlink -f "$1") NEW=$(readlink -f "$2") ROUNDS=${3:-3}
for b in "$OLD" "$NEW"; do [ -x "$b" ] || { echo "bench-nodes-compare: $b is not an executable" >&2; exit 2; }; done
PORT=${NODES_BASE_PORT:-18700}
W=$(mktemp -d /tmp/foreman-nodes-compare.XXXXXX)
pids=()
stop() { # the servers of a run, then their data dirs (moved aside: see scripts/bench.sh discard_nodes)
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do while kill -0 "$p" 2>/dev/null; do sleep 0.1; done; done
  pids=()
}
trap 'stop; rm -rf "$W"' EXIT
measure() { # label bin round
  local d="$W/$1-$3" addr="127.0.0.1:$PORT"
  echo "bench-nodes-compare: round $3: $1 ($2)" >&2
  for i in 1 2 3; do
    local join=() p=$((PORT + 10 * (i - 1)))
    [ "$i" -gt 1 ] && join=(--join "$addr")
    mkdir -p "$d/n$i"
    "$2" agent --name "s$i" --data-dir "$d/n$i/data" --bind 127.0.0.1 --port "$p" --bootstrap-expect 3 \
      --log-level warn "${join[@]}" >"$d/n$i/log" 2>&1 &
    pids+=($!)
  done
  local up=0
  for _ in $(seq 240); do
    up=$(FOREMAN_ADDR=$addr "$2" node ls --json 2>/dev/null | grep -c '"gossip": "alive"' || true)
    [ "$up" = 3 ] && break
    sleep 0.5
  done
  [ "$up" = 3 ] || { echo "bench-nodes-compare: round $3 of $1: the servers did not come up" >&2; stop; return; }
  FOREMAN_ADDR=$addr "$NEW" bench nodes --clients "${NODES_CLIENTS:-5000}" --idle 5s --submits 0 \
    --jobs "${NODES_JOBS:-30000}" --job-time "${NODES_JOB_TIME:-100ms}" --kill 0 --hold 0 --json \
    >"$W/$1-$3.json" 2>>"$W/log" || echo "bench-nodes-compare: round $3 of $1 failed: $(tail -1 "$W/log")" >&2
  stop
}
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then measure old "$OLD" "$r"; measure new "$NEW" "$r"
  else measure new "$NEW" "$r"; measure old "$OLD" "$r"; fi
done
python3 - "$W" "$ROUNDS" <<'PY'
import json, os, statistics, sys
w, rounds = sys.argv[1], int(sys.argv[2])
def runs(label):
    out = []
    for r in range(1, rounds + 1):
        p = os.path.join(w, f"{label}-{r}.json")
        if os.path.exists(p) and os.path.getsize(p) > 0:
            out.append(json.load(open(p)))
    return out
def fig(d, what):
    c = d.get("cost") or {}
    nodes = c.get("nodes") or []
    lead = [n for n in nodes if n["role"] == "leader"]
    fol = [n for n in nodes if n["role"] != "leader"]
    return {
        "placements/s": d["placements_per_second"],
        "done/s": d["completed_per_second"],
        "raft entries per job": lead[0]["raft_entries"] if lead else None,
        "leader CPU us per job": lead[0]["cpu_us"] if lead else None,
        "followers' CPU us per job": statistics.mean(n["cpu_us"] for n in fol) if fol else None,
        "host CPU us per job": c.get("host_cpu_us_per_job"),
        "false lost": d["false_lost"],
    }[what]
old, new = runs("old"), runs("new")
print(f"runs completed: old {len(old)} of {rounds}, new {len(new)} of {rounds}")
print(f"| figure | old | new | new/old |\n|---|---|---|---|")
for what in ["placements/s", "done/s", "raft entries per job", "leader CPU us per job",
             "followers' CPU us per job", "host CPU us per job", "false lost"]:
    o = [v for v in (fig(d, what) for d in old) if v is not None]
    n = [v for v in (fig(d, what) for d in new) if v is not None]
    mo = statistics.median(o) if o else None
    mn = statistics.median(n) if n else None
    ratio = f"{mn / mo:.2f}" if mo and mn is not None else ""
    show = lambda xs: ", ".join(f"{x:,.2f}".rstrip("0").rstrip(".") for x in xs)
    print(f"| {what} | {show(o)} | {show(n)} | {ratio} |")
PY
