"""pytest-spark: after a pytest session, spark records its outcomes and ranks the faulty lines of its failing tests.

`pytest --spark` hands the session's JUnit XML report to `spark record` (or, with `--spark-no-record`, to
`spark localize --junit`): one spark process per session, after the tests ran. The terminal summary then gets a
"spark" section: per failing test, its ranked lines as `path:line  code  (reason)`. The plugin never changes the
session's exit status and never fails it: spark missing, failing or slow is one warning line.

The spark binary is $SPARK, else `spark` on PATH. The knowledge base is the one `spark record` uses when run from
the directory pytest was started in ($SPARK_KB, else .spark at the repository's top). No third-party dependency.
"""

import json
import os
import shutil
import subprocess
import tempfile

import pytest

# How many failures the section shows, and how long spark may take, before the rest is cut.
MAX_SHOWN = 20
TIMEOUT_SECONDS = float(os.environ.get("SPARK_PYTEST_TIMEOUT", "600"))


def pytest_addoption(parser):
    group = parser.getgroup("spark", "spark: faulty lines of failing tests")
    group.addoption("--spark", action="store_true", default=False,
                    help="record the outcomes with spark and rank the faulty lines of the failures")
    group.addoption("--spark-k", type=int, default=5, metavar="N",
                    help="ranked lines per failure (default 5)")
    group.addoption("--spark-no-record", action="store_true", default=False,
                    help="rank the failures' lines without recording the outcomes in the knowledge base")


def _active(config):
    # Under pytest-xdist the controller writes the report and sums up; its workers do nothing.
    return config.getoption("spark", False) and not hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # Before pytest's junitxml plugin reads --junitxml: without one, it writes a report for spark in a folder of ours.
    config._spark_own_report = None
    if not _active(config) or getattr(config.option, "xmlpath", None):
        return
    folder = tempfile.mkdtemp(prefix="pytest-spark-")
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
    """spark's JSON localizations of the report's failures, or (None, a one-line warning)."""
    binary = _binary()
    if binary is None:
        return None, "spark not found ($SPARK or PATH): not recorded"
    k = max(1, config.getoption("spark_k"))
    if config.getoption("spark_no_record"):
        command = [binary, "localize", "--junit", report, "--format", "json", "-k", str(k)]
    else:
        command = [binary, "record", "--junit", report, "--format", "json", "-k", str(k)]
    try:
        done = subprocess.run(command, cwd=str(config.invocation_params.dir), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, errors="replace", timeout=TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        return None, "spark took over %g s: stopped" % TIMEOUT_SECONDS
    except OSError as e:
        return None, "spark could not run: %s" % e
    errors = [line for line in done.stderr.splitlines() if line.startswith("spark: error:")]
    if done.returncode != 0 and not done.stdout.strip():
        why = errors[0] if errors else (done.stderr.strip().splitlines() or ["exit %d" % done.returncode])[-1]
        return None, why if why.startswith("spark") else "spark: " + why
    try:
        localized = json.loads(done.stdout) if done.stdout.strip() else []
    except ValueError:
        return None, "spark: its output is not JSON: not shown"
    notes = [line for line in done.stderr.splitlines()
             if line.startswith("spark: recorded") or line.startswith("spark: settled")]
    return (localized if isinstance(localized, list) else []), "\n".join(notes)


def _printable(text):
    # Test code and messages are untrusted: control characters (C0, DEL, C1) are shown escaped, never sent to the
    # terminal.
    return "".join("\\x%02x" % ord(c) if c != "\t" and (c < " " or "\x7f" <= c <= "\x9f") else c for c in str(text))


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    # After pytest_sessionfinish, where the junitxml plugin wrote the report.
    if not _active(config):
        return
    write = terminalreporter.write_line
    if exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
        write("spark: the session did not finish (%s): not recorded" % pytest.ExitCode(exitstatus).name.lower())
        return
    report = config.option.xmlpath
    if not report or not os.path.isfile(report):
        write("spark: no JUnit report was written (is pytest's junitxml plugin disabled?): not recorded")
        return
    try:
        localized, said = _run_spark(config, report)
    except Exception as e:  # never fail the session
        localized, said = None, "spark: %s: %s" % (type(e).__name__, e)
    if localized is None:
        write(_printable(said if said.startswith("spark") else "spark: " + said), yellow=True)
        return
    if not localized and not said:
        return
    terminalreporter.section("spark", sep="=", bold=True)
    for one in localized[:MAX_SHOWN]:
        test_id = _printable(one.get("test_id", "?"))
        ranked = one.get("ranked") or []
        retrieved = one.get("retrieved") or []
        verdict = ("%d similar case(s) learnt before" % len(retrieved)) if retrieved else "no similar case learnt yet"
        write("%s  (%s)" % (test_id, verdict), bold=True)
        for entry in ranked:
            # The first reason past the line's scope ("in the failing test's own body") says most.
            reasons = entry.get("reasons") or []
            if len(reasons) > 1 and reasons[0].startswith("in "):
                reasons = reasons[1:]
            code = " ".join(str(entry.get("code", "")).split())
            if len(code) > 60:
                code = code[:57] + "..."
            write("  %d. %s:%s  %s  (%s)" % (entry.get("rank", 0), _printable(entry.get("path", "?")),
                                            entry.get("line", "?"), _printable(code),
                                            _printable(reasons[0]) if reasons else "ranked"))
    if len(localized) > MAX_SHOWN:
        write("... and %d more failures: `spark failures list` lists them" % (len(localized) - MAX_SHOWN))
    for line in said.splitlines():
        write(_printable(line))
