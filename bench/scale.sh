#!/usr/bin/env bash
# Knowledge-base scale benchmark: 1k, 10k, 100k cases grown from a corpus (default ../shared/data/dev).
#   bench/scale.sh [build dir] [sizes...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
sizes=${*:-1000 10000 100000}
corpus=("$root"/../shared/data/dev/*/cases.jsonl)
[ -f "${corpus[0]}" ] || { echo "scale.sh: no corpus at ../shared/data/dev" >&2; exit 1; }
echo "| cases | import s | index s | cases/s (import+index) | index | load s | localize p50 ms | p95 ms | peak RSS MiB |"
echo "|---|---|---|---|---|---|---|---|---|"
for n in $sizes; do
    "$build/bench/spark_scale" "$n" 200 "${corpus[@]}"
done
