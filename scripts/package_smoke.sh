#!/bin/sh
# What scripts/check_fresh_debian.sh runs where the Debian package was installed with apt-get, and nothing else of
# spark is: the binary, its man page and a localization of a failing test with a knowledge base made here.
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
echo "package smoke test: passed"
