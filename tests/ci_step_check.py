#!/usr/bin/env python3
"""spark's GitHub Action (action.yml) and GitLab component (templates/spark.yml), run as their CI would run them.

Reads each definition, puts the inputs in as the runner does (`${{ inputs.x }}`, `$[[ inputs.x ]]`, the defaults
for the rest), and runs its step in a real git repository with a real pytest report, in the environment the CI gives
a job (GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, GITHUB_SHA, GITHUB_ACTION_PATH; CI_COMMIT_SHA). Checks the outputs, the
summary, the annotations and the SARIF file: a failure localized, then learnt from its fix; no report; no spark.

Usage: ci_step_check.py SPARK_BINARY
"""

import os
import re
import subprocess
import sys
import tempfile

import yaml

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
failures = []


def check(condition, what, detail=""):
    if not condition:
        failures.append(what + ("\n" + detail if detail else ""))


def run(command, cwd, env=None, shell=False):
    return subprocess.run(command, cwd=cwd, env=env, shell=shell, capture_output=True, text=True, errors="replace")


def git(repo, *args, date="2026-01-01T00:00:00Z"):
    env = dict(os.environ, GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@x",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@x")
    r = run(["git", *args], repo, env)
    if r.returncode != 0:
        sys.exit("git %s: %s" % (" ".join(args), r.stderr))
    return r.stdout.strip()


def pytest(repo):
    run(["/usr/bin/python3", "-B", "-m", "pytest", "-p", "no:cacheprovider", "--junitxml=report.xml", "tests"], repo)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def project(repo, expected):
    write(os.path.join(repo, "tests", "test_a.py"),
          "def test_add():\n    total = 2 + 2\n    assert total == %s\n\n\ndef test_ok():\n    assert 1 == 1\n" % expected)


def github_step(repo, inputs, tmp):
    """Runs action.yml's step with `inputs` as GitHub's runner would; returns (result, outputs dict, summary)."""
    with open(os.path.join(SOURCE, "action.yml")) as f:
        action = yaml.safe_load(f)
    check(action["runs"]["using"] == "composite", "action.yml: a composite action")
    values = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    for name, spec in action["inputs"].items():
        if spec.get("required"):
            check(name in inputs, "the test gives the required input " + name)
    values.update(inputs)
    substitute = lambda text: re.sub(r"\$\{\{\s*inputs\.([a-z_]+)\s*\}\}", lambda m: values[m.group(1)], str(text))
    (step,) = action["runs"]["steps"]
    outputs_file, summary_file = os.path.join(tmp, "github_output"), os.path.join(tmp, "step_summary")
    for f in (outputs_file, summary_file):
        open(f, "w").close()
    env = dict(os.environ, GITHUB_ACTIONS="true", GITHUB_ACTION_PATH=SOURCE, GITHUB_OUTPUT=outputs_file,
               GITHUB_STEP_SUMMARY=summary_file, GITHUB_SHA=git(repo, "rev-parse", "HEAD"), GITHUB_WORKSPACE=repo)
    env.pop("SPARK_KB", None)
    env.update({k: substitute(v) for k, v in step.get("env", {}).items()})
    result = run(["/bin/bash", "-e", "-c", substitute(step["run"])], repo, env)
    outputs = dict(line.split("=", 1) for line in open(outputs_file).read().splitlines() if "=" in line)
    # The action's outputs are the step's: every one it declares is set.
    for name, spec in action["outputs"].items():
        check(spec["value"] == "${{ steps.%s.outputs.%s }}" % (step["id"], name), "action.yml maps output " + name)
        check(name in outputs, "the step sets output " + name, str(outputs))
    return result, outputs, open(summary_file).read()


def gitlab_job(repo, inputs, tmp):
    """Runs templates/spark.yml's job script with `inputs` as GitLab would; returns (results, summary)."""
    with open(os.path.join(SOURCE, "templates", "spark.yml")) as f:
        spec, jobs = list(yaml.safe_load_all(f))
    values = {name: str(s.get("default", "")) for name, s in spec["spec"]["inputs"].items()}
    values.update(inputs)
    substitute = lambda text: re.sub(r"\$\[\[\s*inputs\.([a-z_]+)\s*\]\]", lambda m: values[m.group(1)], str(text))
    job = jobs["spark"]
    check(job.get("allow_failure") is True and job.get("when") == "always", "the GitLab job never fails the pipeline")
    env = dict(os.environ, CI="true", GITLAB_CI="true", CI_COMMIT_SHA=git(repo, "rev-parse", "HEAD"))
    env.pop("SPARK_KB", None)
    env.pop("GITHUB_ACTIONS", None)
    env.update({k: substitute(v) for k, v in job.get("variables", {}).items()})
    results = [run(["/bin/sh", "-c", substitute(line)], repo, env) for line in job["script"]]
    summary = os.path.join(repo, "spark-summary.md")
    return results, open(summary).read() if os.path.exists(summary) else ""


def long_ids(repo, binary, tmp):
    """4 failing rows of a test parametrized with strings of 300 KB: pytest's ids are the strings themselves."""
    write(os.path.join(repo, "tests", "test_long.py"),
          "import pytest\n\n\n@pytest.mark.parametrize('s', [c * 300000 for c in 'abcd'])\ndef test_long(s):\n"
          "    assert s == ''\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "long ids", date="2026-01-02T12:00:00Z")
    pytest(repo)
    result, outputs, summary = github_step(repo, {"report": "report.xml", "spark": binary}, tmp)
    check(result.returncode == 0, "the step exits 0 with 300 KB test ids", result.stderr[:2000])
    check(len(summary.encode()) < 1 << 20, "the summary with 300 KB test ids is within GitHub's 1 MiB",
          "%d bytes" % len(summary.encode()))
    for c in "abcd":
        check(("test&#95;long&#91;%s" % (c * 100)) in summary, "the summary names the row " + c, summary[:3000])
    check(outputs.get("failures") == "4", "the 4 rows with long ids are counted", str(outputs))
    os.remove(os.path.join(repo, "tests", "test_long.py"))
    git(repo, "commit", "-q", "-am", "no long ids", date="2026-01-02T13:00:00Z")
    pytest(repo)


def main():
    binary = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        repo = os.path.join(tmp, "repo")
        os.makedirs(repo)
        git(repo, "init", "-q")
        write(os.path.join(repo, ".gitignore"), ".spark/\n__pycache__/\n*.xml\n*.sarif\nspark-summary.md\n")
        project(repo, "5")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "broken")
        pytest(repo)

        # A failing test: localized as annotations, counted, listed in the summary; SARIF written.
        result, outputs, summary = github_step(repo, {"report": "report.xml", "sarif": "spark.sarif",
                                                      "verify": "/usr/bin/python3 -B -m pytest {test_id}",
                                                      "spark": binary}, tmp)
        check(result.returncode == 0, "the action's step exits 0", result.stderr)
        check(outputs.get("failures") == "1" and outputs.get("learnt") == "0", "outputs after a failure", str(outputs))
        check(re.search(r"^::(warning|error|notice) file=tests/test_a\.py,line=3", result.stdout, re.M) is not None,
              "an annotation at the failing line", result.stdout)
        check("| 1 | 0 |" in summary and "tests/test_a.py::test_add" in summary, "the summary", summary)
        # The triage table: one row for the failing test, with its verdict and its top line.
        check("| test | verdict |" in summary and "<code>tests/test&#95;a.py::test&#95;add</code>" in summary
              and "tests/test&#95;a.py:3" in summary, "the summary's triage row", summary)
        check(os.path.exists(os.path.join(repo, "spark.sarif")), "the SARIF file")
        # The verify input reaches spark record --verify (nothing learnt yet: no edit to try).
        check("spark: verify: no suggested edit to verify" in result.stderr, "the verify input", result.stderr)

        # The fix: learnt.
        project(repo, "4")
        git(repo, "commit", "-q", "-am", "fix", date="2026-01-02T00:00:00Z")
        pytest(repo)
        result, outputs, summary = github_step(repo, {"report": "report.xml", "spark": binary}, tmp)
        check(result.returncode == 0, "the step exits 0 after the fix", result.stderr)
        check(outputs.get("failures") == "0" and outputs.get("learnt") == "1", "outputs after the fix", str(outputs))
        check("| 0 | 1 |" in summary and "open failures" not in summary, "the summary after the fix", summary)

        # No report, no spark: said, counted as nothing, the job not failed.
        result, outputs, summary = github_step(repo, {"report": "missing.xml", "spark": binary}, tmp)
        check(result.returncode == 0 and "no JUnit report at 'missing.xml'" in result.stderr, "a missing report",
              result.stderr)
        check(outputs == {"failures": "0", "learnt": "0"} and "No JUnit report" in summary, "outputs without a report",
              str(outputs) + summary)
        result, outputs, summary = github_step(repo, {"report": "report.xml", "spark": "/nonexistent/spark"}, tmp)
        check(result.returncode == 0 and "is not installed" in result.stderr, "spark missing", result.stderr)
        check(outputs == {"failures": "0", "learnt": "0"}, "outputs without spark", str(outputs))

        # A report input that is markup: escaped in the summary as every cell there is, on one line in the log.
        hostile = "r`x<img src=https://example.com/x.png>\n### injected\n::warning::forged [a](b) @team $HOME_"
        result, outputs, summary = github_step(repo, {"report": hostile, "spark": binary}, tmp)
        check(result.returncode == 0 and "no JUnit report at" in result.stderr, "a missing hostile report",
              result.stderr)
        check("<img" not in summary and "`x" not in summary and "\n### injected" not in summary
              and "[a](b)" not in summary and "@team" not in summary, "the report input is escaped in the summary",
              summary)
        check("<code>r&#96;x&lt;img src=https://example.com/x.png&gt; ### injected ::warning::forged &#91;a&#93;(b) "
              "&#64;team &#36;HOME&#95;</code>" in summary, "the report input is shown, escaped, in code", summary)
        check(not any(line.lstrip().startswith("::") for line in result.stderr.splitlines() + result.stdout.splitlines()),
              "the report input starts no line of the log (a workflow command)", result.stderr)

        # Test ids of 300 KB (pytest's ids of long string parameters): the summary stays within GitHub's 1 MiB a
        # step, each failure still in it.
        long_ids(repo, binary, tmp)

        # The GitLab component, with the hooks where the Debian package puts them (here: this checkout's).
        project(repo, "6")
        git(repo, "commit", "-q", "-am", "break again", date="2026-01-03T00:00:00Z")
        pytest(repo)
        os.makedirs(os.path.join(tmp, "bin"))
        os.symlink(binary, os.path.join(tmp, "bin", "spark"))
        os.environ["PATH"] = os.path.join(tmp, "bin") + os.pathsep + os.environ["PATH"]
        results, summary = gitlab_job(repo, {"report": "report.xml", "hooks": os.path.join(SOURCE, "hooks")}, tmp)
        check(all(r.returncode == 0 for r in results), "the GitLab job's script exits 0",
              "\n".join(r.stderr for r in results))
        check("| 1 | 0 |" in summary and "| test | verdict |" in summary, "the GitLab job's summary (spark-summary.md)",
              summary)
        check(os.path.exists(os.path.join(repo, "spark.sarif")), "the GitLab job's SARIF artifact")
        check("tests/test_a.py:3" in "".join(r.stdout for r in results), "the GitLab job's log names the line",
              "".join(r.stdout for r in results))
        # The hooks input is a value, never script text: a path with a space works, `$(…)` runs nothing.
        spaced = os.path.join(tmp, "my hooks")
        os.makedirs(spaced)
        with open(os.path.join(SOURCE, "hooks", "ci-step.sh")) as src, open(os.path.join(spaced, "ci-step.sh"), "w") as dst:
            dst.write(src.read())
        os.remove(os.path.join(repo, "spark-summary.md"))
        results, summary = gitlab_job(repo, {"report": "report.xml", "hooks": spaced}, tmp)
        check(all(r.returncode == 0 for r in results) and "| test | verdict |" in summary,
              "the GitLab job with hooks at a path holding a space", "\n".join(r.stderr for r in results) + summary)
        marker = os.path.join(tmp, "hooks-input-ran")
        results, summary = gitlab_job(repo, {"report": "report.xml", "hooks": "$(touch %s)" % marker}, tmp)
        check(not os.path.exists(marker), "the GitLab job's hooks input is never run as a command",
              "\n".join(r.stderr for r in results))

    for f in failures:
        print("FAILED: " + f)
    print("ci_step_check: %d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
