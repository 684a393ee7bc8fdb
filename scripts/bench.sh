#!/usr/bin/env bash
# `make bench`: the Go benchmarks, then `foreman bench` against a dev agent and a local cluster of
# three agents (a fourth joins for the sleep waves) on spare ports, then docs/benchmarks.md.
#
#   FOREMAN_BIN      the binary (make bench builds bin/foreman)
#   BENCH_BASE_PORT  first agent's base port (default 17470; agents use +0, +10, +20, +30)
#   BENCH_RUNS       repetitions of each foreman bench measurement (default 3; the median is reported)
#   BENCH_QUICK=1    smaller job counts (a smoke run of a minute or two)
# Before each foreman bench run the script syncs and waits (up to a minute) for the disk to be idle
# (/proc/pressure/io), so that no run pays for an earlier one's writeback.
#   BENCH_OUT        results file (default docs/benchmarks.md)
#   BENCH_LAT_JOBS, BENCH_TP_JOBS  job counts of the exec phase's latency and throughput runs
#   BENCH_AGENT_ARGS extra agent flags, e.g. "--pprof" (profiles)
#   BENCH_LOG_LEVEL  the agents' log level (default warn; debug logs the start, finish and plan traces)
#
# Usage: scripts/bench.sh [all|go|cluster|exec|nodes|measure|start N|stop]
#   nodes: three servers with BENCH_NODES simulated clients (default 5000; 1000 with BENCH_QUICK=1)
#   measure: the cluster phase's measurements into $BENCH_DIR/results, no report (bench-compare.sh)
#   exec: only the executor's measurements (latency, throughput, sleep waves) on a fresh cluster
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$(readlink -f "${FOREMAN_BIN:-bin/foreman}")
BASE=${BENCH_BASE_PORT:-17470}
RUNS=${BENCH_RUNS:-3}
OUT=${BENCH_OUT:-docs/benchmarks.md}
WORK=${BENCH_DIR:-$(mktemp -d /tmp/foreman-bench.XXXXXX)}
RES=$WORK/results
mkdir -p "$RES"
# Process jobs run as nobody by default (agent --job-default-user): their attempt dirs under the
# agents' data dirs must be reachable by others, and mktemp makes the dir 0700.
chmod o+x "$WORK"

log() { echo "bench: $*" >&2; }

# ---- agents ------------------------------------------------------------------------------------

port() { echo $((BASE + 10 * ($1 - 1))); }

start_agent() { # i [extra args...]
  local i=$1; shift
  local p; p=$(port "$i")
  # An agent left running on the port (another BENCH_DIR) would answer for the new one, which
  # cannot bind: every figure would be that agent's.
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    log "port $p is taken by another agent (a bench left running? scripts/bench.sh stop with its BENCH_DIR)"
    exit 1
  fi
  mkdir -p "$WORK/n$i"
  "$BIN" agent --name "bench$i" --data-dir "$WORK/n$i/data" --bind 127.0.0.1 --port "$p" \
    --default-driver process --log-level "${BENCH_LOG_LEVEL:-warn}" ${BENCH_AGENT_ARGS:-} "$@" >"$WORK/n$i/agent.log" 2>&1 &
  echo $! >"$WORK/n$i/pid"
}

stop_agents() {
  for f in "$WORK"/n*/pid; do
    [ -f "$f" ] || continue
    kill "$(cat "$f")" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$(cat "$f")" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
}
# discard_nodes moves the last cluster's data dirs aside; they are removed when the script ends.
# Removing them before the next cluster starts made it slower: on ext4 without a journal (this
# bench machine) every file created in the next minutes walks past the freed inodes
# (exec/DESIGN.md, "Files and syscalls per attempt").
discard_nodes() {
  compgen -G "$WORK/n*" >/dev/null || return 0
  local d; d=$(mktemp -d "$WORK/old.XXXXXX")
  mv "$WORK"/n* "$d"/
}

finish() { stop_agents; rm -rf "$WORK"/old.*; }
trap finish EXIT

wait_nodes() { # n: wait for a leader and n alive nodes
  local addr=127.0.0.1:$(port 1)
  for _ in $(seq 1 120); do
    if FOREMAN_ADDR=$addr "$BIN" node ls --json 2>/dev/null |
      grep -o '"gossip": "alive"' | wc -l | grep -qx "$1"; then return 0; fi
    sleep 0.5
  done
  log "the cluster did not come up; see $WORK/n*/agent.log"; return 1
}

leader_addr() {
  FOREMAN_ADDR=127.0.0.1:$(port 1) "$BIN" cluster raft | awk '/^Leader:/{print $3}'
}

start_cluster() { # n agents (the first three voters)
  discard_nodes
  start_agent 1 --bootstrap-expect 3
  for i in $(seq 2 "$1"); do start_agent "$i" --bootstrap-expect 3 --join "127.0.0.1:$(port 1)"; done
  wait_nodes "$1"
}

# follower_runs_jobs: the latency jobs request nothing, so every one goes to the node with the
# fewest attempts, ties to the first by name: bench1. Whether bench1 also leads decided whether the
# measured path was leader-local (~2x faster: no replication wait before the start, no forwarded
# reports) — the same build measured 36 ms or 18 ms by the luck of the election. Make bench1 a
# follower, the common case (with N agents, N-1 of N placements land on a follower): if it leads,
# restart it so another agent takes over.
follower_runs_jobs() {
  local a1=127.0.0.1:$(port 1)
  for _ in 1 2 3; do
    [ "$(leader_addr)" != "$a1" ] && return 0
    log "bench1 leads; restarting it so that the measured jobs run on a follower"
    sleep 3 # bench1 remembers its peers every 2 s (cluster.json)
    kill "$(cat "$WORK/n1/pid")"
    while kill -0 "$(cat "$WORK/n1/pid")" 2>/dev/null; do sleep 0.1; done
    start_agent 1 --join "127.0.0.1:$(port 2)"
    wait_nodes "$1"
  done
  [ "$(leader_addr)" != "$a1" ]
}

start_dev() {
  discard_nodes
  start_agent 1 --dev
  wait_nodes 1
}

rss_mb() { # agent i's resident set in MiB
  awk '/^VmRSS/{printf "%.0f", $2/1024}' "/proc/$(cat "$WORK/n$1/pid")/status"
}

# ---- measurements --------------------------------------------------------------------------------

# median FILE FIELD: the median of a JSON field over the runs saved in FILE (one JSON object per run).
median() {
  python3 - "$1" "$2" <<'EOF'
import json, sys, statistics
vals = []
for doc in open(sys.argv[1]).read().split("\n}\n"):
    doc = doc.strip()
    if doc:
        vals.append(json.loads(doc + ("" if doc.endswith("}") else "}"))[sys.argv[2]])
print(round(statistics.median(vals), 3) if vals else "n/a")
EOF
}

# bench NAME ADDR ARGS...: run foreman bench ARGS RUNS times, append the JSON to $RES/NAME.json.
# settle: flush what earlier runs wrote and wait (up to a minute) until the disk is idle, so a
# measurement does not pay for the previous one's writeback (after a 10,000-job run this VM's disk
# spends minutes writing back, at I/O pressure up to 70%, and every figure taken then swings).
settle() {
  sync
  [ -r /proc/pressure/io ] || return 0
  for _ in $(seq 1 60); do
    awk '/^some/ { split($2, a, "="); exit (a[2] < 2.0 ? 0 : 1) }' /proc/pressure/io && return 0
    sleep 1
  done
  log "the disk is still busy (I/O pressure $(awk '/^some/{print $2}' /proc/pressure/io)); measuring anyway"
}

bench() {
  local name=$1 addr=$2; shift 2
  : >"$RES/$name.json"
  for r in $(seq 1 "$RUNS"); do
    settle
    log "$name run $r/$RUNS: foreman bench $*"
    FOREMAN_ADDR=$addr "$BIN" bench "$@" --json >>"$RES/$name.json"
  done
}

q() { if [ "${BENCH_QUICK:-}" = 1 ]; then echo "$2"; else echo "$1"; fi; }

run_go() {
  log "Go benchmarks"
  local gb=$RES/go.txt
  : >"$gb"
  (
    go test -run '^$' -bench 'BenchmarkApplySubmitBatch' -benchtime "$(q 200x 20x)" -count "$RUNS" ./fsm
    FOREMAN_BENCH_JOBS=$(q 1000000 100000) go test -run '^$' -bench 'BenchmarkSnapshotRestore' -benchtime 1x -count 1 -timeout 20m ./fsm
    go test -run '^$' -bench 'BenchmarkPlan5000Nodes100kJobs|BenchmarkPlaceOnly5000Nodes' -benchtime 3x -count 1 ./sched
    go test -run '^$' -bench 'BenchmarkDeliverer' -benchtime 3x -count 1 ./sched
    go test -run '^$' -bench 'BenchmarkCoalesceBurst' -benchtime 3x -count "$RUNS" ./sched
    go test -run '^$' -bench 'BenchmarkApplyThreeNodes' -benchtime "$(q 20000x 2000x)" -count 1 ./cluster
    go test -run '^$' -bench 'BenchmarkProcessStart|BenchmarkWorkerStart' -benchtime "$(q 100x 20x)" -count 1 ./exec
    go test -run '^$' -bench 'BenchmarkProcessFloor' -benchtime "$(q 4000x 500x)" -count "$RUNS" ./exec
    go test -run '^$' -bench 'BenchmarkContainerStart' -benchtime "$(q 50x 10x)" -count 1 ./exec/container
    go test -run '^$' -bench 'BenchmarkContainerCPU/conc=8' -benchtime "$(q 100x 16x)" -count 1 ./exec/container
    go test -run '^$' -bench 'BenchmarkFsync' -count 3 ./fsm
    FOREMAN_BIN=$BIN go test -run '^$' -bench 'BenchmarkNodeLostRerun' -benchtime 1x -count "$RUNS" -timeout 20m ./systest/
    FOREMAN_BIN=$BIN go test -run '^$' -bench 'BenchmarkClientFootprint' -benchtime 1x -count 1 -timeout 20m ./systest/
    FOREMAN_BIN=$BIN go test -run '^$' -bench 'BenchmarkGPULatency' -benchtime 1x -count 1 -timeout 20m ./systest/
  ) 2>&1 | tee -a "$gb" | grep -E '^(Benchmark|ok|FAIL|---)' >&2 || true
}

run_cluster() {
  # A failed measurement (an older build without that bench, a run that lost its leader) is
  # logged and leaves no result; the other phases still run.
  log "dev agent (one node)"
  start_dev
  local dev=127.0.0.1:$(port 1)
  echo "$(rss_mb 1)" >"$RES/rss_dev_idle"
  bench dev_latency "$dev" latency --jobs "$(q 200 50)" --driver process || log "dev_latency failed"
  bench dev_submit_c64 "$dev" submit --jobs "$(q 20000 5000)" --concurrency 64 || log "dev_submit_c64 failed"
  bench dev_events "$dev" events --subscribers 100 --rounds "$(q 4 2)" --jobs "$(q 10000 2000)" \
    --throughput-jobs "$(q 2000 300)" --driver process || log "dev_events failed"
  bench dev_usage "$dev" usage --jobs "$(q 500 100)" --queries 200 --driver process || log "dev_usage failed"
  stop_agents

  log "three agents"
  start_cluster 3
  follower_runs_jobs 3
  echo "$(rss_mb 1) $(rss_mb 2) $(rss_mb 3)" >"$RES/rss_idle"
  local lead; lead=$(leader_addr)
  local foll=127.0.0.1:$(port 1)
  [ "$foll" = "$lead" ] && foll=127.0.0.1:$(port 2)
  bench latency "$lead" latency --jobs "$(q 200 50)" --driver process || log "latency failed"
  bench latency_follower "$foll" latency --jobs "$(q 100 30)" --driver process || log "latency_follower failed"
  if "$BIN" node ls --addr "$lead" --json | grep -q '"container"'; then
    bench latency_container "$lead" latency --jobs "$(q 50 10)" --driver container || log "latency_container failed"
    bench throughput_container "$lead" throughput --jobs "$(q 300 50)" --batch 100 --driver container || log "throughput_container failed"
  fi
  bench throughput "$lead" throughput --jobs "$(q 5000 1000)" --batch 1000 --driver process || log "throughput failed"
  bench dag "$lead" dag --driver process --fan-out "$(q 10000 1000)" || log "dag failed"
  log "a fourth agent joins for the sleep waves"
  # --role server: a raft non-voter, as later agents were before --role auto made them clients, so
  # the figures compare with earlier builds.
  start_agent 4 --role server --join "127.0.0.1:$(port 1)"
  wait_nodes 4
  bench sleep "$lead" sleep --jobs 20 --duration 2s --driver process || log "sleep failed"
  bench submit_c64 "$lead" submit --jobs "$(q 20000 5000)" --concurrency 64 || log "submit_c64 failed"
  bench submit_c64_follower "$foll" submit --jobs "$(q 20000 5000)" --concurrency 64 || log "submit_c64_follower failed"
  bench submit_b1000 "$lead" submit --jobs "$(q 100000 20000)" --concurrency 4 --batch 1000 || log "submit_b1000 failed"
  # Retained jobs: the submits above left their (delayed) jobs in the state.
  local retained=$((RUNS * ($(q 20000 5000) * 2 + $(q 100000 20000))))
  echo "$retained $(rss_mb 1) $(rss_mb 2) $(rss_mb 3)" >"$RES/rss_retained"
  du -sk "$WORK"/n1/data | awk '{print $1}' >"$RES/data_kb"

  stop_agents
}

# run_nodes: three servers and foreman bench nodes (simulated clients), side by side with one
# client (the N=3 figure) on the same fresh cluster kind, one fresh cluster per run: a run leaves
# its simulated clients' records behind.
run_nodes() {
  local n=${BENCH_NODES:-$(q 5000 1000)}
  : >"$RES/nodes_base.json"
  : >"$RES/nodes_$n.json"
  for r in $(seq 1 "$RUNS"); do
    log "nodes run $r/$RUNS: three servers, then 1 and $n simulated clients"
    for c in 1 "$n"; do
      start_cluster 3
      local name=nodes_$c
      [ "$c" = 1 ] && name=nodes_base
      settle
      FOREMAN_ADDR=127.0.0.1:$(port 1) "$BIN" bench nodes --clients "$c" --idle 10s --submits 30000 \
        --jobs "$([ "$c" = 1 ] && echo 0 || echo "$n")" --kill "$([ "$c" = 1 ] && echo 0 || echo 5)" \
        $([ "$c" = 1 ] || echo --starve 20s --kill-leader) --json \
        >>"$RES/$name.json" || log "$name failed"
      stop_agents
    done
  done
}

# run_exec: the measurements the executor owns, on a fresh cluster (no retained jobs), so a change
# can be compared side by side with another binary (FOREMAN_BIN) in the same session.
run_exec() {
  local lat=${BENCH_LAT_JOBS:-$(q 200 50)} tp=${BENCH_TP_JOBS:-$(q 5000 1000)}
  log "three agents (executor phases)"
  start_cluster 3
  follower_runs_jobs 3
  local lead; lead=$(leader_addr)
  # A failed run (e.g. the cluster lost its leader under load) is logged and leaves no result;
  # the other phases still run.
  bench latency "$lead" latency --jobs "$lat" --driver process || log "latency failed"
  if "$BIN" node ls --addr "$lead" --json | grep -q '"container"'; then
    bench latency_container "$lead" latency --jobs "$(q 50 10)" --driver container || log "container latency failed"
    bench throughput_container "$lead" throughput --jobs "$(q 300 50)" --batch 100 --driver container || log "container throughput failed"
  fi
  lead=$(leader_addr)
  bench throughput "$lead" throughput --jobs "$tp" --batch 1000 --driver process || log "throughput failed"
  log "a fourth agent joins for the sleep waves"
  # --role server: a raft non-voter, as later agents were before --role auto made them clients, so
  # the figures compare with earlier builds.
  start_agent 4 --role server --join "127.0.0.1:$(port 1)"
  wait_nodes 4
  lead=$(leader_addr)
  bench sleep "$lead" sleep --jobs 20 --duration 2s --driver process || log "sleep failed"
  stop_agents
}

# ---- the report ------------------------------------------------------------------------------------

report() {
  {
    echo "# Benchmarks"
    echo
    echo "Generated by \`make bench\` (scripts/bench.sh) on $(date -u +%Y-%m-%d). Machine: $(nproc) cores," \
      "$(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo), Linux $(uname -r)," \
      "$(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM; three agents on loopback," \
      "process driver unless noted. foreman bench figures are the median of $RUNS runs; see" \
      "[How each number is measured](#how-each-number-is-measured)."
    echo
    BENCH_NODES_N=${BENCH_NODES:-$(q 5000 1000)} python3 - "$RES" <<'EOF'
import json, os, re, statistics, sys
res = sys.argv[1]
def runs(name):
    p = os.path.join(res, name + ".json")
    if not os.path.exists(p): return []
    dec, s, out = json.JSONDecoder(), open(p).read(), []
    i = 0
    while True:
        while i < len(s) and s[i].isspace(): i += 1
        if i >= len(s): return out
        v, i = dec.raw_decode(s, i); out.append(v)
def med(name, field, fmt="{:.1f}"):
    path = field.split(".")  # "starve.false_lost": a field of a nested result
    def get(r):
        for k in path:
            r = r.get(k) if isinstance(r, dict) else None
        return r
    v = [get(r) for r in runs(name) if get(r) is not None]
    if not v: return "n/a"
    return fmt.format(statistics.median(v)) + (" (runs: " + ", ".join(fmt.format(x) for x in v) + ")" if len(v) > 1 else "")
def go(pattern, unit, scale=1.0):
    p = os.path.join(res, "go.txt")
    vals = []
    if os.path.exists(p):
        for line in open(p):
            if re.match(pattern, line):
                m = re.search(r"([0-9.e+]+) " + re.escape(unit) + r"(\s|$)", line)
                if m: vals.append(float(m.group(1)) * scale)
    if not vals: return "n/a"
    return "{:,.0f}".format(statistics.median(vals)) if max(vals) >= 100 else "{:.2f}".format(statistics.median(vals))
def read(name):
    p = os.path.join(res, name)
    return open(p).read().strip() if os.path.exists(p) else "n/a"
nodes = os.environ.get("BENCH_NODES_N", "5000")
rows = [
  ("Submits accepted, 64 concurrent single-job clients, via the leader", ">= 20,000 jobs/s", med("submit_c64", "jobs_per_second", "{:,.0f}") + " jobs/s", "foreman bench submit --jobs 20000 -c 64"),
  ("... via a follower (proxied)", "", med("submit_c64_follower", "jobs_per_second", "{:,.0f}") + " jobs/s", "same, FOREMAN_ADDR = a follower"),
  ("... single node (dev agent)", "", med("dev_submit_c64", "jobs_per_second", "{:,.0f}") + " jobs/s", "same against agent --dev"),
  ("Submits accepted, batches of 1,000 (4 clients)", ">= 100,000 jobs/s", med("submit_b1000", "jobs_per_second", "{:,.0f}") + " jobs/s", "foreman bench submit --jobs 100000 -c 4 --batch 1000"),
  ("Submit -> start p50 (process)", "<= 15 ms", med("latency", "start_p50_ms") + " ms", "foreman bench latency --jobs 200 --driver process"),
  ("Submit -> start p99 (process)", "<= 75 ms", med("latency", "start_p99_ms") + " ms", ""),
  ("Submit -> result visible p50 (process)", "<= 30 ms", med("latency", "finish_p50_ms") + " ms", ""),
  ("Submit -> start p50 / p99, client on a follower", "", med("latency_follower", "start_p50_ms") + " / " + med("latency_follower", "start_p99_ms") + " ms", "same via a follower"),
  ("Submit -> start p50 / p99, dev agent", "", med("dev_latency", "start_p50_ms") + " / " + med("dev_latency", "start_p99_ms") + " ms", "same against agent --dev"),
  ("Submit -> start p50 (container)", "<= 40 ms", med("latency_container", "start_p50_ms") + " ms", "foreman bench latency --driver container"),
  ("Completed no-op jobs (process)", ">= 2,500/s", med("throughput", "completed_per_second", "{:,.0f}") + "/s", "foreman bench throughput --jobs 5000 --batch 1000"),
  ("Completed no-op jobs (container)", ">= 100/s", med("throughput_container", "completed_per_second", "{:,.0f}") + "/s", "foreman bench throughput --driver container --jobs 300"),
  ("Workflow chain of 100: release p50 / p99 (parent finished -> child started)", "p50 <= 10 ms", med("dag", "release_p50_ms") + " / " + med("dag", "release_p99_ms") + " ms", "foreman bench dag --driver process"),
  ("... the same chain submitted one by one by a waiting client: p50 / p99", "", med("dag", "one_by_one_p50_ms") + " / " + med("dag", "one_by_one_p99_ms") + " ms", ""),
  ("... the same chain submitted up front, each --after the one before: p50 / p99", "p50 <= 20 ms", med("dag", "after_p50_ms") + " / " + med("dag", "after_p99_ms") + " ms", ""),
  ("Workflow fan-out of 10,000: submit / all done", "", med("dag", "fan_out_submit_ms") + " ms / " + med("dag", "fan_out_seconds") + " s", ""),
  ("10,000-job random DAG accepted", "< 1 s", med("dag", "random_submit_ms") + " ms", ""),
  ("100 live event streams: cost on submits / on completed jobs (dev agent)", "<= 5%", med("dev_events", "submit_cost_percent") + "% / " + med("dev_events", "throughput_cost_percent") + "%", "foreman bench events --subscribers 100 --rounds 4 --jobs 10000 --throughput-jobs 2000"),
  ("... events delivered per second to the 100 streams", "", med("dev_events", "events_delivered_per_second", "{:,.0f}") + "/s", ""),
  ("GET /v1/usage since 365d by namespace: p50 / p99 (dev agent; usage attempts = the jobs' attempts in every run)", "", med("dev_usage", "p50_ms") + " / " + med("dev_usage", "p99_ms") + " ms" + ("" if all(r.get("verified") for r in runs("dev_usage")) else " NOT VERIFIED"), "foreman bench usage --jobs 500 --queries 200"),
  ("20 x sleep 2s on 4 nodes: efficiency", ">= 99%", med("sleep", "efficiency", "{:.3f}") + " (wall " + med("sleep", "wall_seconds", "{:.2f}") + " s)", "foreman bench sleep --jobs 20 --duration 2s"),
  ("Pure scheduler, 5,000 nodes", ">= 50,000 placements/s", go(r"BenchmarkPlan5000Nodes100kJobs", "placements/s") + " placements/s", "go test -bench BenchmarkPlan5000Nodes100kJobs ./sched"),
  ("3,000 submits in a burst: share of it spent planning / plans per 1,000 submits", "about 20% (1/coalesceFactor)", go(r"BenchmarkCoalesceBurst", "planning-%") + "% / " + go(r"BenchmarkCoalesceBurst", "plans/1000-submits"), "go test -bench BenchmarkCoalesceBurst ./sched"),
  ("Webhook deliveries to a local receiver (one deliverer, outcomes applied to a real FSM)", "", go(r"BenchmarkDeliverer", "deliveries/s") + " deliveries/s", "go test -bench BenchmarkDeliverer ./sched"),
  ("FSM apply, 1 job per entry / 1,000 per entry (one node)", "", go(r"BenchmarkApplySubmitBatch/jobs=1-", "jobs/s") + " / " + go(r"BenchmarkApplySubmitBatch/jobs=1000-", "jobs/s") + " jobs/s", "go test -bench BenchmarkApplySubmitBatch ./fsm"),
  ("Raft apply, 3 in-process nodes, 64 clients: rate, p50, p99", "", go(r"BenchmarkApplyThreeNodes/leader", "jobs/s") + " jobs/s, " + go(r"BenchmarkApplyThreeNodes/leader", "p50-ms") + " ms, " + go(r"BenchmarkApplyThreeNodes/leader", "p99-ms") + " ms", "go test -bench BenchmarkApplyThreeNodes ./cluster"),
  ("Dead node (agent killed -9) -> its job running elsewhere, 3 agents", "<= 15 s", go(r"BenchmarkNodeLostRerun", "rerun-s") + " s (node dead in the state " + go(r"BenchmarkNodeLostRerun", "node-dead-s") + " s, old copy gone " + go(r"BenchmarkNodeLostRerun", "copy-gone-s") + " s)", "go test -bench BenchmarkNodeLostRerun ./systest/"),
  ("Client agent, 10 then 100,010 jobs in the cluster: RSS, data dir", "same +-10%", go(r"BenchmarkClientFootprint", "rss-10-MiB") + " -> " + go(r"BenchmarkClientFootprint", "rss-100k-MiB") + " MiB (x" + go(r"BenchmarkClientFootprint", "rss-ratio") + "), " + go(r"BenchmarkClientFootprint", "dir-10-KiB") + " -> " + go(r"BenchmarkClientFootprint", "dir-100k-KiB") + " KiB (x" + go(r"BenchmarkClientFootprint", "dir-ratio") + ")", "go test -bench BenchmarkClientFootprint ./systest/"),
  ("GPU jobs on the 8-GPU fixture, submit -> start p50: none / 1 GPU / 4 GPUs / 20 GiB share", "", go(r"BenchmarkGPULatency", "cpu-start-p50-ms") + " / " + go(r"BenchmarkGPULatency", "gpus1-start-p50-ms") + " / " + go(r"BenchmarkGPULatency", "gpus4-start-p50-ms") + " / " + go(r"BenchmarkGPULatency", "share20GiB-start-p50-ms") + " ms", "go test -bench BenchmarkGPULatency ./systest/ (foreman bench latency --gpus N)"),
  ("Restore of a 1,000,000-job snapshot", "<= 15 s", go(r"BenchmarkSnapshotRestore", "restore-s") + " s", "FOREMAN_BENCH_JOBS=1000000 go test -bench BenchmarkSnapshotRestore ./fsm"),
  ("Container start (exec/container)", "", go(r"BenchmarkContainerStart/container\+shim", "ms-median") + " ms median", "go test -bench BenchmarkContainerStart ./exec/container"),
  ("Snapshot size, 1,000,000 jobs", "", go(r"BenchmarkSnapshotRestore", "snapshot-bytes", 1e-6) + " MB", ""),
  ("Disk: 4 KiB write + fdatasync", "(physical floor)", go(r"BenchmarkFsync", "fsyncs/s") + " fsyncs/s", "go test -bench BenchmarkFsync ./fsm"),
  ("No-op process jobs with nothing else: fork, exec and wait of `true`, a worker per core", "(physical floor)", go(r"BenchmarkProcessFloor", "jobs/s") + " jobs/s at " + go(r"BenchmarkProcessFloor", "cpu-ms/op") + " ms CPU each", "go test -bench BenchmarkProcessFloor ./exec"),
  ("Container starts with nothing else: the driver's Start, Wait and Destroy, 8 at once", "(floor of the container driver)", go(r"BenchmarkContainerCPU/conc=8", "starts/s") + " starts/s at " + go(r"BenchmarkContainerCPU/conc=8", "cpu-ms/op") + " ms CPU each", "go test -bench BenchmarkContainerCPU ./exec/container"),
  ("Process start (exec, supervisor + fork/exec)", "", go(r"BenchmarkProcessStart", "ns/op", 1e-6) + " ms; worker start p50 " + go(r"BenchmarkWorkerStart", "p50-ms") + " ms", "go test -bench BenchmarkProcessStart ./exec"),
  ("Simulated clients, 3 servers: accepted submits/s with them attached / with 1 (the N=3 figure)", ">= 90% of N=3", med("nodes_" + nodes, "submits_per_second", "{:,.0f}") + " / " + med("nodes_base", "submits_per_second", "{:,.0f}") + " jobs/s", "foreman bench nodes --clients N --submits 30000 (run_nodes)"),
  ("... leader CPU per 30,000 submits, with them / with 1", "<= +15%", med("nodes_" + nodes, "leader_cpu_seconds_per_30k", "{:.2f}") + " / " + med("nodes_base", "leader_cpu_seconds_per_30k", "{:.2f}") + " s", ""),
  ("... servers' CPU, every client idle: with no client / with them (% of one core, 3 servers together)", "clients' share < 5%", med("nodes_" + nodes, "base_server_cpu_pct") + "% / " + med("nodes_" + nodes, "idle_server_cpu_pct") + "%", ""),
  ("... machine starved 20 s (4 busy loops per core), then the leader killed -9, 100 jobs held: every client confirmed again after / false lost, rerun or failed jobs", "<= 30 s, 0", med("nodes_" + nodes, "starve.reattach_seconds") + " s / " + med("nodes_" + nodes, "leader_kill.reattach_seconds") + " s; " + med("nodes_" + nodes, "starve.false_lost", "{:.0f}") + "+" + med("nodes_" + nodes, "starve.rerun", "{:.0f}") + "+" + med("nodes_" + nodes, "starve.failed", "{:.0f}") + " / " + med("nodes_" + nodes, "leader_kill.false_lost", "{:.0f}") + "+" + med("nodes_" + nodes, "leader_kill.rerun", "{:.0f}") + "+" + med("nodes_" + nodes, "leader_kill.failed", "{:.0f}"), "--starve 20s --kill-leader"),
  ("... attach all / beat confirmed p99 / placements/s / client killed -> job rerun (max) / false lost", "rerun <= 15 s, 0 lost", med("nodes_" + nodes, "attach_seconds") + " s / " + med("nodes_" + nodes, "beat_ack_p99_ms", "{:.0f}") + " ms / " + med("nodes_" + nodes, "placements_per_second", "{:,.0f}") + " / " + med("nodes_" + nodes, "rerun_max_seconds") + " s / " + med("nodes_" + nodes, "false_lost", "{:.0f}"), ""),
  ("Agent RSS idle (dev / three agents)", "", read("rss_dev_idle") + " / " + read("rss_idle") + " MiB", "/proc/PID/status VmRSS"),
  ("Agent RSS with N retained jobs (N, then each agent)", "<= 100 MB at 100,000", read("rss_retained") + " MiB", "after the submit runs"),
]
print("| measure | target | measured | command |")
print("|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(r) + " |")
print()
print("Raw Go benchmark output:")
print()
print("```")
p = os.path.join(res, "go.txt")
if os.path.exists(p):
    for line in open(p):
        if line.startswith(("Benchmark", "cpu:")): print(line.rstrip())
print("```")
EOF
    # Hand-written notes (methodology, profiles) below the marker survive a regeneration.
    if [ -f "$OUT" ] && grep -q '^<!-- notes -->$' "$OUT"; then echo; sed -n '/^<!-- notes -->$/,$p' "$OUT"; fi
  } >"$OUT.tmp"
  mv "$OUT.tmp" "$OUT"
  log "wrote $OUT"
}

case "${1:-all}" in
  all) run_go; run_cluster; run_nodes; report ;;
  nodes) run_nodes; report ;;
  go) run_go ;;
  cluster) run_cluster; report ;;
  exec) run_exec; report ;;
  measure) run_cluster ;;
  report) report ;;
  start) trap - EXIT; start_cluster "${2:-3}"; follower_runs_jobs "${2:-3}"; echo "$WORK" ;;
  stop) stop_agents ;;
  *) echo "usage: $0 [all|go|cluster|exec|nodes|measure|report|start N|stop]" >&2; exit 2 ;;
esac
