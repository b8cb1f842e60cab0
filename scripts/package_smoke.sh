#!/bin/sh
# What scripts/check_fresh_debian.sh runs where the Debian package was installed with apt-get, and nothing else of
# spark is: the binary, its man page, a localization of a failing test with a knowledge base made here, `pytest
# --spark` with the plugin the package carries, and the audit served to a browser.
set -eu
command -v spark
spark --version
test -f /usr/share/man/man1/spark.1.gz
test -x /usr/share/spark/hooks/ci-post-failure.sh
mkdir -p tests
printf 'def test_add():\n    total = 2 + 2\n    assert total == 5\n' > tests/test_a.py
printf 'tests/test_a.py:3: in test_add\n    assert total == 5\nE   assert 4 == 5\n' > error.txt
spark --kb ./kb localize --test tests/test_a.py --error error.txt -k 3 | tee out.txt
grep -q 'tests/test_a.py:3' out.txt
# record reads the repository with libgit2, which spark opens when needed: the package must have brought it.
git init -q . && git -c user.name=t -c user.email=t@x add tests && git -c user.name=t -c user.email=t@x commit -qm a
cat > report.xml <<'XML'
<testsuites><testsuite name="pytest" tests="1" failures="1"><testcase classname="tests.test_a" name="test_add"
file="tests/test_a.py" line="0"><failure message="assert 4 == 5">tests/test_a.py:3: in test_add
    assert total == 5
E   assert 4 == 5</failure></testcase></testsuite></testsuites>
XML
spark record --junit report.xml | tee record.txt
grep -q 'tests/test_a.py:3' record.txt
# The pytest plugin as docs/PYTEST_PLUGIN.md says for Debian 12: no pip; Debian's pytest (the package recommends
# python3-pytest, which apt-get installs with it) loads the plugin from the package by its entry point.
python3 -c 'import pytest' || { echo "python3-pytest, which the package recommends, is not installed"; exit 1; }
rc=0
python3 -m pytest -p no:cacheprovider --spark tests > pytest.txt 2>&1 || rc=$?
cat pytest.txt
[ "$rc" = 1 ] || { echo "pytest --spark exited $rc, not pytest's 1 for a failing test"; exit 1; }
grep -q '= spark =' pytest.txt
grep -q '1. tests/test_a.py:3  assert total == 5' pytest.txt
# The audit in a browser: the HTTP server plugin (/usr/lib/spark/spark-http.so) loads with the package's dependencies
# and serves the quarantine page to the address it prints.
spark audit serve --port 0 > url.txt 2> serve.txt &
server=$!
for _ in $(seq 50); do [ -s url.txt ] && break; sleep 0.2; done
url=$(cat url.txt)
case "$url" in http://127.0.0.1:*/*/) ;; *) cat serve.txt; echo "audit serve printed no address"; exit 1 ;; esac
python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())' "$url" |
  grep -q 'Quarantine: 0 cases'
kill -INT "$server"
wait "$server"
echo "package smoke test: passed"
