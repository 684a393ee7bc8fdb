#!/usr/bin/env bash
# `make fuzz` (long) and the fuzzing smoke of `make test` (short): runs every Go fuzz target of the
# repository (each `func FuzzXxx(f *testing.F)` in a _test.go file), one after the other, since
# `go test -fuzz` takes one package and one target per run. Plain `go test` already replays each
# target's seeds and its testdata/fuzz/FuzzXxx/ corpus; this mutates new inputs.
#
#   FUZZTIME      how long each target fuzzes (default 60s; make test uses 3s)
#   FUZZ          a regexp: only the targets whose name matches (e.g. FUZZ=Apply)
#   FUZZPARALLEL  fuzzing workers per target (default: go's, GOMAXPROCS)
#
# A failing input is written to <package>/testdata/fuzz/<FuzzXxx>/ by go itself, and the
# command to replay it is printed; commit it with the fix (docs/security.md, "Fuzzing").
# Every target runs even when one fails; the exit status says whether any did.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-60s}
FILTER=${FUZZ:-.}
PAR=()
if [[ -n ${FUZZPARALLEL:-} ]]; then PAR=(-parallel "$FUZZPARALLEL"); fi

# "dir name" per target, in a stable order.
mapfile -t targets < <(grep -rE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' . |
	sed -E 's|^\./(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]+).*|\1 \2|' | grep -v '^\.' | sort)
failed=()
ran=0
start=$SECONDS
for t in "${targets[@]}"; do
	read -r dir name <<<"$t"
	[[ $name =~ $FILTER ]] || continue
	ran=$((ran + 1))
	echo "== $name (./$dir, $FUZZTIME)"
	t0=$SECONDS
	if ! $GO test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "${PAR[@]}" "./$dir"; then
		failed+=("$name (./$dir)")
	fi
	echo "== $name: $((SECONDS - t0))s"
done
echo "fuzz: $ran targets in $((SECONDS - start))s"
if ((ran == 0)); then
	echo "fuzz: no target matches FUZZ=$FILTER" >&2
	exit 1
fi
if ((${#failed[@]} > 0)); then
	printf 'fuzz: FAILED %s\n' "${failed[@]}" >&2
	echo "fuzz: the failing inputs are under <package>/testdata/fuzz/<target>/; replay one with" >&2
	echo "      go test -run '<target>/<file>' ./<package>" >&2
	exit 1
fi
