#!/bin/sh
# One new `spark localize` process in each query folder a kept scale-bench store holds (SPARK_SCALE_KEEP=1
# build/bench/spark_scale ...: STORE/queries/N/ with the failure's error.txt and its test file). For farm-bench, to
# compare two binaries' new processes on the same failures (docs/PERFORMANCE.md):
#   farm-bench -n 10 --vs 'bench/localize_each.sh OLD_SPARK STORE' -- bench/localize_each.sh build/spark STORE
# Exits 1, naming the folder, when a query has no test file or its localize fails.
set -eu
[ $# -eq 2 ] || { echo "usage: $0 SPARK STORE" >&2; exit 2; }
spark=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
store=$(cd "$2" && pwd)
for dir in "$store"/queries/*/; do
  test_file=$(cd "$dir" && find . -name '*.py' -type f | sed 's|^\./||' | sort | head -n 1)
  [ -n "$test_file" ] || { echo "$0: $dir holds no test file" >&2; exit 1; }
  (cd "$dir" && "$spark" --kb "$store" localize --test "$test_file" --error error.txt --format json > /dev/null 2>&1) ||
    { echo "$0: spark localize failed in $dir" >&2; exit 1; }
done
