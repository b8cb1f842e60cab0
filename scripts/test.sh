#!/usr/bin/env bash
# README command (b): set up, build, and run every test. .ci/run calls exactly this.
#
# Builds with warnings as errors, runs the suite (unit tests and end-to-end tests of the real binary; those on
# ../shared/data/dev skip with a message where it is absent), then builds with Clang and runs the suite again under
# AddressSanitizer + UndefinedBehaviorSanitizer, then runs each libFuzzer target of tests/fuzz (from that same build)
# from a fixed seed for a set number of executions (scripts/fuzz.sh --fixed, ~15 s each; SPARK_FUZZ_SCALE multiplies the
# counts, SPARK_FUZZ_SECONDS=N explores for N s each from a new seed instead). SPARK_SKIP_SANITIZE=1 skips the second
# pass, SPARK_SKIP_FUZZ=1 the fuzzing. Between the two passes, scripts/tidy.sh holds the sources to .clang-tidy's checks
# (clang-tidy-16; a finding fails the run; SPARK_SKIP_TIDY=1 skips it). The knowledge-base tests run against SQLite and
# a real PostgreSQL 15 server each test process starts for itself (initdb + pg_ctl in a temporary folder, as nobody when
# run as root).
#
# Each test runs once, PLAIN_ONLY's twice. The sanitizer pass runs all but the tests whose time is other programs' or
# repeated kill -9 cycles (SANITIZE_SKIP below: they reach no code the rest do not); the first pass, against the GCC
# build, runs those and the ones whose point is the plain build (PLAIN_ONLY: the whole dev corpus, of which the
# sanitizers take every 4th case; glibc's heap and the memory bounds, which a sanitizer's allocator hides and those
# tests skip there). With SPARK_SKIP_SANITIZE=1 the first pass runs every test. Each phase's line says how long the
# phases before it took, so a log cut short by CI's time limit still shows where the time went.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)
mmss() { echo "$(($1 / 60))m$(($1 % 60))s"; }
start=$SECONDS
phase_start=$SECONDS
phase_name=setup
done_phases=""
phase() {
    done_phases+="${done_phases:+, }$phase_name $(mmss $((SECONDS - phase_start)))"
    phase_name=$1
    phase_start=$SECONDS
    echo "== $2  [at $(mmss $((SECONDS - start))): $done_phases]"
}
# Left out of the sanitizer pass (they run in the first): the .deb built and installed, the kill -9 cycles, the
# real Java/JavaScript/browser/CI-runner programs, and the check that setup installed every tool.
SANITIZE_SKIP='^(package\.|fault\.kill_9_during_|languages\.|lang_corpus_makes_cases$|tools_installed_by_setup$|audit_serve_in_a_browser$|ci_action_and_component_run$)'
PLAIN_ONLY='^(dev_corpus\.|prefer_huge_pages\.|spark_mine_discover\.bad_input_is_refused_or_reported_and_never_becomes_a_case$|spark_record\.a_report_of_huge_messages_takes_memory_and_store_room_of_their_caps_not_their_size$)'
"$root/scripts/setup.sh" --tests
# The store tests start their own PostgreSQL server (setup.sh --tests installs it): here they must run, not skip.
export SPARK_REQUIRE_POSTGRES=1

phase build "build (warnings as errors; the libraries and the binary in unity batches)"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPARK_WERROR=ON -DSPARK_UNITY=ON >/dev/null
cmake --build "$root/build" -j"$jobs"
if [ "${SPARK_SKIP_SANITIZE:-0}" != 1 ]; then
    phase tests "tests of the plain build (SANITIZE_SKIP and PLAIN_ONLY; the rest run under the sanitizers below)"
    ctest --test-dir "$root/build" --output-on-failure -j"$jobs" -R "$SANITIZE_SKIP|$PLAIN_ONLY"
else
    phase tests "tests"
    ctest --test-dir "$root/build" --output-on-failure -j"$jobs"
fi

if [ "${SPARK_SKIP_TIDY:-0}" != 1 ]; then
    # .clang-tidy's checks over every source file of src/, localizer/, miner/ and cli/: a finding fails the run.
    # build-tidy is configured, not built: its unity batches are the units clang-tidy reads (scripts/tidy.sh).
    phase tidy "clang-tidy"
    cmake -S "$root" -B "$root/build-tidy" -DSPARK_BUILD_TESTS=OFF -DSPARK_BUILD_BENCH=OFF -DSPARK_UNITY=ON >/dev/null
    "$root/scripts/tidy.sh" "$root/build-tidy"
fi

if [ "${SPARK_SKIP_SANITIZE:-0}" != 1 ]; then
    # One Clang build with ASan + UBSan for this pass and the fuzz targets (scripts/fuzz.sh --build: build-asan).
    phase asan-build "build with Clang, ASan + UBSan (the tests and the fuzz targets)"
    "$root/scripts/fuzz.sh" --build
    phase asan-tests "tests under ASan + UBSan (all but SANITIZE_SKIP's)"
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        ctest --test-dir "$root/build-asan" --output-on-failure -j"$jobs" -E "$SANITIZE_SKIP"
fi

if [ "${SPARK_SKIP_FUZZ:-0}" != 1 ]; then
    phase fuzz "fuzzing (scripts/fuzz.sh)"
    if [ -n "${SPARK_FUZZ_SECONDS:-}" ]; then
        "$root/scripts/fuzz.sh" "$SPARK_FUZZ_SECONDS"
    else
        "$root/scripts/fuzz.sh" --fixed "${SPARK_FUZZ_SCALE:-1}"
    fi
fi
phase end "all passed"
