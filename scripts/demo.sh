#!/usr/bin/env bash
# README command (a): set up, build, and run spark's main job on sample data the project makes itself.
#
# The lifecycle a CI user lives, on a small Python project of spark's own (scripts/demo_corpus.py), in a real git
# repository with real pytest runs:
#   1. the team's earlier fixes: a labelled corpus (each case a recorded break and its real pytest failure) imported;
#   2. a commit breaks a test: CI runs pytest, `spark record` records the failure and localizes it;
#   3. a developer fixes the test: the next CI run passes, `spark record` learns the case (its faulty line labelled
#      by the fix's diff) and `spark audit show` shows it;
#   4. the same line breaks again later: the new failure is localized with the learned case among its reasons;
#   5. `spark audit` lists the quarantine (the 3-sigma rule's outliers, for a person to review).
# Everything lands in demo-work/.
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
started=$(date +%s)

work="$root/demo-work"
section() { printf '\n== %s\n' "$*"; }
# Runs the suite as CI would; prints pytest's last line (the counts) and leaves report.xml.
run_tests() {
  PYTHONPATH=. "$py" -B -m pytest -q -p no:cacheprovider --junitxml=report.xml tests >pytest.log 2>&1 || true
  echo "pytest: $(tail -n 1 pytest.log)"
}
# Replaces one line of tests/test_shapes.py (the demo's breaks and fixes).
edit_test() {
  "$py" - "$1" "$2" <<'EOF'
import sys
path = "tests/test_shapes.py"
text = open(path).read()
old, new = sys.argv[1], sys.argv[2]
if old not in text:
    raise SystemExit(f"demo: {old!r} is not in {path}")
open(path, "w").write(text.replace(old, new, 1))
EOF
}
commit() { git add -A && git commit -q -m "$1" && echo "git: $(git log -1 --format='%h %s')"; }

section "sample data: a small project of our own, and the team's earlier fixes from real pytest runs"
"$py" "$root/scripts/demo_corpus.py" "$work"
repo="$work/repo"
cp -r "$work/project" "$repo"
cd "$repo"
printf '.spark/\nreport.xml\npytest.log\n__pycache__/\n' >.gitignore
git init -q
git config user.name "Demo Developer"
git config user.email demo@example.invalid
# The project's remote names it (spark never contacts it): cases are "shapes-…" of example.com/acme/shapes.
git remote add origin https://example.com/acme/shapes.git
commit "shapes: the library and its passing suite"

section "1. the knowledge base starts from the team's earlier fixes"
"$spark" import ../cases.jsonl

section "2. a commit breaks a test; CI runs the suite and then spark record"
edit_test "    shape = scale(make_rectangle(), 2)" "    shape = scale(make_rectangle(), 3)"
commit "scale test: try factor 3"
run_tests
"$spark" record --junit report.xml -k 3

section "3. a developer fixes the test; the next CI run passes and spark record learns the case"
edit_test "    shape = scale(make_rectangle(), 3)" "    shape = scale(make_rectangle(), 2)"
commit "scale test: back to factor 2"
run_tests
"$spark" record --junit report.xml
learned=$("$spark" audit --all --format json |
          "$py" -c 'import json, sys; print([c["id"] for c in json.load(sys.stdin)["cases"]][-1])')
echo
"$spark" audit show "$learned" --color never

section "4. later, the same line breaks again: the learned case is among the reasons"
edit_test "    shape = scale(make_rectangle(), 2)" "    shape = scale(make_rectangle(), 4)"
commit "scale test: try factor 4"
run_tests
"$spark" record --junit report.xml -k 3

section "5. the quarantine: mined cases whose fix changed an outlying number of lines wait for a person"
"$spark" audit

echo
echo "demo: the lifecycle above took $(($(date +%s) - started)) s after the build; everything is in $work"
echo "      (set SPARK_LLM_BASE_URL and SPARK_LLM_MODEL to have an LLM rank the lines: docs/LLM.md)"
