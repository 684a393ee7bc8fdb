#!/usr/bin/env bash
# A stress run of the suite: CI's own command (`CI=true bash .ci/run`) N times, each in a fresh
# clone of this repository's HEAD, one after the other, then a tally of the failures per test and
# each run's wall time.
#
#   scripts/ci-soak.sh N [--hog]
#
#   --hog      keep one core busy with another process (a shell loop) during every run, as a
#              neighbour on a shared machine would
#   SOAK_DIR   where the clones and logs go (default: a new /tmp/foreman-soak.XXXXXX); each run
#              leaves run-I.log there
#   SOAK_REF   what to clone (default HEAD: commit first; uncommitted changes are not tested)
#
# Exits 0 only when every run passed. The tally goes to stdout and to $SOAK_DIR/tally.txt.
set -euo pipefail
usage() { echo "usage: $0 N [--hog]" >&2; exit 2; }
[ $# -ge 1 ] || usage
N=$1; shift
[[ $N =~ ^[1-9][0-9]*$ ]] || usage
HOG=0
for a in "$@"; do
  case $a in
    --hog) HOG=1 ;;
    *) usage ;;
  esac
done
REPO=$(cd "$(dirname "$0")/.." && pwd)
REF=$(git -C "$REPO" rev-parse "${SOAK_REF:-HEAD}")
DIR=${SOAK_DIR:-$(mktemp -d /tmp/foreman-soak.XXXXXX)}
mkdir -p "$DIR"
echo "soak: $N run(s) of .ci/run at ${REF:0:12}, hog=$HOG, in $DIR" >&2

hog_pid=
stop_hog() { [ -z "$hog_pid" ] || kill "$hog_pid" 2>/dev/null || true; hog_pid=; }
trap stop_hog EXIT

declare -A fails=() retries=()
summary=()
failed_runs=0
for i in $(seq 1 "$N"); do
  clone=$DIR/clone-$i
  rm -rf "$clone"
  git clone -q "$REPO" "$clone"
  git -C "$clone" checkout -q "$REF"
  if [ "$HOG" = 1 ]; then
    sh -c 'while :; do :; done' &
    hog_pid=$!
  fi
  log=$DIR/run-$i.log
  start=$(date +%s)
  rc=0
  (cd "$clone" && CI=true bash .ci/run) >"$log" 2>&1 || rc=$?
  wall=$(( $(date +%s) - start ))
  stop_hog
  # Failed tests (the innermost names: subtests included) and failed packages. A fuzz target
  # whose harness timed out without a failing input is run once more by scripts/fuzz.sh (a Go
  # fuzzing quirk, not a crash): counted apart, as a retry.
  retried=$(grep -oE '^== [^ :]+: the fuzz harness timed out without a failing input' "$log" | awk '{print $2}' | tr -d ':' | sort -u || true)
  tests=$(grep -oE -- '--- FAIL: [^ ]+' "$log" | awk '{print $3}' | sort -u | grep -vxF -f <(printf '%s\n' $retried) || true)
  pkgs=$(grep -E '^FAIL[[:space:]]+[^ ]+' "$log" | awk '{print $2}' | sort -u || true)
  for t in $tests; do fails[$t]=$(( ${fails[$t]:-0} + 1 )); done
  for t in $retried; do retries[$t]=$(( ${retries[$t]:-0} + 1 )); done
  if [ "$rc" = 0 ]; then
    result=pass
  else
    result="FAIL (exit $rc)"
    failed_runs=$((failed_runs + 1))
    [ -n "$tests$pkgs" ] || fails["(no test named: see $log)"]=$(( ${fails["(no test named: see $log)"]:-0} + 1 ))
  fi
  line="run $i: $result, $((wall / 60))m$((wall % 60))s, load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
  [ -z "$pkgs" ] || line="$line; failed packages: $(echo $pkgs)"
  summary+=("$line")
  echo "soak: $line" >&2
  rm -rf "$clone"
done

{
  echo "ci-soak: $N run(s) of CI=true bash .ci/run at ${REF:0:12}, hog=$HOG, $(nproc) cores"
  printf '%s\n' "${summary[@]}"
  if [ ${#fails[@]} -eq 0 ]; then
    echo "failures per test: none"
  else
    echo "failures per test:"
    for t in "${!fails[@]}"; do echo "  ${fails[$t]}  $t"; done | sort -rn
  fi
  if [ ${#retries[@]} -gt 0 ]; then
    echo "fuzz harness timeouts retried by scripts/fuzz.sh (no failing input):"
    for t in "${!retries[@]}"; do echo "  ${retries[$t]}  $t"; done | sort -rn
  fi
  echo "$((N - failed_runs)) of $N green"
} | tee "$DIR/tally.txt"
[ "$failed_runs" = 0 ]
