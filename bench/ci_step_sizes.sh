#!/bin/sh
# What long test ids make of the CI step: a repository whose one test is parametrized with N strings of B bytes
# (pytest's id of a string parameter is the string), all failing, run by real pytest with --junitxml; then
# hooks/ci-step.sh as the GitHub Action runs it (GITHUB_ACTIONS=true). Prints the sizes of the report, the job summary
# ($GITHUB_STEP_SUMMARY; GitHub takes 1 MiB a step), the step's log and the store. Sizes, not times: one run is enough.
#   bench/ci_step_sizes.sh N B [SPARK [HOOKS]]     default: build/spark, this checkout's hooks/
#   bench/ci_step_sizes.sh 4 300000; bench/ci_step_sizes.sh 50 1000000 OLD/build/spark OLD/hooks
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
n=$1
bytes=$2
spark=$(realpath "${3:-$root/build/spark}")
hooks=$(realpath "${4:-$root/hooks}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
cd "$work"
git init -q .
mkdir tests
printf "import pytest\n\n\n@pytest.mark.parametrize('s', [str(i) + 'x' * %d for i in range(%d)])\ndef test_long(s):\n    assert s == ''\n" \
  "$bytes" "$n" > tests/test_long.py
git add -A
git -c user.name=bench -c user.email=bench@localhost commit -qm long-ids
/usr/bin/python3 -B -m pytest -p no:cacheprovider -q --junitxml=report.xml tests > /dev/null 2>&1 || :
: > summary
: > outputs
GITHUB_ACTIONS=true GITHUB_STEP_SUMMARY="$work/summary" GITHUB_OUTPUT="$work/outputs" SPARK="$spark" \
  SPARK_REPORT=report.xml sh "$hooks/ci-step.sh" > log 2>&1
store=$(du -cb .spark/kb.sqlite* | tail -n 1 | cut -f 1)
echo "N=$n B=$bytes: report $(wc -c < report.xml) bytes, summary $(wc -c < summary) bytes, log $(wc -c < log) bytes, store $store bytes; $(tr '\n' ' ' < outputs)"
