#!/usr/bin/env bash
# Fuzzing in CI: installs cargo-fuzz if missing, builds every target once,
# runs each for FUZZ_SECONDS (default 30) on stable (--sanitizer none), and
# fails if any target crashed (a failed property, a panic, a timeout or an
# out-of-memory). Prints a table of executions per target.
#
#   FUZZ_SECONDS=60 bash .ci/fuzz.sh
#   FUZZ_TARGETS="model tail_recovery" bash .ci/fuzz.sh
#
# Each target reads fuzz/seeds/T (committed) and grows fuzz/corpus/T (not
# committed; cache it between CI runs to keep the progress). A crash leaves
# its input in fuzz/artifacts/T/; reproduce it with
#   cargo fuzz run --sanitizer none T fuzz/artifacts/T/crash-...
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-30}"
start=$SECONDS

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi
cargo fuzz --version
echo "== install: $((SECONDS - start)) s"

t0=$SECONDS
echo "== building the fuzz targets"
cargo fuzz build --sanitizer none
echo "== build: $((SECONDS - t0)) s"

if [[ -n "${FUZZ_TARGETS:-}" ]]; then
    read -r -a targets <<<"$FUZZ_TARGETS"
else
    mapfile -t targets < <(cargo fuzz list)
fi

# The model target creates a sled database per input; a crashing input
# leaves its directory behind, so give them one directory (on tmpfs when
# there is one) and remove it at the end.
scratch_base=/dev/shm
[[ -d "$scratch_base" && -w "$scratch_base" ]] || scratch_base="${TMPDIR:-/tmp}"
AJ_FUZZ_TMPDIR="$(mktemp -d -p "$scratch_base" aj-fuzz-ci.XXXXXX)"
export AJ_FUZZ_TMPDIR
trap 'rm -rf "$AJ_FUZZ_TMPDIR"' EXIT

logs="fuzz/logs"
mkdir -p "$logs"
rows=()
failed=0
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t" "fuzz/seeds/$t"
    extra=()
    if [[ -f "fuzz/dicts/$t.dict" ]]; then
        extra+=("-dict=fuzz/dicts/$t.dict")
    fi
    log="$logs/$t.log"
    echo "== $t: ${seconds} s"
    t0=$SECONDS
    status=0
    cargo fuzz run --sanitizer none "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=60 \
        -print_final_stats=1 "${extra[@]}" >"$log" 2>&1 || status=$?
    elapsed=$((SECONDS - t0))
    # Executions: libFuzzer's final stats, else its last "#N" status line.
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    if [[ -z "$execs" ]]; then
        execs=$(grep -oE '^#[0-9]+' "$log" | tail -n 1 | tr -d '#' || true)
    fi
    execs="${execs:-0}"
    rate=$((execs / (elapsed > 0 ? elapsed : 1)))
    crashes=0
    if [[ $status -ne 0 ]]; then
        crashes=1
        failed=1
        echo "!! $t failed (exit $status); the end of $log:"
        grep -E 'panicked|assertion|left:|right:|ERROR: libFuzzer|Test unit written' "$log" | head -n 12 || true
        tail -n 5 "$log"
    fi
    echo "$t: $execs executions in ${elapsed} s ($rate/s), $crashes crash(es)"
    rows+=("$t|$execs|$rate|$crashes")
done

echo
printf '%-18s | %12s | %8s | %7s\n' target executions exec/s crashes
printf '%-18s-+-%12s-+-%8s-+-%7s\n' "------------------" "------------" "--------" "-------"
for r in "${rows[@]}"; do
    IFS='|' read -r t e s c <<<"$r"
    printf '%-18s | %12s | %8s | %7s\n' "$t" "$e" "$s" "$c"
done
echo "total wall time: $((SECONDS - start)) s"
exit "$failed"
