#!/usr/bin/env bash
# The libFuzzer targets of tests/fuzz, built with Clang (ASan + UBSan) into build-fuzz and run for SECONDS each
# (default 60), two at a time. Saved regressions (tests/fuzz/regressions/TARGET/*) run first as plain inputs. Prints
# a line per target (executions, new coverage, crashes) and the totals; exits 1 when any target crashed or broke an
# invariant, leaving its input in build-fuzz/crashes/TARGET/.
#   scripts/fuzz.sh [SECONDS]       the long run of docs/RELIABILITY.md: scripts/fuzz.sh 1200
# Needs scripts/setup.sh --tests (clang-16, libclang-rt-16-dev, libomp-16-dev).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
build=${SPARK_FUZZ_BUILD:-$root/build-fuzz}
jobs=$(nproc)
targets=(case_jsonl outcomes_jsonl junit error_message answer config python_structure redact label_diff)
declare -A dict=([case_jsonl]=json [outcomes_jsonl]=json [answer]=json [junit]=xml [config]=toml
                 [python_structure]=python [label_diff]=python)

echo "== fuzz build (clang-16, libFuzzer, ASan + UBSan)"
CC=clang-16 CXX=clang++-16 cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPARK_FUZZ=ON \
      -DSPARK_BUILD_TESTS=OFF -DSPARK_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target "${targets[@]/%/_fuzz}"

corpus=$build/fuzz-corpus
rm -rf "$corpus" "$build/fuzz-logs"
mkdir -p "$corpus" "$build/fuzz-logs" "$build/crashes"
python3 "$root/scripts/fuzz_seeds.py" "$corpus/seeds" "$root/../shared/data/dev"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
work=$(mktemp -d)
export TMPDIR=$work
trap 'rm -rf "$work"' EXIT

failed=0
echo "== saved regressions"
for t in "${targets[@]}"; do
    dir=$root/tests/fuzz/regressions/$t
    [ -d "$dir" ] && [ -n "$(ls -A "$dir")" ] || continue
    if ! "$build/tests/fuzz/${t}_fuzz" "$dir"/* >"$build/fuzz-logs/$t.regressions.log" 2>&1; then
        echo "$t: a saved regression fails again (build-fuzz/fuzz-logs/$t.regressions.log)"; failed=1
    fi
done

run() {
    local t=$1
    mkdir -p "$corpus/$t" "$build/crashes/$t"
    local args=("$corpus/$t" "$corpus/seeds/$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048
                -max_len=262144 -print_final_stats=1 -artifact_prefix="$build/crashes/$t/")
    [ -n "${dict[$t]:-}" ] && args+=(-dict="$root/tests/fuzz/${dict[$t]}.dict")
    "$build/tests/fuzz/${t}_fuzz" "${args[@]}" >"$build/fuzz-logs/$t.log" 2>&1
}
echo "== fuzzing: ${#targets[@]} targets, ${seconds} s each, $jobs at a time"
pids=()
names=()
for t in "${targets[@]}"; do
    run "$t" & pids+=($!); names+=("$t")
    if [ "${#pids[@]}" -ge "$jobs" ]; then
        wait "${pids[0]}" || { echo "${names[0]}: FAILED (build-fuzz/fuzz-logs/${names[0]}.log)"; failed=1; }
        pids=("${pids[@]:1}"); names=("${names[@]:1}")
    fi
done
for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { echo "${names[$i]}: FAILED (build-fuzz/fuzz-logs/${names[$i]}.log)"; failed=1; }
done

total=0
printf '%-18s %14s %10s %8s\n' target executions coverage crashes
for t in "${targets[@]}"; do
    log=$build/fuzz-logs/$t.log
    execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
    crashes=$(find "$build/crashes/$t" -type f | wc -l)
    total=$((total + ${execs:-0}))
    printf '%-18s %14s %10s %8s\n' "$t" "${execs:-?}" "${cov:-?}" "$crashes"
    [ "$crashes" -eq 0 ] || failed=1
done
echo "total executions: $total"
exit $failed
