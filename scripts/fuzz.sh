#!/usr/bin/env bash
# `make fuzz` (long) and the fuzzing smoke of `make test` (short): runs every Go fuzz target of the
# repository (each `func FuzzXxx(f *testing.F)` in a _test.go file), one after the other, since
# Go fuzzes one target per run. Plain `go test` already replays each target's seeds and its
# testdata/fuzz/FuzzXxx/ corpus; this mutates new inputs.
#
#   FUZZTIME      how long each target fuzzes (default 60s; make test uses 2s)
#   FUZZ          a regexp: only the targets whose name matches (e.g. FUZZ=Apply)
#   FUZZPARALLEL  fuzzing workers per target (default: go's, GOMAXPROCS)
#   FUZZMINIMIZE  time spent shrinking each new input (default 5s; go's 60s per input starves
#                 the slow targets such as FuzzApply, which open a state file per input)
#
# Each package's instrumented test binary is built once (`go test -c -fuzz .`) and run once per
# target from the package directory, which is what `go test -fuzz` does too, minus the link per
# target that would make the smoke in make test several times slower.
#
# A failing input is written to <package>/testdata/fuzz/<FuzzXxx>/ and the command to replay it
# is printed; commit it with the fix (docs/security.md, "Fuzzing"). Every target runs even when
# one fails; the exit status says whether any did.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-60s}
FILTER=${FUZZ:-.}
MINIMIZE=${FUZZMINIMIZE:-5s}
PAR=()
if [[ -n ${FUZZPARALLEL:-} ]]; then PAR=(-test.parallel "$FUZZPARALLEL"); fi
MODULE=$($GO list -m)
CACHE=$($GO env GOCACHE)/fuzz
mkdir -p "$CACHE"
BIN=$(mktemp -d)
trap 'rm -rf "$BIN"' EXIT

# "dir name" per target, in a stable order.
mapfile -t targets < <(grep -rE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' . |
	sed -E 's|^\./(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]+).*|\1 \2|' | grep -v '^\.' | sort)
failed=()
ran=0
built=""
start=$SECONDS
for t in "${targets[@]}"; do
	read -r dir name <<<"$t"
	[[ $name =~ $FILTER ]] || continue
	ran=$((ran + 1))
	test=$BIN/${dir//\//_}.test
	if [[ $built != *" $dir "* ]]; then
		t0=$SECONDS
		if ! $GO test -c -fuzz . -o "$test" "./$dir"; then
			failed+=("build of ./$dir")
			continue
		fi
		built+=" $dir "
		echo "== built ./$dir in $((SECONDS - t0))s"
	fi
	[[ -x $test ]] || continue
	echo "== $name (./$dir, $FUZZTIME)"
	t0=$SECONDS
	fuzz1() {
		(cd "$ROOT/$dir" && "$test" -test.run '^$' -test.fuzz "^${name}\$" -test.fuzztime "$FUZZTIME" \
			-test.fuzzminimizetime "$MINIMIZE" -test.fuzzcachedir "$CACHE/$MODULE/$dir" "${PAR[@]}") 2>&1 | tee "$CACHE/last.log"
		return "${PIPESTATUS[0]}"
	}
	# Go's fuzz coordinator can end a loaded run with a bare "context
	# deadline exceeded" and no failing input: that is the harness, not a
	# crash, so the target runs again, up to three times in all (FuzzApply,
	# at ~26 execs/s on a 2-core machine, timed out twice in a row once); a
	# real crash writes its input and fails at once.
	tries=1
	until fuzz1; do
		if grep -q 'context deadline exceeded' "$CACHE/last.log" && ! grep -q 'Failing input written' "$CACHE/last.log" && ((tries < 3)); then
			tries=$((tries + 1))
			echo "== $name: the fuzz harness timed out without a failing input; try $tries of 3"
			continue
		fi
		failed+=("$name (./$dir)")
		break
	done
	echo "== $name: $((SECONDS - t0))s"
done
echo "fuzz: $ran targets in $((SECONDS - start))s"
if ((ran == 0)); then
	echo "fuzz: no target matches FUZZ=$FILTER" >&2
	exit 1
fi
if ((${#failed[@]} > 0)); then
	printf 'fuzz: FAILED %s\n' "${failed[@]}" >&2
	echo "fuzz: failing inputs are under <package>/testdata/fuzz/<target>/; replay one with" >&2
	echo "      go test -run '<target>/<file>' ./<package>" >&2
	exit 1
fi
