#!/bin/sh
# Seconds of one `spark localize` when a learnt case and the failing test share a line of N bytes (an inline base64
# blob) that differs between them, for each N given (default: 10 KB, 100 KB, 300 KB, 1 MB, 2 MB). Two kinds of
# difference: `edit`, the query's blob has one byte changed in its middle (a golden string updated); `other`, the
# query holds another blob of the same length (unlike lines). docs/PERFORMANCE.md, "A line of megabytes":
#   bench/long_line.sh build/spark [BYTES...]
# A run longer than SPARK_BENCH_TIMEOUT seconds (default 60) is stopped and printed as "> TIMEOUT".
# Prints one row per size and kind: bytes, kind, seconds, the query's blob line annotated (yes/no), and the deadline
# note when the localization said one.
set -eu
[ $# -ge 1 ] || { echo "usage: $0 SPARK [BYTES...]" >&2; exit 2; }
spark=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift
[ $# -gt 0 ] || set -- 10000 100000 300000 1000000 2000000
limit=${SPARK_BENCH_TIMEOUT:-60}
work=$(mktemp -d "${TMPDIR:-/tmp}/spark-long-line.XXXXXX")
trap 'rm -rf "$work"' EXIT

printf '| bytes | kind | seconds | blob line annotated | note |\n|---|---|---|---|---|\n'
for bytes in "$@"; do
  for kind in edit other; do
    dir="$work/$bytes-$kind"
    mkdir -p "$dir/tests"
    # The learnt case: the blob's line (line 4) is its faulty line. The query: the same test with the blob edited
    # or replaced; its traceback stops at the assertion (line 5).
    python3 - "$dir" "$bytes" "$kind" <<'PY'
import base64, json, random, sys
folder, size, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = random.Random(size)
def blob(n):
    return base64.b64encode(bytes(rng.getrandbits(8) for _ in range(n * 3 // 4 + 3))).decode()[:n]
learnt = blob(size)
if kind == "edit":
    mid = size // 2
    query = learnt[:mid] + ("A" if learnt[mid] != "A" else "B") + learnt[mid + 1:]
else:
    query = blob(size)
def test(b):
    return ("import base64\n\n\ndef test_decode():\n    DATA = '" + b + "'\n"
            "    assert len(base64.b64decode(DATA)) == 0\n")
error = ("tests/test_blob.py:6: in test_decode\n    assert len(base64.b64decode(DATA)) == 0\n"
         "E   assert 7 == 0\n")
case = {"id": "blob-1", "project": "demo/blob", "test_id": "tests/test_blob.py::test_decode",
        "language": "python", "failure_time": "2026-01-01T00:00:00Z", "error_message": error,
        "files": [{"path": "tests/test_blob.py", "content": test(learnt)}],
        "faulty_lines": [{"path": "tests/test_blob.py", "line": 5}], "source": "seeded"}
with open(folder + "/cases.jsonl", "w") as f:
    f.write(json.dumps(case) + "\n")
with open(folder + "/tests/test_blob.py", "w") as f:
    f.write(test(query))
with open(folder + "/failure.txt", "w") as f:
    f.write(error)
PY
    (cd "$dir" && "$spark" import cases.jsonl > /dev/null 2>&1 && "$spark" index > /dev/null 2>&1) ||
      { echo "$0: import or index failed in $dir" >&2; exit 1; }
    start=$(date +%s.%N)
    status=0
    (cd "$dir" && timeout "$limit" "$spark" localize --test tests/test_blob.py --error failure.txt --format json \
      > out.json 2> err.txt) || status=$?
    end=$(date +%s.%N)
    if [ "$status" -eq 124 ]; then
      printf '| %s | %s | > %s | | stopped by the timeout |\n' "$bytes" "$kind" "$limit"
      continue
    fi
    [ "$status" -eq 0 ] || { echo "$0: spark localize exited $status in $dir" >&2; cat "$dir/err.txt" >&2; exit 1; }
    python3 - "$dir/out.json" "$start" "$end" "$bytes" "$kind" <<'PY'
import json, sys
out = json.load(open(sys.argv[1]))
seconds = float(sys.argv[3]) - float(sys.argv[2])
annotated = any(a["line"] == 5 for a in out.get("annotations", []))
notes = [n for n in out.get("notes", []) if "deadline" in n]
print("| %s | %s | %.2f | %s | %s |" % (sys.argv[4], sys.argv[5], seconds, "yes" if annotated else "no",
                                        notes[0] if notes else ""))
PY
  done
done
