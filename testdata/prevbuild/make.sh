#!/usr/bin/env bash
# make.sh OLD_BIN: writes prevbuild.tar.gz here, the data dir and a backup written by a previous
# build (OLD_BIN: `git worktree add /tmp/prev REV && make -C /tmp/prev build`), for
# TestSystemPreviousBuildDataDir (systest). One agent n1 on 127.0.0.1:27470 (the raft configuration records
# the address, so the test starts there too): finished, failed, waiting and dependent jobs, a
# workflow, a schedule; then a backup (foreman operator snapshot save) and a clean stop.
set -euo pipefail
BIN=$(readlink -f "$1"); HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d); trap 'kill $PID 2>/dev/null || true; rm -rf "$W"' EXIT
export FOREMAN_ADDR=http://127.0.0.1:27470
"$BIN" agent --name n1 --data-dir "$W/n1" --bind 127.0.0.1 --port 27470 --job-users '*' --job-default-user= --default-driver process >"$W/log" 2>&1 &
PID=$!
for _ in $(seq 1 100); do "$BIN" job counts >/dev/null 2>&1 && "$BIN" submit --name probe -- true >/dev/null 2>&1 && break; sleep 0.2; done
for i in 1 2 3; do "$BIN" submit --name "ok-$i" -- true; done
"$BIN" submit --name failed --max-attempts 1 -- false
W1=$("$BIN" submit --name later --run-at 2036-01-01T00:00:00Z -- true)
"$BIN" submit --name after-later --after "$W1:ok" -- true
"$BIN" submit --name dep-later --depends-on "$W1" -- true
"$BIN" workflow submit -f "$HERE/../workflows/etl.yaml"
"$BIN" schedule create nightly --cron '0 3 * * *' -- true
for _ in $(seq 1 100); do [ "$("$BIN" job ls --state running --json | grep -c '"id"')" = 0 ] && [ "$("$BIN" job ls --state queued --json | grep -c '"id"')" = 0 ] && break; sleep 0.2; done
"$BIN" operator snapshot save "$W/backup.snap"
kill -TERM $PID; wait $PID || true
"$BIN" version > "$W/version"
tar -C "$W" -czf "$HERE/prevbuild.tar.gz" n1 backup.snap version
echo "wrote $HERE/prevbuild.tar.gz: $(cat "$W/version" | head -1)"
