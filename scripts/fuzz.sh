#!/usr/bin/env bash
# The sanitizer build and the libFuzzer targets of tests/fuzz. One Clang build (build-asan: ASan + UBSan, libFuzzer's
# coverage instrumentation, -O1 with line tables, NDEBUG as the product) serves both the second test pass of
# scripts/test.sh and the fuzz targets, so the libraries are compiled once for the two. Each target runs for SECONDS
# (default 60), two at a time. Saved regressions (tests/fuzz/regressions/TARGET/*) run first as plain inputs. Prints a
# line per target (executions, new coverage, crashes) and the totals; exits 1 when any target crashed or broke an
# invariant, leaving its input in build-asan/crashes/TARGET/.
#   scripts/fuzz.sh [SECONDS]       explores: a new seed each run (the long run of docs/RELIABILITY.md: 1200)
#   scripts/fuzz.sh --fixed [SCALE] the pass scripts/test.sh runs: seed 1 and a set number of executions per target
#                                   (about 15 s each on a CI runner; SCALE multiplies them), so the same commit gives
#                                   the same inputs every time and a failure is the commit's, not the draw's
#   scripts/fuzz.sh --build         configures and builds all of build-asan (spark, the tests, the fuzz targets) and
#                                   stops: scripts/test.sh's sanitizer pass
# Needs scripts/setup.sh --tests (clang-16, libclang-rt-16-dev, libomp-16-dev).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
fixed=0
build_only=0
if [ "${1:-}" = --fixed ]; then fixed=1; shift; fi
if [ "${1:-}" = --build ]; then build_only=1; shift; fi
seconds=${1:-60}
scale=${1:-1}
# Executions per target for --fixed: about 15 s each on a 2-core CI runner, two targets at a time.
declare -A fixed_runs=([case_jsonl]=5000 [outcomes_jsonl]=25000 [junit]=40000 [error_message]=150000 [answer]=150000
                       [config]=35000 [python_structure]=3000 [brace_structure]=3000 [redact]=12000 [label_diff]=300000)
build=${SPARK_FUZZ_BUILD:-$root/build-asan}
jobs=$(nproc)
targets=(case_jsonl outcomes_jsonl junit error_message answer config python_structure brace_structure redact label_diff)
declare -A dict=([case_jsonl]=json [outcomes_jsonl]=json [answer]=json [junit]=xml [config]=toml
                 [python_structure]=python [label_diff]=python)

echo "== sanitizer build (clang-16; ASan + UBSan; libFuzzer's instrumentation)"
# -O1 with line tables only, as OSS-Fuzz builds: a crash's stack still names file and line, and the build takes 16%
# less than -O2 -g (miner/mining_store.cpp: 51 s against 61 s with the sanitizers' instrumentation). NDEBUG, as the
# product is built: with asserts on, toml++'s own parser asserts on inputs its release build reports as errors.
# The tests are configured (and built by --build) so that this one tree serves scripts/test.sh's sanitizer pass too.
cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang-16 -DCMAKE_CXX_COMPILER=clang++-16 \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPARK_FUZZ=ON -DSPARK_WERROR=ON \
      "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" \
      "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" \
      -DSPARK_BUILD_TESTS=ON -DSPARK_BUILD_BENCH=OFF -DSPARK_UNITY=ON >/dev/null
if [ "$build_only" = 1 ]; then
    cmake --build "$build" -j"$jobs"
    exit 0
fi
cmake --build "$build" -j"$jobs" --target "${targets[@]/%/_fuzz}"

corpus=$build/fuzz-corpus
rm -rf "$corpus" "$build/fuzz-logs" "$build/crashes.previous"
# A run counts only its own crashes; the last run's are kept beside, in crashes.previous.
[ -d "$build/crashes" ] && mv "$build/crashes" "$build/crashes.previous"
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
        echo "$t: a saved regression fails again ($build/fuzz-logs/$t.regressions.log)"; failed=1
    fi
done

# The executions a target makes in --fixed mode: its count times SCALE.
fixed_count() { python3 -c "print(int(${fixed_runs[$1]} * float('$scale')))"; }

run() {
    local t=$1
    mkdir -p "$corpus/$t" "$build/crashes/$t"
    local max_len=262144
    [ "$t" = python_structure ] && max_len=32768  # each input is scanned once per function it defines
    [ "$t" = brace_structure ] && max_len=65536  # parsed once, then the scope of up to 8 of its functions
    local args=("$corpus/$t" "$corpus/seeds/$t" -timeout=20 -rss_limit_mb=2048
                -max_len="$max_len" -print_final_stats=1 -artifact_prefix="$build/crashes/$t/")
    if [ "$fixed" = 1 ]; then
        # A ceiling on the wall clock too (5 min x SCALE; the slowest takes about 1 min): a target that slows down
        # by orders of magnitude fails here with its count of executions, instead of holding the run to CI's limit.
        args+=(-seed=1 -runs="$(fixed_count "$t")"
               -max_total_time="$(python3 -c "print(max(60, int(300 * float('$scale'))))")")
    else
        args+=(-max_total_time="$seconds")
    fi
    [ -n "${dict[$t]:-}" ] && args+=(-dict="$root/tests/fuzz/${dict[$t]}.dict")
    "$build/tests/fuzz/${t}_fuzz" "${args[@]}" >"$build/fuzz-logs/$t.log" 2>&1
}
if [ "$fixed" = 1 ]; then
    echo "== fuzzing: ${#targets[@]} targets, seed 1, a set number of executions each (x$scale), $jobs at a time"
else
    echo "== fuzzing: ${#targets[@]} targets, ${seconds} s each, $jobs at a time"
fi
pids=()
names=()
for t in "${targets[@]}"; do
    run "$t" & pids+=($!); names+=("$t")
    if [ "${#pids[@]}" -ge "$jobs" ]; then
        wait "${pids[0]}" || { echo "${names[0]}: FAILED ($build/fuzz-logs/${names[0]}.log)"; failed=1; }
        pids=("${pids[@]:1}"); names=("${names[@]:1}")
    fi
done
for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { echo "${names[$i]}: FAILED ($build/fuzz-logs/${names[$i]}.log)"; failed=1; }
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
    if [ "$fixed" = 1 ]; then
        want=$(fixed_count "$t")
        if [ "${execs:-0}" -lt "$want" ]; then
            echo "$t: stopped at its time ceiling after ${execs:-0} of $want executions ($build/fuzz-logs/$t.log)"
            failed=1
        fi
    fi
done
echo "total executions: $total"
exit $failed
