#!/usr/bin/env bash
# The GPU host check of issue 24: one prepared script of a few minutes, run as root on a host
# with an NVIDIA GPU and no network. It builds nothing: it runs a carried bin/foreman, starts one
# agent with no GPU flags (--dev, on its own port and data dir), and checks
#   detection     the node lists the host's GPUs (UUIDs as nvidia-smi -L prints them)
#   process       a --gpus 1 job sees one GPU, CUDA_VISIBLE_DEVICES=0 (torch matmul if torch imports)
#   process-0     a job without GPUs cannot open /dev/nvidia0 (EPERM from the device cgroup)
#   container     a --gpus 1 job in the host-rootfs container sees one GPU (torch if it imports)
#   container-0   a container without GPUs has no /dev/nvidia* and cannot make one usable
#   plain-image   `nvidia-smi -L` in a plain image (glibc only: no CUDA, no driver) lists one GPU
#   job-gpu-use   a running --gpus 1 job's memory and SM % in `job status --json` (pmon, compute-apps)
#   gpu-reset     `node gpu-reset` on a healthy node answers that there is nothing to reset
#   shares        two --gpu-memory shares of 42% of a device run on each GPU together, one more waits
#   share-over    a 1 GiB share job that allocates 3 GiB (torch) gets an attempt.gpu_memory_over
#                 event (watchdog mode; the node's gpu_memory_mode is printed)
# and prints a PASS/FAIL table; it exits 1 if anything failed. Needs the control-plane half of
# issue 24 (`--gpus`, GPUs in the node record): without it it says so and exits 2.
#
#   FOREMAN_BIN (default bin/foreman)  PORT (17970)  OUT (/tmp/gpu-check)  KEEP=1 keeps OUT/agent
set -uo pipefail
BIN=$(realpath "${FOREMAN_BIN:-bin/foreman}")
PORT=${PORT:-17970}
OUT=${OUT:-/tmp/gpu-check}
export FOREMAN_ADDR=http://127.0.0.1:$PORT
rm -rf "$OUT" && mkdir -p "$OUT" && chmod 755 "$OUT"

declare -a ROWS
row() { ROWS+=("$(printf '%-12s %-5s %s' "$1" "$2" "$3")"); echo "[$2] $1: $3"; }
table() {
  echo
  printf '%-12s %-5s %s\n' CHECK RESULT DETAIL
  printf '%s\n' "${ROWS[@]}"
}
die() { echo "gpu-check: $*" >&2; exit 2; }

[ "$(id -u)" = 0 ] || die "run as root (device cgroups and containers need it)"
[ -x "$BIN" ] || die "no foreman binary at $BIN (carry bin/foreman; this script builds nothing)"
"$BIN" run --help 2>&1 | grep -q -- '--gpus' ||
  die "this foreman has no 'run --gpus' flag: the control-plane half of issue 24 (requests, assignment) is not in this binary"
SMI=$(command -v nvidia-smi || ls /usr/local/nvidia/bin/nvidia-smi /usr/bin/nvidia-smi 2> /dev/null | head -1)
[ -n "$SMI" ] || die "no nvidia-smi on PATH, in /usr/local/nvidia/bin or /usr/bin: is this a GPU host?"
HOST_GPUS=$("$SMI" -L | grep -c '^GPU ')
echo "host: $HOST_GPUS GPU(s) by $SMI; $(uname -r); cgroup $(stat -fc %T /sys/fs/cgroup)"
TORCH=0
python3 -c 'import torch' 2> /dev/null && TORCH=1
echo "torch importable on the host: $TORCH"

# The agent: no GPU flags at all.
"$BIN" agent --dev --data-dir "$OUT/agent" --port "$PORT" > "$OUT/agent.log" 2>&1 &
AGENT=$!
trap 'kill $AGENT 2> /dev/null; wait $AGENT 2> /dev/null; [ "${KEEP:-0}" = 1 ] || rm -rf "$OUT/agent"' EXIT
for _ in $(seq 1 150); do curl -sf "$FOREMAN_ADDR/v1/ready" > /dev/null && break; sleep 0.2; done
curl -sf "$FOREMAN_ADDR/v1/ready" > /dev/null || { tail -20 "$OUT/agent.log"; die "the agent did not get ready"; }

# 1. Detection: every UUID nvidia-smi prints is in the node record.
for _ in $(seq 1 50); do # the first detection is in the node's record from its start; allow 10 s
  "$BIN" node ls --json > "$OUT/nodes.json" 2>&1
  missing=""
  for uuid in $("$SMI" -L | sed -n 's/.*(UUID: \(GPU-[^)]*\)).*/\1/p'); do
    grep -q "\"$uuid\"" "$OUT/nodes.json" || missing="$missing $uuid"
  done
  [ -z "$missing" ] && break
  sleep 0.2
done
if [ "$HOST_GPUS" -gt 0 ] && [ -z "$missing" ]; then
  row detection PASS "$HOST_GPUS GPU(s) in the node record, no --resource flag"
else
  row detection FAIL "not in 'node ls --json':${missing:- (nvidia-smi lists none)}"
fi

# run NAME EXPECT_EXIT -- foreman run args...: output in OUT/NAME.out, 0 when the exit matched.
run() {
  local name=$1 want=$2
  shift 3
  timeout 180 "$BIN" run --max-attempts 1 "$@" > "$OUT/$name.out" 2>&1
  local rc=$?
  [ "$rc" = "$want" ] || { echo "  $name: exit $rc, want $want; output:" && sed 's/^/    /' "$OUT/$name.out"; return 1; }
}
gpus_in() { grep -c '^GPU [0-9]*:' "$OUT/$1.out"; }

TORCH_PY='import torch
n = torch.cuda.device_count()
a = torch.randn(4096, 4096, device="cuda")
print("torch devices", n, "matmul", float((a @ a).abs().sum()) > 0, torch.cuda.get_device_name(0))'
# What a --gpus 1 job runs (sh, not bash): its GPU variables, nvidia-smi -L, torch where it imports.
JOB='echo CVD=$CUDA_VISIBLE_DEVICES UUIDS=$FOREMAN_GPU_UUIDS; "$SMI" -L
if python3 -c "import torch" 2> /dev/null; then python3 -c "$TORCH_PY"; else echo "torch: not importable here"; fi'
# Tries to open DEV; prints OPENED or the error.
OPEN='if (exec 3< "$DEV") 2> /dev/null; then echo OPENED; else (exec 3< "$DEV") 2>&1; fi'
MAJOR=$(awk '$2 == "nvidia-frontend" || $2 == "nvidia" { print $1; exit }' /proc/devices)

# 2-5. Both drivers: one GPU, then none.
for driver in process container; do
  if run "$driver" 0 -- --driver "$driver" --gpus 1 --env "SMI=$SMI" --env "TORCH_PY=$TORCH_PY" -- sh -c "$JOB"; then
    n=$(gpus_in "$driver")
    cvd=$(sed -n 's/^CVD=\([^ ]*\).*/\1/p' "$OUT/$driver.out")
    # torch, where it imports in the job (a host-rootfs container sees only the host's /usr and
    # /lib*), must see exactly the one device and multiply on it.
    torch=$(grep '^torch' "$OUT/$driver.out" | head -1)
    torch_ok=0
    case "$torch" in "torch devices 1 matmul True"* | "torch: not importable here") torch_ok=1 ;; esac
    if [ "$n" = 1 ] && [ "$cvd" = 0 ] && [ "$torch_ok" = 1 ]; then
      row "$driver" PASS "nvidia-smi -L: 1 GPU, CUDA_VISIBLE_DEVICES=0${torch:+; $torch}"
    else
      row "$driver" FAIL "nvidia-smi -L: $n GPU(s), CUDA_VISIBLE_DEVICES=$cvd; ${torch:-no torch line} (see $OUT/$driver.out)"
    fi
  else
    row "$driver" FAIL "the job failed (see $OUT/$driver.out)"
  fi
done

if run process-0 0 -- --driver process --env DEV=/dev/nvidia0 -- sh -c "$OPEN; echo CVD=[\$CUDA_VISIBLE_DEVICES]"; then
  if grep -q 'Operation not permitted' "$OUT/process-0.out" && ! grep -q OPENED "$OUT/process-0.out"; then
    row process-0 PASS "open /dev/nvidia0: Operation not permitted; $(grep CVD= "$OUT/process-0.out")"
  else
    row process-0 FAIL "$(head -c 200 "$OUT/process-0.out" | tr '\n' ' ')"
  fi
else
  row process-0 FAIL "the job failed (see $OUT/process-0.out)"
fi

if run container-0 0 -- --driver container --env DEV=/dev/probe -- sh -c "ls /dev | grep nvidia; mknod /dev/probe c $MAJOR 0 && $OPEN"; then
  if ! grep -q '^nvidia' "$OUT/container-0.out" && grep -q 'Operation not permitted' "$OUT/container-0.out"; then
    row container-0 PASS "no /dev/nvidia*; a node it makes for $MAJOR:0: Operation not permitted"
  else
    row container-0 FAIL "$(head -c 200 "$OUT/container-0.out" | tr '\n' ' ')"
  fi
else
  row container-0 FAIL "the job failed (see $OUT/container-0.out)"
fi

# 6. A plain image: nvidia-smi's glibc and nothing else (no CUDA, no driver), as a docker-save tar.
IMG=$OUT/image
mkdir -p "$IMG/rootfs"
for lib in $(ldd "$SMI" | grep -o '/[^ ]*' | grep -v nvidia); do
  mkdir -p "$IMG/rootfs$(dirname "$lib")" && cp -L "$lib" "$IMG/rootfs$lib"
done
(cd "$IMG/rootfs" && tar -cf ../layer.tar -- *)
diff=$(sha256sum "$IMG/layer.tar" | cut -d' ' -f1)
ARCH=$(uname -m | sed 's/x86_64/amd64/; s/aarch64/arm64/')
printf '{"architecture":"%s","os":"linux","config":{"Env":["PATH=/usr/bin:/bin"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$ARCH" "$diff" > "$IMG/config.json"
echo '[{"Config":"config.json","RepoTags":["plain:gpu"],"Layers":["layer.tar"]}]' > "$IMG/manifest.json"
(cd "$IMG" && tar -cf ../plain.tar manifest.json config.json layer.tar)
if run plain-image 0 -- --driver container --gpus 1 --image "docker-archive:$OUT/plain.tar" -- nvidia-smi -L; then
  n=$(gpus_in plain-image)
  if [ "$n" = 1 ]; then
    row plain-image PASS "$(grep '^GPU ' "$OUT/plain-image.out" | head -1)"
  else
    row plain-image FAIL "nvidia-smi -L listed $n GPU(s) (see $OUT/plain-image.out)"
  fi
else
  row plain-image FAIL "the job failed (see $OUT/plain-image.out)"
fi

# 7. Per-job GPU use of a running job (a torch matmul loop where torch imports, else idle).
LOAD='import torch, time
a = torch.randn(8192, 8192, device="cuda")
end = time.time() + 40
while time.time() < end:
    b = a @ a
torch.cuda.synchronize()'
ID=$("$BIN" submit --gpus 1 --driver process --max-attempts 1 --env "LOAD=$LOAD" -- sh -c \
  'if python3 -c "import torch" 2> /dev/null; then python3 -c "$LOAD"; else sleep 40; fi' 2> "$OUT/job-gpu-use.err")
use=""
for _ in $(seq 1 60); do
  "$BIN" job status "$ID" --json > "$OUT/job-gpu-use.json" 2>> "$OUT/job-gpu-use.err"
  use=$(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
for u in d.get("gpu_usage") or []:
    for g in u["devices"]:
        if g.get("memory_bytes", 0) > 0 or sys.argv[2] == "0":
            print(g["uuid"], "memory", g.get("memory_bytes"), "sm", g.get("sm_ratio"), u.get("note", ""))' "$OUT/job-gpu-use.json" "$TORCH" 2> /dev/null)
  [ -n "$use" ] && break
  sleep 0.5
done
"$BIN" job cancel "$ID" > /dev/null 2>&1
if [ -n "$use" ]; then
  row job-gpu-use PASS "$use"
else
  row job-gpu-use FAIL "no gpu_usage with memory in 'job status --json' (see $OUT/job-gpu-use.json)"
fi

# 8. The operator reset on a healthy node: nothing to reset, nothing written.
NODE=$("$BIN" node ls --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["nodes"][0]["name"])')
if "$BIN" node gpu-reset "$NODE" > "$OUT/gpu-reset.out" 2>&1 && grep -q 'no unhealthy GPU' "$OUT/gpu-reset.out"; then
  row gpu-reset PASS "$(cat "$OUT/gpu-reset.out")"
else
  row gpu-reset FAIL "$(head -c 200 "$OUT/gpu-reset.out")"
fi

# 9. VRAM shares: 42% of the first device each, so two fit a device and one more than twice the
# host's GPUs waits with "insufficient gpu memory".
MEM=$("$SMI" --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | tr -d ' ')
SHARE=$((MEM * 42 / 100))
MODE=$(curl -sf "$FOREMAN_ADDR/v1/nodes" | grep -o '"gpu_memory_mode": *"[^"]*"' | head -1)
declare -a SJ
for _ in $(seq 0 $((2 * HOST_GPUS))); do
  SJ+=("$("$BIN" submit --gpu-memory "${SHARE}MiB" --driver process --max-attempts 1 -- sleep 20)")
done
running=0 waiting=""
for _ in $(seq 1 75); do
  running=0
  for j in "${SJ[@]::$((2 * HOST_GPUS))}"; do
    "$BIN" job status "$j" --json 2> /dev/null | grep -q '"state": *"running"' && running=$((running + 1))
  done
  waiting=$("$BIN" job status "${SJ[-1]}" --json 2> /dev/null | grep -o '"reason": *"[^"]*insufficient gpu memory[^"]*"' | head -1)
  [ "$running" = $((2 * HOST_GPUS)) ] && [ -n "$waiting" ] && break
  sleep 0.2
done
if [ "$running" = $((2 * HOST_GPUS)) ] && [ -n "$waiting" ]; then
  row shares PASS "$running shares of ${SHARE} MiB running on $HOST_GPUS GPU(s), one more waits ($waiting); $MODE"
else
  row shares FAIL "$running of $((2 * HOST_GPUS)) shares of ${SHARE} MiB running; last: ${waiting:-not waiting}; $MODE"
fi
for j in "${SJ[@]}"; do "$BIN" job cancel "$j" > /dev/null 2>&1; done

# 10. A share job over its share: the watchdog's event within its 10 s grace (plus samples).
if [ "$TORCH" = 1 ]; then
  OVER=$("$BIN" submit --gpu-memory 1GiB --driver process --max-attempts 1 -- python3 -c 'import torch, time
x = torch.empty(3 << 30, dtype=torch.uint8, device="cuda"); time.sleep(40)')
  ev=""
  for _ in $(seq 1 200); do
    ev=$(curl -sf "$FOREMAN_ADDR/v1/jobs/$OVER/events" | grep -o 'gpu_memory: [^"]*' | head -1)
    [ -n "$ev" ] && break
    sleep 0.2
  done
  "$BIN" job cancel "$OVER" > /dev/null 2>&1
  if [ -n "$ev" ]; then row share-over PASS "attempt.gpu_memory_over: $ev"; else row share-over FAIL "no gpu_memory_over event in 40 s; $MODE"; fi
else
  row share-over SKIP "torch does not import on the host"
fi

table
! printf '%s\n' "${ROWS[@]}" | grep -q ' FAIL '
