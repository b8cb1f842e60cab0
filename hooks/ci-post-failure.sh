#!/bin/sh
# spark's CI post-failure step. Run it after the test step, whether the tests passed or not:
#   - failures in the report become open failures and are localized at once (annotations in the job log, SARIF);
#   - passes close earlier open failures of the same tests: that commit is the fix, so the failure is labelled and
#     joins the knowledge base (or the quarantine, for a person to audit with `spark audit`).
#
# Usage: hooks/ci-post-failure.sh REPORT.xml [SARIF_FILE]
# Environment:
#   SPARK         the spark binary (default: spark on PATH)
#   SPARK_KB      the knowledge base: a folder (default .spark; keep it in a CI cache) or postgresql://… (one store
#                 shared by every runner; docs/KNOWLEDGE_BASE.md). With a server store a report that cannot be
#                 stored (the server down) is spooled in SPARK_LOCAL_DIR (default .spark) and sent by the next run.
#   SPARK_COMMIT  the commit tested (default: $GITHUB_SHA, $CI_COMMIT_SHA, else HEAD)
# Never fails the job because of spark: the test step already said whether the build is green.
set -u
report=${1:?usage: ci-post-failure.sh REPORT.xml [SARIF_FILE]}
sarif=${2:-}
spark=${SPARK:-spark}
commit=${SPARK_COMMIT:-${GITHUB_SHA:-${CI_COMMIT_SHA:-HEAD}}}

if [ ! -f "$report" ]; then
  echo "spark: no JUnit report at $report (run the tests with --junitxml=$report)" >&2
  exit 0
fi
format=text
if [ -n "${GITHUB_ACTIONS:-}" ]; then format=github; fi
set -- record --junit "$report" --commit "$commit" --format "$format"
if [ -n "$sarif" ]; then set -- "$@" --sarif "$sarif"; fi
"$spark" "$@"
rc=$?
if [ "$rc" -ne 0 ]; then
  # spark's own messages above say what was stored (its summary) and what failed; this step never fails the job.
  echo "spark: 'spark record' exited with status $rc (see its messages above); the CI job is not failed by spark" >&2
fi
exit 0
