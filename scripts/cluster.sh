#!/usr/bin/env bash
# Starts (or stops) three local foreman agents on 127.0.0.1 with base ports 7070, 7080 and 7090.
# Data and logs live under ./.cluster/<name>. `make cluster` calls this.
# `start --tls` (or TLS=1) makes a CA, agent certificates and a gossip key under ./.cluster/tls
# (once) and starts the agents with HTTPS, mutual TLS between them and encrypted gossip.
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

# tls_setup writes the CA, one agent certificate per node, a client certificate and a gossip key.
tls_setup() {
  local t="$DIR/tls"
  mkdir -p "$t"
  chmod 700 "$t"
  [ -f "$t/foreman-ca.pem" ] || "$BIN" tls ca create --dir "$t" >/dev/null
  for name in node1 node2 node3; do
    [ -f "$t/$name-server.pem" ] || "$BIN" tls cert create --server --node "$name" --dir "$t" \
      --ca "$t/foreman-ca.pem" --ca-key "$t/foreman-ca-key.pem" >/dev/null
  done
  [ -f "$t/cli-client.pem" ] || "$BIN" tls cert create --client --node cli --dir "$t" \
    --ca "$t/foreman-ca.pem" --ca-key "$t/foreman-ca-key.pem" >/dev/null
  if [ ! -f "$t/gossip.key" ]; then
    (umask 077; "$BIN" tls gossip-key >"$t/gossip.key")
  fi
}

start() {
  mkdir -p "$DIR"
  local scheme=http tls_dir=""
  if [ "${TLS:-0}" = 1 ]; then
    tls_setup
    scheme=https tls_dir="$DIR/tls"
    export FOREMAN_CACERT="$tls_dir/foreman-ca.pem"
  fi
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
    if [ -n "$tls_dir" ]; then
      args+=(--tls-cert "$tls_dir/$name-server.pem" --tls-key "$tls_dir/$name-server-key.pem" --tls-ca "$tls_dir/foreman-ca.pem")
      # The gossip key goes by environment, not argv (ps shows argv).
      FOREMAN_GOSSIP_KEY=$(cat "$tls_dir/gossip.key") nohup "$BIN" "${args[@]}" >"$DIR/$name/agent.log" 2>&1 &
    else
      nohup "$BIN" "${args[@]}" >"$DIR/$name/agent.log" 2>&1 &
    fi
    echo $! >"$DIR/$name/agent.pid"
    echo "started $name on 127.0.0.1:$port (log $DIR/$name/agent.log)"
  done
  # Wait for one leader and two followers.
  for _ in $(seq 1 60); do
    if FOREMAN_ADDR=$scheme://127.0.0.1:7070 "$BIN" cluster raft 2>/dev/null | grep -qw leader; then
      FOREMAN_ADDR=$scheme://127.0.0.1:7070 "$BIN" cluster raft
      if [ -n "$tls_dir" ]; then
        echo "TLS on. Point the CLI at it with:"
        echo "  export FOREMAN_ADDR=https://127.0.0.1:7070 FOREMAN_CACERT=$PWD/$tls_dir/foreman-ca.pem"
      fi
      return 0
    fi
    sleep 0.5
  done
  echo "cluster did not elect a leader in 30s; see $DIR/*/agent.log" >&2
  return 1
}

case "${1:-start}" in
  start)
    [ "${2:-}" = --tls ] && TLS=1
    start
    ;;
  stop) stop ;;
  *) echo "usage: $0 start [--tls]|stop" >&2; exit 2 ;;
esac
