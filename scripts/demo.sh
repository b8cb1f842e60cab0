#!/usr/bin/env bash
# README command (a): set up, build, and run spark's main job on sample data the project makes itself.
#
# Makes a small Python project (scripts/demo_corpus.py), breaks its tests in recorded ways and runs the real pytest
# on each break; the failures become a labelled corpus that spark imports and indexes. Then a new failure, not in the
# corpus, is localized: ranked suspicious lines with their reasons. Everything lands in demo-work/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"

echo "== build"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" --target spark -j"$(nproc)" >/dev/null
spark="$root/build/spark"

# Debian's python3-pytest installs pytest for /usr/bin/python3; another python3 first on PATH may lack it.
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)

work="$root/demo-work"
echo "== sample data: real pytest runs on a small project of our own"
"$py" "$root/scripts/demo_corpus.py" "$work"
cd "$work"

echo "== spark import"
"$spark" import cases.jsonl
echo "== spark index"
"$spark" index
echo "== spark localize (a new failure: tests/test_shapes.py, see demo-work/query/failure.txt)"
cd query
cat failure.txt
echo
"$spark" --kb ../.spark localize --test tests/test_shapes.py --error failure.txt -k 5 --show-annotated
echo
echo "== the line that was really broken: $(cat truth.json)"
echo
echo "== the prompt spark would send an LLM in the paper's default mode (set SPARK_LLM_BASE_URL and SPARK_LLM_MODEL"
echo "   to send it; docs/LLM.md)"
"$spark" --kb ../.spark localize --test tests/test_shapes.py --error failure.txt -k 5 --format json --show-prompt \
  2>/dev/null | "$py" -c 'import json, sys; print(json.load(sys.stdin)["llm"]["prompt"])'
