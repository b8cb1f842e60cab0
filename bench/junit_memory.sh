#!/usr/bin/env bash
# Peak memory (the child's getrusage ru_maxrss) and time of `spark record --junit R --no-localize` against the size of
# the JUnit report R (issue 40, item 8: a 1 GB report of 4.27 M test cases needed more than 11 GB; 100 messages of
# 10 MB took 3.5 GB and grew the store to 2.1 GB). Two kinds of report: SIZES, reports of that many MB of short test
# cases (one in 20 failing); MESSAGES, reports of that many failures, each with a 10 MB message (pytest's long form: the
# test's frame, a 10 MB assertion diff, the location). Each binary given is run on the same files, one after the other,
# each time on a new store; the table gives the store's size after the run too. Generated files live in a temporary
# folder, deleted at the end (the largest run needs about 2.5 GB of disk).
#   bench/junit_memory.sh [SPARK...]          default: build/spark
#   SIZES="10 100 1000" MESSAGES="10 100" bench/junit_memory.sh OLD/spark NEW/spark
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -gt 0 ] || set -- "$root/build/spark"
binaries=()
for b in "$@"; do binaries+=("$(realpath "$b")"); done
sizes=${SIZES:-10 100 1000}
messages=${MESSAGES:-10 100}
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
cd "$work"
git init -q . && mkdir tests
printf 'class TestBig:\n    def test_value(self, v):\n        assert v == 2\n\n\ndef test_diff():\n    assert "a" == "b"\n' \
    > tests/test_a.py
git add . && git -c user.email=bench@spark -c user.name=bench commit -qm init
# run BINARY REPORT: "peak_MiB seconds store_MiB exit" of one `spark record`, on a new store.
run() {
    rm -rf .spark
    "$py" - "$1" "$2" <<'PY'
import os, subprocess, sys, time
spark, report = sys.argv[1], sys.argv[2]
start = time.monotonic()
p = subprocess.Popen([spark, "record", "--junit", report, "--no-localize"], stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
_, status, usage = os.wait4(p.pid, 0)
seconds = time.monotonic() - start
store = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(".spark") for f in fs) if os.path.isdir(".spark") else 0
print(f"{usage.ru_maxrss / 1024:.0f} {seconds:.1f} {store / 2**20:.1f} {os.waitstatus_to_exitcode(status)}")
PY
}
printf '| report | MB | test cases | binary | peak RSS (MiB) | time (s) | store (MiB) | exit |\n|---|---|---|---|---|---|---|---|\n'
measure() {  # REPORT LABEL SPARK...
    local report=$1 label=$2 mb cases
    shift 2
    mb=$("$py" -c "import os, sys; print(f'{os.path.getsize(sys.argv[1]) / 1e6:.0f}')" "$report")
    cases=$(grep -c '<testcase' "$report" || true)
    for spark in "$@"; do
        read -r peak secs store code < <(run "$spark" "$report")
        printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$label" "$mb" "$cases" "$spark" "$peak" "$secs" "$store" "$code"
    done
}
for mb in $sizes; do
    "$py" - "$mb" <<'PY'
import sys
target = int(sys.argv[1]) * 10**6
with open("cases.xml", "w") as f:
    f.write('<?xml version="1.0" encoding="utf-8"?>\n<testsuites><testsuite name="pytest" timestamp="2026-11-26T08:00:00">\n')
    i = 0
    while f.tell() < target:
        # ~234 bytes a test case, as in issue 40's report (1 GB, 4.27 M test cases)
        head = (f'<testcase classname="tests.test_a.TestBig" name="test_value_{i:08d}_with_a_name_of_a_realistic_length'
                f'_for_a_generated_test" file="tests/test_a.py" line="2" time="0.001"')
        if i % 20 == 7:
            f.write(head + '><failure message="assert 1 == 2">v = 1\n\n    def test_value(self, v):\n&gt;       assert v == 2\n'
                    'E       assert 1 == 2\n\ntests/test_a.py:3: AssertionError</failure></testcase>\n')
        else:
            f.write(head + ' />\n')
        i += 1
    f.write('</testsuite></testsuites>\n')
PY
    measure cases.xml "${mb} MB of test cases" "${binaries[@]}"
    rm -f cases.xml
done
for n in $messages; do
    "$py" - "$n" <<'PY'
import sys
n = int(sys.argv[1])
line = "E         - " + "x" * 100 + "\n"
diff = line * (10 * 2**20 // len(line))
with open("messages.xml", "w") as f:
    f.write('<?xml version="1.0" encoding="utf-8"?>\n<testsuites><testsuite name="pytest">\n')
    for i in range(n):
        f.write(f'<testcase classname="tests.test_a" name="test_diff_{i}"><failure message="AssertionError">'
                '    def test_diff():\n&gt;       assert "a" == "b"\nE       AssertionError: assert \'a\' == \'b\'\n')
        f.write(diff)
        f.write('\ntests/test_a.py:7: AssertionError</failure></testcase>\n')
    f.write('</testsuite></testsuites>\n')
PY
    measure messages.xml "$n messages of 10 MB" "${binaries[@]}"
    rm -f messages.xml
done
