#!/usr/bin/env bash
# What the test suite needs beyond Go (`make test` runs this first; .ci/run too): the network
# nemeses and cut-off tests need ip and iptables, the system tests ping, file, ps and fuser, the
# static build gcc and libc headers, the UI's browser tests (systest/system_ui_test.go) Chromium and a font,
# the Python SDK's tests (make test-python) Debian's pip, setuptools and pytest, make release the arm64 cross gcc, qemu and systemd-analyze. Missing ones are installed when we are root on Debian/Ubuntu;
# otherwise this fails with the one command to run. Nothing is installed when all are present.
# The object-store tests (issue 25) need a real S3 server: SeaweedFS (Apache-2.0), built once from
# the Go module proxy into bin/weed (about 3-4 minutes on 2 cores; skipped while bin/weed exists).
set -euo pipefail

cd "$(dirname "$0")/.."
WEED_VERSION=v0.0.0-20261109003541-7506e5f91cd6
# go install refuses a module whose go.mod has replace directives (SeaweedFS has one), so the
# module is downloaded and built as the main module, where its replace applies.
build_weed() {
  [ -x bin/weed ] && return 0
  local go=${GO:-go} dir start=$SECONDS
  echo "test-deps: building the S3 server for the tests (SeaweedFS $WEED_VERSION) into bin/weed" >&2
  # Outside this module, so its go.mod and go.sum stay as they are.
  dir=$(cd / && GOWORK=off GOFLAGS= "$go" mod download -json "github.com/seaweedfs/seaweedfs@$WEED_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] || { echo "test-deps: could not download SeaweedFS $WEED_VERSION" >&2; return 1; }
  mkdir -p bin
  (cd "$dir" && GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0 "$go" build -trimpath -ldflags '-s -w' -o "$OLDPWD/bin/weed.tmp" ./weed)
  mv bin/weed.tmp bin/weed
  echo "test-deps: bin/weed built in $((SECONDS - start)) s" >&2
}
build_weed

# package:probe (a command on PATH, or a file when it starts with /)
deps=(
  iproute2:ip
  iptables:iptables
  iputils-ping:ping
  file:file
  procps:ps
  psmisc:fuser
  make:make
  gcc:gcc
  libc6-dev:/usr/include/stdio.h
  chromium:/usr/lib/chromium/chromium
  fonts-dejavu-core:/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
  python3-pip:/usr/lib/python3/dist-packages/pip/__init__.py
  python3-setuptools:/usr/lib/python3/dist-packages/setuptools/__init__.py
  python3-pytest:/usr/bin/pytest
  # make release and its test (release/): the arm64 cross build (cgo, static), qemu to run the
  # arm64 binary, systemd-analyze to verify the packaged unit.
  gcc-aarch64-linux-gnu:aarch64-linux-gnu-gcc
  libc6-dev-arm64-cross:/usr/aarch64-linux-gnu/lib/libc.a
  qemu-user-static:qemu-aarch64-static
  systemd:systemd-analyze
)

missing=()
for d in "${deps[@]}"; do
  pkg=${d%%:*} probe=${d#*:}
  if [[ $probe == /* ]]; then
    [ -e "$probe" ] || missing+=("$pkg")
  else
    # sbin too: iptables lives there and a non-root PATH may lack it.
    PATH=$PATH:/usr/sbin:/sbin command -v "$probe" >/dev/null 2>&1 || missing+=("$pkg")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "test-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
  exit 0
fi
echo "test-deps: the test suite needs ${missing[*]}; run: sudo apt-get update && sudo $cmd" >&2
exit 1
