#!/usr/bin/env bash
# ACL overhead: `foreman bench submit` and `bench latency` against one dev agent, alternating
# ACL off and on in the same run (same binary, same machine), ROUNDS times. Raw JSON goes to
# OUT/{submit,latency}-ROUND-{off,on}.json. Starts agents: run it under the heavy-test lock on
# shared machines (flock /tmp/foreman-heavy.lock scripts/bench-acl.sh).
#
#   FOREMAN_BIN (default bin/foreman)  PORT (17570)  ROUNDS (2)  OUT (/tmp/acl-bench)
#   JOBS (5000, bench submit)  LAT_JOBS (50, bench latency)
set -euo pipefail
BIN=${FOREMAN_BIN:-bin/foreman}
PORT=${PORT:-17570}
ROUNDS=${ROUNDS:-2}
OUT=${OUT:-/tmp/acl-bench}
JOBS=${JOBS:-5000}
LAT_JOBS=${LAT_JOBS:-50}
mkdir -p "$OUT"
export FOREMAN_ADDR=http://127.0.0.1:$PORT
for round in $(seq 1 "$ROUNDS"); do
  for mode in off on; do
    d=$(mktemp -d)
    chmod o+x "$d" # process jobs run as nobody by default and must reach their attempt dirs
    flags=(--dev --data-dir "$d/data" --port "$PORT" --default-driver process --log-level warn)
    [ "$mode" = on ] && flags+=(--acl)
    "$BIN" agent "${flags[@]}" > "$OUT/agent-$round-$mode.log" 2>&1 &
    pid=$!
    unset FOREMAN_TOKEN
    for _ in $(seq 1 150); do curl -sf "$FOREMAN_ADDR/v1/ready" > /dev/null && break; sleep 0.2; done
    if [ "$mode" = on ]; then
      "$BIN" acl bootstrap --json > "$OUT/boot-$round.json"
      FOREMAN_TOKEN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["secret"])' "$OUT/boot-$round.json")
      export FOREMAN_TOKEN
    fi
    "$BIN" bench submit --jobs "$JOBS" -c 32 --json > "$OUT/submit-$round-$mode.json" || true
    "$BIN" bench latency --jobs "$LAT_JOBS" --json > "$OUT/latency-$round-$mode.json" || true
    echo "round $round acl=$mode: $(head -c 300 "$OUT/submit-$round-$mode.json" | tr -d '\n')"
    kill "$pid"; wait "$pid" 2> /dev/null || true
    rm -rf "$d"
  done
done
