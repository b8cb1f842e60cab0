#!/usr/bin/env bash
# Knowledge-base scale benchmark: 1k, 10k, 100k cases grown from a corpus (../shared/data/dev), with one perturbed
# copy in five bringing a new test-file version (SHARE=0.2), or another share: SHARE=0 bench/scale.sh
#   bench/scale.sh [build dir] [sizes...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
sizes=${*:-1000 10000 100000}
corpus=("$root"/../shared/data/dev/*/cases.jsonl)
[ -f "${corpus[0]}" ] || { echo "scale.sh: no corpus at ../shared/data/dev" >&2; exit 1; }
share=${SHARE:-0.2}
echo "| cases | new versions | import s | index s | cases/s (import+index) | index | load s | localize p50 ms | p95 ms | peak RSS MiB |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for n in $sizes; do
    "$build/bench/spark_scale" "$n" 200 "$share" "${corpus[@]}"
done
