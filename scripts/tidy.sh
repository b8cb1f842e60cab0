#!/usr/bin/env bash
# Runs clang-tidy (Debian's clang-tidy-16; scripts/setup.sh --tests installs it) with .clang-tidy's checks over
# spark's own sources, against a build's compile_commands.json (default build/).
#
#   scripts/tidy.sh [BUILD_DIR] [FILE...]      exit 0 when no check fires, 1 otherwise (each finding printed, or
#                                              clang-tidy's own error when a run of it failed)
#
# With no FILE, every unit scripts/tidy_units.py lists: in a unity build (-DSPARK_UNITY=ON, as CI's) each batch, whose
# shared headers are parsed and matched once (a quarter of the CPU time of file by file). A batch lives in the build
# folder, so --config-file names its .clang-tidy: the root's, or for cli/'s batches the root's with cli/.clang-tidy's
# options. Findings are printed at their source lines; a batch's own `#include "x.cpp"` lines are not findings.
#
# libstdc++ 12's <expected> asks for __cpp_concepts >= 202002L, which Clang 16 does not claim although it compiles
# what spark uses of it (the same setting as the fuzz build in CMakeLists.txt); GCC's -std=c++23 is Clang 16's c++2b.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
[ $# -gt 0 ] && shift
[ -f "$build/compile_commands.json" ] || { echo "tidy: no $build/compile_commands.json: configure a build first" >&2; exit 2; }
tidy=$(command -v clang-tidy-16 || true)
[ -n "$tidy" ] || { echo "tidy: clang-tidy-16 is not installed: run scripts/setup.sh --tests" >&2; exit 2; }
out=$(mktemp)
err=$(mktemp)
cli_config=$(mktemp)
trap 'rm -f "$out" "$err" "$cli_config"' EXIT
# cli/.clang-tidy inherits the root's checks and tightens an option; --config-file reads one file, so they are joined.
cli_lines=$(sed -n 's/.*LineThreshold: *//p' "$root/cli/.clang-tidy")
sed "s/readability-function-size.LineThreshold: .*/readability-function-size.LineThreshold: $cli_lines/" \
    "$root/.clang-tidy" > "$cli_config"
tidy_args=(-p "$build" --quiet --extra-arg=-std=c++2b --extra-arg=-Wno-unknown-warning-option
    --extra-arg=-Wno-builtin-macro-redefined --extra-arg=-U__cpp_concepts --extra-arg=-D__cpp_concepts=202002L)
status=0
if [ $# -gt 0 ]; then
    # Files named: each finds its own folder's .clang-tidy.
    units=("$@")
    printf '%s\n' "${units[@]}" | (cd "$root" && xargs -P "$(nproc)" -n 4 "$tidy" "${tidy_args[@]}") \
        > "$out" 2> "$err" || status=$?
else
    mapfile -t units < <(python3 "$root/scripts/tidy_units.py" "$build/compile_commands.json" "$root")
    [ ${#units[@]} -gt 0 ] || { echo "tidy: $build/compile_commands.json lists none of spark's sources" >&2; exit 2; }
    # The two folders' units side by side (cli/'s few would otherwise wait for the last of the root's).
    tidy_folder() {  # FOLDER CONFIG
        printf '%s\n' "${units[@]}" | sed -n "s/^$1 //p" |
            (cd "$root" && xargs -r -P "$(nproc)" -n 1 "$tidy" "${tidy_args[@]}" --config-file="$2") \
            > "$out.$1" 2> "$err.$1"
    }
    tidy_folder root "$root/.clang-tidy" & root_job=$!
    tidy_folder cli "$cli_config" || status=$?
    wait $root_job || status=$?
    cat "$out.root" "$out.cli" > "$out"
    cat "$err.root" "$err.cli" > "$err"
    rm -f "$out.root" "$out.cli" "$err.root" "$err.cli"
fi
findings=$(grep -E ': (warning|error):' "$out" |
    grep -vE '/Unity/unity_[0-9]+_cxx\.cxx:[0-9]+:[0-9]+: warning: suspicious #include' | sort -u || true)
if [ -n "$findings" ]; then
    echo "$findings"
    echo "tidy: $(echo "$findings" | wc -l) finding(s) in ${#units[@]} unit(s)" >&2
    exit 1
fi
# No finding printed, but a clang-tidy run that failed (it crashed, or could not process a file) checked nothing:
# that is a failure too, not a pass.
if [ "$status" -ne 0 ]; then
    tail -n 20 "$err" >&2
    echo "tidy: clang-tidy failed (xargs exit $status) with no finding printed; see above" >&2
    exit 1
fi
echo "tidy: ${#units[@]} unit(s), no finding"
