#!/usr/bin/env bash
# TLS overhead: two local three-node clusters side by side, one plain and one with HTTPS, mutual TLS
# between agents and encrypted gossip, measured alternately (off, on, off, on, ...) with
# `foreman bench submit` and `foreman bench latency` against each cluster's leader and against a
# follower (whose writes go to the leader over the internal, mutually authenticated path).
# Prints every run and the medians and on/off ratios (docs/security.md, "TLS overhead").
#
#   FOREMAN_BIN   the binary (default bin/foreman)
#   RUNS          alternations (default 5)
#   SUBMIT_JOBS   jobs per bench submit (default 4000); LAT_JOBS per bench latency (default 100)
#   BASE          first base port (default 18470; uses BASE..BASE+52)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(readlink -f "${FOREMAN_BIN:-bin/foreman}")
RUNS=${RUNS:-5}
SUBMIT_JOBS=${SUBMIT_JOBS:-4000}
LAT_JOBS=${LAT_JOBS:-100}
BASE=${BASE:-18470}
WORK=$(mktemp -d /tmp/foreman-bench-tls.XXXXXX)
chmod o+x "$WORK" # process jobs run as nobody by default and must reach their attempt dirs
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

T=$WORK/tls
mkdir -p "$T"
"$BIN" tls ca create --dir "$T" >/dev/null
for i in 1 2 3; do
  "$BIN" tls cert create --server --node "tls$i" --dir "$T" --ca "$T/foreman-ca.pem" --ca-key "$T/foreman-ca-key.pem" >/dev/null
done
KEY=$("$BIN" tls gossip-key)

start() { # mode base
  local mode=$1 base=$2 i p args
  for i in 1 2 3; do
    p=$((base + 10 * (i - 1)))
    args=(agent --name "$mode$i" --data-dir "$WORK/$mode$i" --bind 127.0.0.1 --port "$p" --bootstrap-expect 3
      --default-driver process --log-level warn)
    [ "$i" != 1 ] && args+=(--join "127.0.0.1:$base")
    if [ "$mode" = tls ]; then
      args+=(--tls-cert "$T/tls$i-server.pem" --tls-key "$T/tls$i-server-key.pem" --tls-ca "$T/foreman-ca.pem")
      FOREMAN_GOSSIP_KEY=$KEY "$BIN" "${args[@]}" >"$WORK/$mode$i.log" 2>&1 &
    else
      "$BIN" "${args[@]}" >"$WORK/$mode$i.log" 2>&1 &
    fi
    PIDS+=($!)
  done
}
start plain "$BASE"
start tls $((BASE + 30))
export FOREMAN_CACERT=$T/foreman-ca.pem

# role_addr scheme base leader|follower: the http address of that node of the cluster
role_addr() {
  local scheme=$1 base=$2 want=$3 out
  for _ in $(seq 1 120); do
    out=$("$BIN" cluster members --json --addr "$scheme://127.0.0.1:$base" 2>/dev/null || true)
    addr=$(printf '%s' "$out" | python3 -c '
import json,sys
want=sys.argv[1]
try: ms=json.load(sys.stdin)
except Exception: sys.exit(0)
ms=ms.get("members",ms) if isinstance(ms,dict) else ms
alive=[m for m in ms if m.get("status")=="alive"]
if len(alive)<3 or not any(m.get("leader") for m in alive): sys.exit(0)
for m in alive:
    if m.get("leader")==(want=="leader"): print(m["http_addr"]); break' "$want")
    if [ -n "$addr" ]; then echo "$scheme://$addr"; return; fi
    sleep 0.5
  done
  echo "cluster at $scheme://127.0.0.1:$base not ready; logs in $WORK" >&2; exit 1
}
P_LEADER=$(role_addr http "$BASE" leader)
P_FOLLOWER=$(role_addr http "$BASE" follower)
T_LEADER=$(role_addr https $((BASE + 30)) leader)
T_FOLLOWER=$(role_addr https $((BASE + 30)) follower)
echo "plain: leader $P_LEADER follower $P_FOLLOWER; tls: leader $T_LEADER follower $T_FOLLOWER" >&2

RES=$WORK/results
: >"$RES"
measure() { # label mode addr kind
  local label=$1 mode=$2 addr=$3 kind=$4 out v
  case $kind in
    submit) out=$("$BIN" bench submit --addr "$addr" --jobs "$SUBMIT_JOBS" --json)
      v=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs_per_second"])') ;;
    latency) out=$("$BIN" bench latency --addr "$addr" --jobs "$LAT_JOBS" --json)
      v=$(printf '%s' "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["finish_p50_ms"])') ;;
  esac
  echo "$label $mode $v" | tee -a "$RES" >&2
}
for r in $(seq 1 "$RUNS"); do
  echo "run $r/$RUNS" >&2
  measure submit-leader off "$P_LEADER" submit;   measure submit-leader on "$T_LEADER" submit
  measure submit-follower off "$P_FOLLOWER" submit; measure submit-follower on "$T_FOLLOWER" submit
  measure latency-leader off "$P_LEADER" latency; measure latency-leader on "$T_LEADER" latency
done

python3 - "$RES" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    label, mode, v = line.split()
    rows.setdefault(label, {}).setdefault(mode, []).append(float(v))
units = {"submit-leader": "jobs/s", "submit-follower": "jobs/s", "latency-leader": "ms p50 submit->finish"}
print(f"| measurement | TLS off (median) | TLS on (median) | on/off |")
print(f"|---|---|---|---|")
for label, m in rows.items():
    off, on = statistics.median(m["off"]), statistics.median(m["on"])
    print(f"| {label} ({units[label]}) | {off:.1f} | {on:.1f} | {on/off:.3f} |")
PY
