#!/usr/bin/env bash
# Runs clang-tidy (Debian's clang-tidy-16; scripts/setup.sh --tests installs it) with .clang-tidy's checks over
# spark's own sources, two files at a time, against a build's compile_commands.json (default build/).
#
#   scripts/tidy.sh [BUILD_DIR] [FILE...]      exit 0 when no check fires, 1 otherwise (each finding printed, or
#                                              clang-tidy's own error when a run of it failed)
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
if [ $# -gt 0 ]; then files=("$@"); else
    mapfile -t files < <(cd "$root" && ls src/*/*.cpp localizer/*.cpp localizer/eval/*.cpp miner/*.cpp cli/*.cpp)
fi
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
status=0
printf '%s\n' "${files[@]}" | (cd "$root" && xargs -P "$(nproc)" -n 4 "$tidy" -p "$build" --quiet \
    --extra-arg=-std=c++2b --extra-arg=-Wno-unknown-warning-option --extra-arg=-Wno-builtin-macro-redefined \
    --extra-arg=-U__cpp_concepts --extra-arg=-D__cpp_concepts=202002L) > "$out" 2> "$err" || status=$?
if grep -qE ': (warning|error):' "$out"; then
    grep -E ': (warning|error):' "$out" | sort -u
    echo "tidy: $(grep -cE ': (warning|error):' "$out") finding(s) in ${#files[@]} file(s)" >&2
    exit 1
fi
# No finding printed, but a clang-tidy run that failed (it crashed, or could not process a file) checked nothing:
# that is a failure too, not a pass.
if [ "$status" -ne 0 ]; then
    tail -n 20 "$err" >&2
    echo "tidy: clang-tidy failed (xargs exit $status) with no finding printed; see above" >&2
    exit 1
fi
echo "tidy: ${#files[@]} file(s), no finding"
