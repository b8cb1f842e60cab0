#!/usr/bin/env bash
# README command (b): set up, build, and run every test. .ci/run calls exactly this.
#
# Builds with warnings as errors, runs the suite (unit tests and end-to-end tests of the real binary; those on
# ../shared/data/dev skip with a message where it is absent), then builds and runs the suite again under
# AddressSanitizer + UndefinedBehaviorSanitizer, then runs each libFuzzer target of tests/fuzz from a fixed seed for
# a set number of executions (scripts/fuzz.sh --fixed, ~15 s each; SPARK_FUZZ_SCALE multiplies the counts,
# SPARK_FUZZ_SECONDS=N explores for N s each from a new seed instead). SPARK_SKIP_SANITIZE=1 skips the second pass,
# SPARK_SKIP_FUZZ=1 the fuzzing. Between the two passes, scripts/tidy.sh holds the sources to .clang-tidy's checks
# (clang-tidy-16; a finding fails the run; SPARK_SKIP_TIDY=1 skips it). The knowledge-base tests run against SQLite
# and a real PostgreSQL 15 server each test process starts for itself (initdb + pg_ctl in a temporary folder, as
# nobody when run as root).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)
"$root/scripts/setup.sh" --tests
# The store tests start their own PostgreSQL server (setup.sh --tests installs it): here they must run, not skip.
export SPARK_REQUIRE_POSTGRES=1

echo "== build (warnings as errors)"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPARK_WERROR=ON >/dev/null
cmake --build "$root/build" -j"$jobs"
echo "== tests"
ctest --test-dir "$root/build" --output-on-failure -j"$jobs"

if [ "${SPARK_SKIP_TIDY:-0}" != 1 ]; then
    # .clang-tidy's checks over every source file of src/, localizer/, miner/ and cli/: a finding fails the run.
    echo "== clang-tidy"
    "$root/scripts/tidy.sh" "$root/build"
fi

if [ "${SPARK_SKIP_SANITIZE:-0}" != 1 ]; then
    echo "== build with ASan + UBSan"
    cmake -S "$root" -B "$root/build-asan" -DCMAKE_BUILD_TYPE=Debug -DSPARK_SANITIZE=ON -DSPARK_WERROR=ON \
          -DSPARK_BUILD_BENCH=OFF >/dev/null
    cmake --build "$root/build-asan" -j"$jobs"
    echo "== tests under ASan + UBSan"
    # The kill -9 tests kill 10 runs each in the plain pass; here 3 (each run is ~10x slower under ASan).
    SPARK_TEST_KILL_POINTS=3 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        ctest --test-dir "$root/build-asan" --output-on-failure -j"$jobs"
fi

if [ "${SPARK_SKIP_FUZZ:-0}" != 1 ]; then
    if [ -n "${SPARK_FUZZ_SECONDS:-}" ]; then
        "$root/scripts/fuzz.sh" "$SPARK_FUZZ_SECONDS"
    else
        "$root/scripts/fuzz.sh" --fixed "${SPARK_FUZZ_SCALE:-1}"
    fi
fi
