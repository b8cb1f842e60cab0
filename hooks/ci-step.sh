#!/bin/sh
# The CI step of spark's GitHub Action (action.yml) and GitLab component (templates/spark.yml): hooks/ci-post-failure.sh's
# `spark record`, plus what a CI page shows: the counts as step outputs and a markdown summary (the counts, then one
# row per failing test: its verdict, whether it was seen before or an edit is suggested, its top lines).
#
# Environment (the action and the component set it from their inputs):
#   SPARK_REPORT  the JUnit XML report (required)        SPARK_FORMAT  github | text | json | sarif (default github
#   SPARK_SARIF   also write SARIF to this file                        on GitHub Actions, else text)
#   SPARK         the spark binary (default spark)       SPARK_KB      the knowledge base (spark's own default else)
#   SPARK_VERIFY  a test command ({test_id} replaced) each suggested edit is verified with (spark record --verify)
#   GITHUB_OUTPUT / GITHUB_STEP_SUMMARY   where GitHub takes outputs and the summary; elsewhere the summary is
#                 written to spark-summary.md
# Outputs: failures=N (failing tests of the report, localized), learnt=N (cases learnt from fixes in this run).
# Never fails the job: the test step already said whether the build is green.
set -u
spark=${SPARK:-spark}
report=${SPARK_REPORT:-}
sarif=${SPARK_SARIF:-}
verify=${SPARK_VERIFY:-}
commit=${SPARK_COMMIT:-${GITHUB_SHA:-${CI_COMMIT_SHA:-HEAD}}}
if [ -n "${GITHUB_ACTIONS:-}" ]; then format=${SPARK_FORMAT:-github}; else format=${SPARK_FORMAT:-text}; fi
[ -n "$format" ] || format=text
outputs=${GITHUB_OUTPUT:-/dev/null}
summary=${GITHUB_STEP_SUMMARY:-spark-summary.md}
[ -n "${SPARK_KB:-}" ] || unset SPARK_KB
failures=0
learnt=0
note=""

# GitHub takes at most 1 MiB (1,048,576 bytes) per step's summary; this step writes at most this much of it.
summary_limit=1000000

# The number of labelled cases in the knowledge base ("" when it cannot be read).
cases() { "$spark" kb status 2>/dev/null | sed -n 's/^cases: \([0-9][0-9]*\).*/\1/p'; }

# Text from outside (an input, a path) on one line of a log: control characters (a newline among them) as spaces, so
# that it can start no line (a workflow command) of its own; at most 300 bytes.
one_line() { printf '%s' "$1" | tr '\000-\037\177' ' ' | head -c 300; }

# The same text in the summary's Markdown, as spark writes its own cells: HTML's specials, "@" (no mention pings
# anyone) and Markdown's marks as entities, in <code>, so that nothing in it renders as markup.
md_code() {
  printf '<code>%s</code>' "$(one_line "$1" | sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' \
    -e 's/"/\&quot;/g' -e "s/'/\\&#39;/g" -e 's/|/\&#124;/g' -e 's/@/\&#64;/g' -e 's/`/\&#96;/g' \
    -e 's/\*/\&#42;/g' -e 's/_/\&#95;/g' -e 's/\[/\&#91;/g' -e 's/\]/\&#93;/g' -e 's/\\/\&#92;/g' \
    -e 's/~/\&#126;/g' -e 's/\$/\&#36;/g')"
}

finish() {
  printf 'failures=%s\nlearnt=%s\n' "$failures" "$learnt" >> "$outputs"
  # Within summary_limit whatever the run: spark keeps its table within 640 KiB, the open failures are 200 lines of
  # 1,000 characters at most; should the whole still be over, the open failures are left out, then the table.
  part=$(mktemp)
  write_summary > "$part"
  if [ "$(wc -c < "$part")" -gt "$summary_limit" ]; then
    open_list_cut="the summary would pass GitHub's limit"
    write_summary > "$part"
  fi
  if [ "$(wc -c < "$part")" -gt "$summary_limit" ]; then
    triage_cut="the summary would pass GitHub's limit"
    write_summary > "$part"
  fi
  cat "$part" >> "$summary"
  rm -f "$part"
  exit 0
}

open_list_cut=""
triage_cut=""
write_summary() {
  {
    echo "### spark"
    echo
    if [ -n "$note" ]; then
      printf '%s\n' "$note"
    else
      echo "| failing tests localized | cases learnt from fixes |"
      echo "|---|---|"
      echo "| $failures | $learnt |"
      if [ -n "$triage_cut" ]; then
        echo
        echo "The failures' table is left out: $triage_cut (\`spark failures list\` lists them)."
      elif [ -s "${triage:-/dev/null}" ]; then
        echo
        # The table's own "### spark: N failing tests" heading becomes a line under the step's.
        sed -e '1s/^### spark: //' "$triage"
      fi
      if [ -n "$open_list_cut" ]; then
        echo
        echo "The open failures are left out: $open_list_cut (\`spark failures list\` lists them)."
      elif [ -s "${open_list:-/dev/null}" ]; then
        echo
        echo "<details><summary>open failures (not fixed yet)</summary>"
        echo
        echo '~~~~'
        # Test ids and messages are the tests' text: no fence of ours can be closed by them; a line is cut at
        # 1,000 characters.
        head -n 200 "$open_list" | LC_ALL=C sed -e 's/~~~~/~ ~ ~ ~/g' -e 's/^\(.\{1000\}\).*/\1 …/'
        echo '~~~~'
        echo
        echo "</details>"
      fi
    fi
  }
}

if [ -z "$report" ] || [ ! -f "$report" ]; then
  echo "spark: no JUnit report at '$(one_line "$report")' (run the tests with --junitxml=REPORT, and give it as the report)" >&2
  note="No JUnit report at $(md_code "$report"): nothing recorded."
  finish
fi
if ! command -v "$spark" >/dev/null 2>&1; then
  echo "spark: '$(one_line "$spark")' is not installed (the Debian package: docs/PACKAGING.md); nothing recorded" >&2
  note="spark is not installed on this runner: nothing recorded."
  finish
fi
sha=$(git rev-parse --verify -q "$commit^{commit}" 2>/dev/null || echo "$commit")
before=$(cases)
triage=$(mktemp)
trap 'rm -f "$triage" "${open_list:-}"' EXIT
set -- record --junit "$report" --commit "$commit" --format "$format"
# The triage table for the summary, when the installed spark writes one (an older one has no --markdown).
"$spark" record --help 2>/dev/null | grep -q -- '--markdown' && set -- "$@" --markdown "$triage"
[ -n "$sarif" ] && set -- "$@" --sarif "$sarif"
[ -n "$verify" ] && set -- "$@" --verify "$verify"
"$spark" "$@"
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "spark: 'spark record' exited with status $rc (see its messages above); the CI job is not failed by spark" >&2
fi
after=$(cases)
if [ -n "$before" ] && [ -n "$after" ]; then learnt=$((after - before)); fi
[ "$learnt" -ge 0 ] || learnt=0
# The report's failing tests: the open failures whose last failing commit is this one.
failures=$("$spark" failures list --format json 2>/dev/null | grep -c "\"last_commit\": \"$sha\"")
open_list=$(mktemp)
"$spark" failures list > "$open_list" 2>/dev/null || : > "$open_list"
grep -q '^[0-9a-f]\{12\} ' "$open_list" || : > "$open_list"
finish
