#!/usr/bin/env bash
# Rolling restart (or upgrade) of a foreman cluster: restart one agent at a time and wait until it
# is back, every member is alive and a leader is known before touching the next. Running jobs keep
# running (their supervisors outlive the agent, which re-adopts them); submits continue through the
# other agents, blocked at most by one election when the leader restarts (it hands leadership over
# on SIGTERM). TestSystemRollingRestart runs the same procedure on three real agents.
#
# Usage: scripts/rolling-restart.sh [-c RESTART_CMD] [-t TIMEOUT_SECONDS] HOST[:PORT]...
#   RESTART_CMD restarts the agent on one host; {} stands for the HOST argument. It must return
#   only once the old agent has stopped (systemctl restart does), or the check may see it still up.
#   Default: ssh {} sudo systemctl restart foreman   (HOST without :PORT is used for ssh)
#   Restart the leader last (`foreman cluster raft`) to have exactly one election in all.
# Needs the foreman binary on PATH (or FOREMAN_BIN) to ask each agent's API.
set -euo pipefail
BIN=${FOREMAN_BIN:-foreman}
CMD='ssh {} sudo systemctl restart foreman'
TIMEOUT=120
while getopts 'c:t:' opt; do
  case $opt in
    c) CMD=$OPTARG ;;
    t) TIMEOUT=$OPTARG ;;
    *) sed -n '9,15p' "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "usage: $0 [-c RESTART_CMD] [-t TIMEOUT_SECONDS] HOST[:PORT]..." >&2; exit 2; }
n=$#

# whole HOST: the agent at HOST answers, sees every one of the n members alive, and knows a leader.
whole() {
  local out
  out=$("$BIN" version --cluster --json --addr "$1" 2>/dev/null) || return 1
  [ "$(grep -c '"status": "alive"' <<<"$out")" -ge "$n" ] || return 1
  "$BIN" cluster raft --json --addr "$1" 2>/dev/null | grep -q '"leader": "[^"]'
}

wait_whole() {
  local deadline=$((SECONDS + TIMEOUT))
  until whole "$1"; do
    [ $SECONDS -lt $deadline ] || { echo "rolling-restart: $1 not back and whole after ${TIMEOUT}s; stopping here" >&2; exit 1; }
    sleep 1
  done
}

for host in "$@"; do
  wait_whole "$host"
done
for host in "$@"; do
  echo "restarting $host"
  start=$SECONDS
  bash -c "${CMD//\{\}/${host%:*}}"
  wait_whole "$host"
  echo "$host back and the cluster whole after $((SECONDS - start))s"
done
"$BIN" version --cluster --addr "$1"
