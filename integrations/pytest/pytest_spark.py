"""pytest-spark: after a pytest session, spark records its outcomes and ranks the faulty lines of its failing tests.

`pytest --spark` hands the session's JUnit XML report to `spark record` (or, with `--spark-no-record`, to
`spark localize --junit`): one spark process per session, after the tests ran. The terminal summary then gets a
"spark" section: per failing test, its verdict (whose fault it likely is), its recorded history, the edits a similar
case's fix suggests, and its ranked lines as `path:line  code  (reason)`. The plugin never changes the
session's exit status and never fails it: spark missing, failing or slow is one warning line.

The spark binary is $SPARK, else `spark` on PATH. The knowledge base is the one `spark record` uses when run from
the directory pytest was started in ($SPARK_KB, else .spark at the repository's top). No third-party dependency.
"""

import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

import pytest

# How many failures the section shows, and how long spark may take by default, before the rest is cut.
MAX_SHOWN = 20
DEFAULT_TIMEOUT_SECONDS = 600.0
# The longest test id, path or reason the section prints (spark caps what it stores; this caps what is shown).
MAX_TEXT = 300
MAX_WARNING = 2000
# The suggested edits shown per failure (spark's preferred edit of each line; the JSON has them all).
MAX_SUGGESTIONS = 3
# What spark's JSON says of a retrieved case before it said whether it is shown: the floor its text report used.
OLD_SHOW_SIMILAR_FLOOR = 0.5


def pytest_addoption(parser):
    group = parser.getgroup("spark", "spark: faulty lines of failing tests")
    group.addoption("--spark", action="store_true", default=False,
                    help="record the outcomes with spark and rank the faulty lines of the failures")
    group.addoption("--spark-k", type=int, default=5, metavar="N",
                    help="ranked lines per failure (default 5)")
    group.addoption("--spark-no-record", action="store_true", default=False,
                    help="rank the failures' lines without recording the outcomes in the knowledge base")
    group.addoption("--spark-verify", action="store_true", default=False,
                    help="try each suggested edit in a scratch work tree, running the failing test with this "
                         "Python's pytest (spark --verify), and mark it verified, not verified or not run")


def _active(config):
    # Under pytest-xdist the controller writes the report and sums up; its workers do nothing.
    return config.getoption("spark", False) and not hasattr(config, "workerinput")


def _timeout():
    """The seconds spark may take ($SPARK_PYTEST_TIMEOUT, else the default), and a warning when the value is bad."""
    text = os.environ.get("SPARK_PYTEST_TIMEOUT", "").strip()
    if not text:
        return DEFAULT_TIMEOUT_SECONDS, None
    try:
        seconds = float(text)
    except ValueError:
        seconds = None
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        return DEFAULT_TIMEOUT_SECONDS, ("spark: SPARK_PYTEST_TIMEOUT=%r is not a positive number of seconds: %g used"
                                         % (_clipped(text), DEFAULT_TIMEOUT_SECONDS))
    return seconds, None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # Before pytest's junitxml plugin reads --junitxml: without one, it writes a report for spark in a folder of ours.
    config._spark_own_report = None
    config._spark_warnings = []
    if not _active(config) or getattr(config.option, "xmlpath", None):
        return
    try:
        folder = tempfile.mkdtemp(prefix="pytest-spark-")
    except OSError as e:  # no temporary folder: said at the end, the session runs as without --spark
        config._spark_warnings.append("spark: no temporary folder for the report (%s): not recorded" % e)
        return
    config.option.xmlpath = os.path.join(folder, "report.xml")
    config._spark_own_report = folder


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    # The report of ours is written by now; pytest need not announce it ("generated xml file: /tmp/...").
    config = session.config
    if not _active(config) or not getattr(config, "_spark_own_report", None):
        return
    try:
        from _pytest import junitxml
        xml = config.stash.get(junitxml.xml_key, None)
        if xml is not None:
            config.pluginmanager.unregister(xml)
    except Exception:  # an internal of pytest's that moved: the line is printed, nothing else changes
        pass


def pytest_unconfigure(config):
    folder = getattr(config, "_spark_own_report", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


def _binary():
    named = os.environ.get("SPARK")
    if named:
        return named if os.path.isfile(named) and os.access(named, os.X_OK) else None
    return shutil.which("spark")


def _run_spark(config, report):
    """(spark's JSON output of the report's failures, parsed; its notes), or (None, a one-line warning)."""
    binary = _binary()
    if binary is None:
        return None, "spark not found ($SPARK or PATH): not recorded"
    k = max(1, config.getoption("spark_k"))
    if config.getoption("spark_no_record"):
        command = [binary, "localize", "--junit", report, "--format", "json", "-k", str(k)]
    else:
        command = [binary, "record", "--junit", report, "--format", "json", "-k", str(k)]
    timeout, _ = _timeout()
    if config.getoption("spark_verify"):
        # The same Python's pytest, on the one test, in spark's scratch work tree; spark's verification ends well
        # before the plugin stops waiting for it.
        command.extend(["--verify", shlex.quote(sys.executable) + " -m pytest -p no:cacheprovider -q {test_id}",
                        "--verify-budget", "%g" % max(1.0, min(600.0, timeout * 0.75))])
    try:
        done = subprocess.run(command, cwd=str(config.invocation_params.dir), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "spark took over %g s: stopped" % timeout
    except OSError as e:
        return None, "spark could not run: %s" % e
    errors = [line for line in done.stderr.splitlines() if line.startswith("spark: error:")]
    if done.returncode != 0 and not done.stdout.strip():
        why = errors[0] if errors else (done.stderr.strip().splitlines() or ["exit %d" % done.returncode])[-1]
        return None, why if why.startswith("spark") else "spark: " + why
    try:
        parsed = json.loads(done.stdout) if done.stdout.strip() else []
    except ValueError:
        return None, "spark: its output is not JSON: not shown"
    notes = [line for line in done.stderr.splitlines()
             if line.startswith("spark: recorded") or line.startswith("spark: settled")]
    return ([] if parsed is None else parsed), "\n".join(notes)


def _clipped(text, limit=MAX_TEXT):
    text = str(text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _id_printable(test_id):
    # A long id keeps its end too: spark ends an id it cut with its hash, which tells two such ids apart.
    test_id = str(test_id)
    if len(test_id) > MAX_TEXT:
        test_id = test_id[:MAX_TEXT // 2] + "..." + test_id[-(MAX_TEXT // 2 - 3):]
    return _printable(test_id)


def _printable(text, limit=MAX_TEXT):
    # Test code and messages are untrusted: control characters (C0, DEL, C1) are shown escaped, never sent to the
    # terminal; a very long text is cut.
    return "".join("\\x%02x" % ord(c) if c != "\t" and (c < " " or "\x7f" <= c <= "\x9f") else c
                   for c in _clipped(text, limit))


def _text(value, default="?"):
    return value if isinstance(value, str) else default


def _number(value, default="?"):
    # bool is an int in Python; a rank or line is neither.
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _shown_similar(retrieved):
    """How many retrieved cases spark itself shows as similar: those its JSON marks "shown" (an older spark that
    does not mark them: those at its text report's floor and above)."""
    count = 0
    for case in retrieved if isinstance(retrieved, list) else []:
        if not isinstance(case, dict):
            continue
        shown = case.get("shown")
        if shown is None:
            similarity = case.get("similarity")
            shown = (isinstance(similarity, (int, float)) and not isinstance(similarity, bool)
                     and similarity >= OLD_SHOW_SIMILAR_FLOOR)
        count += 1 if shown is True else 0
    return count


def _failures(parsed):
    """The localizations in spark's JSON (an array of them, or one), each checked for the fields the section
    prints, and how many entries were not localizations."""
    items = parsed if isinstance(parsed, list) else [parsed] if isinstance(parsed, dict) else None
    if items is None:
        return [], 1
    out, bad = [], 0
    for one in items:
        if one is None:  # a failure spark could not localize: its error is in spark's messages
            continue
        if not isinstance(one, dict) or not isinstance(one.get("test_id"), str):
            bad += 1
            continue
        ranked = []
        for entry in one.get("ranked") if isinstance(one.get("ranked"), list) else []:
            if not isinstance(entry, dict):
                continue
            reasons = [r for r in entry.get("reasons", []) if isinstance(r, str)] \
                if isinstance(entry.get("reasons"), list) else []
            # The first reason past the line's scope ("in the failing test's own body") says most.
            if len(reasons) > 1 and reasons[0].startswith("in "):
                reasons = reasons[1:]
            ranked.append((_number(entry.get("rank"), len(ranked) + 1), _text(entry.get("path")),
                           _number(entry.get("line")), " ".join(_text(entry.get("code"), "").split()),
                           reasons[0] if reasons else "ranked"))
        out.append((one["test_id"], _shown_similar(one.get("retrieved")), _triage(one), ranked))
    return out, bad


def _real(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _short(commit):
    return commit[:10] if isinstance(commit, str) else "?"


def _history_line(h):
    """spark's history line (its text report's `history:`), from the JSON's history object."""
    runs = _number(h.get("failing_runs"), 0)
    last = h.get("last_passed_commit")
    if isinstance(h.get("first_failing_commit"), str):
        out = "failing since %s, %s failing run%s" % (_short(h["first_failing_commit"]), runs, "" if runs == 1 else "s")
        age = h.get("age_days")
        if _real(age):
            out += ", %.*f days" % (1 if age < 10 else 0, age)
        out += ("; last passed at " + _short(last)) if isinstance(last, str) else "; never passed in the recorded runs"
    else:
        out = "no failing run recorded before this one"
        if isinstance(last, str):
            out += "; last passed at " + _short(last)
    if h.get("flaky") is True:
        times = _number(h.get("flaky_runs"), 0)
        out += "; failed and passed at the same commit %s time%s: flaky (never learnt as a case)" % (
            times, "" if times == 1 else "s")
    return out


def _verification(v):
    """What spark's --verify said of an edit, in its own words: " — verified: the test passes with this edit",
    " — not verified: MESSAGE", " — not run: WHY"; "" when it was not verified."""
    if not isinstance(v, dict) or not isinstance(v.get("status"), str):
        return ""
    if v["status"] == "verified":
        return " \u2014 verified: the test passes with this edit"
    message = v.get("message") if isinstance(v.get("message"), str) else ""
    return " \u2014 %s%s" % (v["status"], ": " + message if message else "")


def _triage(one):
    """What triage asks before "which line": the verdict, the history and the suggested edits spark's JSON gives,
    as lines of the section (none for what it does not give)."""
    lines = []
    verdict = one.get("verdict")
    if isinstance(verdict, dict) and isinstance(verdict.get("class"), str):
        line = "verdict: %s" % verdict["class"]
        if _real(verdict.get("probability")):
            line += " (%.2f)" % verdict["probability"]
        reasons = [r for r in verdict.get("reasons", []) if isinstance(r, str)] \
            if isinstance(verdict.get("reasons"), list) else []
        if reasons:
            line += ": " + "; ".join(reasons)
        lines.append(line)
    history = one.get("history")
    if isinstance(history, dict):
        lines.append("history: " + _history_line(history))
    suggestions = [s for s in one.get("suggestions", []) if isinstance(s, dict) and s.get("preferred") is True] \
        if isinstance(one.get("suggestions"), list) else []
    for s in suggestions[:MAX_SUGGESTIONS]:
        change = s.get("change") if isinstance(s.get("change"), dict) else {}
        line = "suggested edit: %s:%s  %s -> %s  (as case %s's fix did" % (
            _text(s.get("path")), _number(s.get("line")), _text(change.get("old")), _text(change.get("new")),
            _text(s.get("from_case")))
        if _real(s.get("confidence")):
            line += "; confidence %.2f" % s["confidence"]
        lines.append(line + "; not applied)" + _verification(s.get("verification")))
    if len(suggestions) > MAX_SUGGESTIONS:
        lines.append("... and %d more suggested edits" % (len(suggestions) - MAX_SUGGESTIONS))
    return lines


def _summary(write, section, config):
    """The section's lines (through `write`), or a warning; raises nothing pytest would see."""
    timeout, bad_timeout = _timeout()
    for warning in getattr(config, "_spark_warnings", []) + ([bad_timeout] if bad_timeout else []):
        write(_printable(warning, MAX_WARNING), yellow=True)
    report = config.option.xmlpath
    if not report or not os.path.isfile(report):
        if not getattr(config, "_spark_warnings", []):
            write("spark: no JUnit report was written (is pytest's junitxml plugin disabled?): not recorded")
        return
    parsed, said = _run_spark(config, report)
    if parsed is None:
        write(_printable(said if said.startswith("spark") else "spark: " + said, MAX_WARNING), yellow=True)
        return
    localized, bad = _failures(parsed)
    if not localized and not said and not bad:
        return
    section("spark", sep="=", bold=True)
    for test_id, similar, triage, ranked in localized[:MAX_SHOWN]:
        seen = ("%d similar case(s) learnt before" % similar) if similar else "no similar case learnt yet"
        write("%s  (%s)" % (_id_printable(test_id), seen), bold=True)
        for line in triage:
            write("  " + _printable(line))
        for rank, path, line, code, reason in ranked:
            write("  %s. %s:%s  %s  (%s)" % (rank, _printable(path), line, _printable(_clipped(code, 60)),
                                            _printable(reason)))
    if len(localized) > MAX_SHOWN:
        write("... and %d more failures: `spark failures list` lists them" % (len(localized) - MAX_SHOWN))
    if bad:
        write("spark: %d entr%s of its JSON output %s not a localization: not shown"
              % (bad, "y" if bad == 1 else "ies", "is" if bad == 1 else "are"), yellow=True)
    for line in said.splitlines():
        write(_printable(line, MAX_WARNING))


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    # After pytest_sessionfinish, where the junitxml plugin wrote the report.
    if not _active(config):
        return
    write = terminalreporter.write_line
    if exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
        write("spark: the session did not finish (%s): not recorded" % pytest.ExitCode(exitstatus).name.lower())
        return
    try:
        _summary(write, terminalreporter.section, config)
    except Exception as e:  # whatever spark printed or the environment holds, the session's status stays pytest's
        write(_printable("spark: not shown (%s: %s)" % (type(e).__name__, e), MAX_WARNING), yellow=True)
