#!/usr/bin/env bash
# A JUnit report of N test cases, half failing, through `spark record --no-localize` at 10k and 100k: the time of each
# (median of RUNS) and their ratio, which is ~10 when reading and recording are linear (issue 13: it was quadratic,
# 3.9 s at 10k and not done in 120 s at 100k).
#   bench/junit_scale.sh [build dir]      RUNS=3 by default
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
spark=${1:-$root/build}/spark
runs=${RUNS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
git init -q . && mkdir tests && printf 'def test_a():\n    assert 1 == 2\n' > tests/test_a.py
git add . && git -c user.email=bench@spark -c user.name=bench commit -qm init
python3 - <<'PY'
for n in (10000, 100000):
    with open(f"r{n}.xml", "w") as f:
        f.write('<testsuite name="big">\n')
        for i in range(n):
            tail = '><failure message="m">E   assert 1 == 2</failure></testcase>' if i % 2 else '/>'
            f.write(f'<testcase classname="tests.test_a" name="test_{i}"{tail}\n')
        f.write('</testsuite>\n')
PY
median() { python3 -c 'import statistics, sys; print(statistics.median(float(x) for x in sys.stdin))'; }
declare -A med
for n in 10000 100000; do
    for _ in $(seq "$runs"); do
        rm -rf .spark
        s=$(date +%s.%N)
        "$spark" record --junit "r$n.xml" --no-localize >/dev/null 2>&1
        e=$(date +%s.%N)
        python3 -c "print($e - $s)"
    done > "t$n"
    med[$n]=$(median < "t$n")
    printf 'record --no-localize, %6d test cases: median %.2f s over %d runs\n' "$n" "${med[$n]}" "$runs"
done
printf 'ratio 100k / 10k: %.1f (10 = linear)\n' "$(python3 -c "print(${med[100000]} / ${med[10000]})")"
