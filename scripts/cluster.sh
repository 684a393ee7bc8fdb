#!/usr/bin/env bash
# Starts (or stops) three local foreman agents on 127.0.0.1 with base ports 7070, 7080 and 7090.
# Data and logs live under ./.cluster/<name>. `make cluster` calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${FOREMAN_BIN:-bin/foreman}
DIR=.cluster

stop() {
  for pidfile in "$DIR"/*/agent.pid; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null && echo "stopped $(basename "$(dirname "$pidfile")") (pid $pid)"
    rm -f "$pidfile"
  done
}

start() {
  mkdir -p "$DIR"
  local i=0
  for port in 7070 7080 7090; do
    i=$((i + 1))
    name=node$i
    mkdir -p "$DIR/$name"
    if [ -f "$DIR/$name/agent.pid" ] && kill -0 "$(cat "$DIR/$name/agent.pid")" 2>/dev/null; then
      echo "$name already running"; continue
    fi
    args=(agent --name "$name" --data-dir "$DIR/$name/data" --bind 127.0.0.1 --port "$port" --bootstrap-expect 3)
    [ "$port" != 7070 ] && args+=(--join 127.0.0.1:7070)
    nohup "$BIN" "${args[@]}" >"$DIR/$name/agent.log" 2>&1 &
    echo $! >"$DIR/$name/agent.pid"
    echo "started $name on 127.0.0.1:$port (log $DIR/$name/agent.log)"
  done
  # Wait for one leader and two followers.
  for _ in $(seq 1 60); do
    if FOREMAN_ADDR=http://127.0.0.1:7070 "$BIN" cluster raft 2>/dev/null | grep -qw leader; then
      FOREMAN_ADDR=http://127.0.0.1:7070 "$BIN" cluster raft
      return 0
    fi
    sleep 0.5
  done
  echo "cluster did not elect a leader in 30s; see $DIR/*/agent.log" >&2
  return 1
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
