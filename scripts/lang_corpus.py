#!/usr/bin/env python3
"""Makes an evaluation corpus of Java or JavaScript test failures from a public project's git history: recorded
mutations of the project's real test code, each run for real with the project's test runner, written in the case
interchange format (docs/FORMATS.md). The project's code is never committed: this script regenerates the corpus.

  scripts/lang_corpus.py --language java --git-dir REPO --rev REV --project OWNER/NAME --out cases.jsonl
  scripts/lang_corpus.py --language javascript --git-dir REPO --rev REV --project OWNER/NAME --out cases.jsonl

REPO is a git directory (a clone, or a bare mirror) holding REV. Options: --cases N (stop after N cases, default 120),
--seed S (which files and lines are mutated, default 1), --max-files N (test files tried, default 60), --keep DIR
(keep the work tree there).

How the runs are made, per language (scripts/setup.sh --corpus installs what they need):
  java        javac and JUnit 5's console launcher from Debian (junit5, from --tests), with Debian's assertj,
              mockito, commons-lang3, commons-collections4, hamcrest, JUnit 4, jsr305 and gson on the class path where
              installed (--corpus installs them), and the project's resource folders as Maven has them. Each test
              file is compiled with the project's main and test sources on the source path; a file that does not
              compile with Debian's JDK and jars, or whose tests do not all pass unmutated, is skipped. A mutant
              recompiles only its test file.
  javascript  Jest and jest-junit pinned by tests/js-tools (third_party/js-test-tools, from scripts/setup.sh
              --tests), run on one test file at a time with the settings docs/MINER.md gives. The project must be
              CommonJS or otherwise run under Jest without a transform, and have no runtime dependencies to install.

The temporary folder the runs are made in is written as /build/ in the messages (and Jest's own folder as
/build/work/node_modules/), so a corpus made twice with the same seed is the same; a CI checkout's absolute paths look
alike.

A mutant is kept when its run fails (a failed assertion or an error, not a compile error). Each kept mutant gives one
case: the failing test whose body holds a mutated line (else the first failing test), its real error message as the
runner reported it, the mutated file as the faulty version, and the mutated lines as the faulty lines. Operators (the
same families as the Python development corpus): assert_literal, setup_literal, off_by_one, comparison,
wrong_assertion, swapped_arguments, multi_line, and campaign (one token replaced across the file; up to 4 failing tests
each, each labelled with the mutated lines in its own body and those outside every test). `meta` records the operator
and the mutation; spark's localizer never reads it.
"""
import argparse
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# JUnit 5's console launcher is required; the other libraries go on the class path when Debian's packages are there
# (scripts/setup.sh --corpus installs them), and a test file that needs a missing one does not compile and is skipped.
JAVA_JARS = ["junit-platform-console-standalone.jar", "assertj-core.jar", "commons-lang3.jar",
             "commons-collections4.jar", "mockito-core.jar", "hamcrest.jar", "junit4.jar", "jsr305.jar", "gson.jar"]
CONSOLE = "/usr/share/java/junit-platform-console-standalone.jar"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def die(msg):
    print(f"lang_corpus: {msg}", file=sys.stderr)
    sys.exit(1)


def say(msg):
    print(f"lang_corpus: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------------------
# Reading test code: strings and comments masked, test bodies found by brace matching.

def mask_line_states(lines):
    """Per line, the text with string/char/template contents and comments replaced by spaces (quotes kept), so that
    braces and operators inside them are not read. Block comments span lines; strings do not (template literals may,
    and are masked to their end)."""
    out = []
    in_block = False
    in_template = False
    for line in lines:
        res = []
        i = 0
        n = len(line)
        while i < n:
            c = line[i]
            if in_block:
                if line.startswith("*/", i):
                    in_block = False
                    res.append("  ")
                    i += 2
                else:
                    res.append(" ")
                    i += 1
                continue
            if in_template:
                if c == "\\":
                    res.append("  ")
                    i += 2
                    continue
                if c == "`":
                    in_template = False
                    res.append("`")
                else:
                    res.append(" ")
                i += 1
                continue
            if line.startswith("//", i):
                res.append(" " * (n - i))
                break
            if line.startswith("/*", i):
                in_block = True
                res.append("  ")
                i += 2
                continue
            if c in "\"'":
                j = i + 1
                while j < n and line[j] != c:
                    j += 2 if line[j] == "\\" else 1
                res.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
                i = j + 1
                continue
            if c == "`":
                in_template = True
                res.append("`")
                i += 1
                continue
            res.append(c)
            i += 1
        out.append("".join(res)[:n])
    return out


def block_end(masked, start):
    """The last line (0-based) of the block whose first `{` is on or after line `start`."""
    depth = 0
    opened = False
    for k in range(start, len(masked)):
        for ch in masked[k]:
            if ch == "{":
                depth += 1
                opened = True
            elif ch == "}":
                depth -= 1
                if opened and depth == 0:
                    return k
    return len(masked) - 1


JS_TEST = re.compile(r"^\s*(?:test|it)(?:\.(?:only|concurrent))?\(\s*(['\"`])(.*?)\1")
JAVA_TEST_ANN = re.compile(r"^\s*@(Test|ParameterizedTest|RepeatedTest)\b")
JAVA_ANNOTATIONS = re.compile(r"^\s*(?:@\w+(?:\([^)]*\))?\s*)*")
JAVA_METHOD = re.compile(r"\b(?:void|[A-Za-z_][\w<>\[\], ]*)\s+(\w+)\s*\(")


def test_blocks(language, lines, masked):
    """[(name, first, last)] 0-based inclusive line spans of the file's tests: JS test/it calls (name = title), Java
    methods annotated @Test/@ParameterizedTest/@RepeatedTest (name = method)."""
    blocks = []
    k = 0
    while k < len(lines):
        if language == "javascript":
            m = JS_TEST.match(lines[k])
            if m:
                end = block_end(masked, k)
                blocks.append((m.group(2), k, end))
                k = end + 1
                continue
        else:
            if JAVA_TEST_ANN.match(lines[k]):
                j = k
                while j < len(lines):
                    rest = JAVA_ANNOTATIONS.sub("", masked[j])
                    m = JAVA_METHOD.search(rest) if rest.strip() else None
                    if m:
                        break
                    j += 1
                if j < len(lines):
                    end = block_end(masked, j)
                    blocks.append((m.group(1), k, end))
                    k = end + 1
                    continue
        k += 1
    return blocks


def block_of(blocks, line0):
    for b in blocks:
        if b[1] <= line0 <= b[2]:
            return b
    return None


# ---------------------------------------------------------------------------------------------------------------
# Mutation operators. Each returns a list of (line0, new_text, description) edits, or None.

NUMBER = re.compile(r"(?<![\w.$])(-?\d+)(?![\w.])")
STRING = re.compile(r"(['\"])((?:[^'\"\\]|\\.)*?)\1")
BOOLEAN = re.compile(r"\b(true|false)\b")
COMPARISON = re.compile(r"(===|!==|==|!=|<=|>=|(?<![<>=-])<(?![<=])|(?<![<>=-])>(?![>=]))")
SWAP = re.compile(r"\(\s*([\w.\"']+)\s*,\s*([\w.\"']+)\s*\)")
JS_WRONG = [(".toBeTruthy(", ".toBeFalsy("), (".toBeFalsy(", ".toBeTruthy("), (".toBeDefined(", ".toBeUndefined("),
            (".toBeUndefined(", ".toBeDefined("), (".not.", "."), (").toBe(", ").not.toBe("),
            (").toEqual(", ").not.toEqual("), (").toThrow(", ").not.toThrow(")]
JAVA_WRONG = [("assertTrue(", "assertFalse("), ("assertFalse(", "assertTrue("), ("assertNull(", "assertNotNull("),
              ("assertNotNull(", "assertNull("), ("assertEquals(", "assertNotEquals("), ("isTrue()", "isFalse()"),
              ("isFalse()", "isTrue()"), ("isEmpty()", "isNotEmpty()")]
ASSERTION = re.compile(r"\bexpect\(|\bassert\w*\(|\bassertThat\(|\.toThrow|assertThrows")


def literal_spans(text, masked_text):
    """(kind, start, end, value) of the literals on a line that sit in code (not in comments)."""
    spans = []
    for m in STRING.finditer(text):
        if masked_text[m.start()] == m.group(1):  # an opening quote in code (masked_text is as long as text)
            spans.append(("string", m.start(), m.end(), m.group(0)))
    for m in NUMBER.finditer(masked_text):
        spans.append(("number", m.start(), m.end(), m.group(1)))
    for m in BOOLEAN.finditer(masked_text):
        spans.append(("boolean", m.start(), m.end(), m.group(1)))
    return spans


def change_literal(kind, value, rng, off_by_one=False):
    if kind == "number":
        n = int(value)
        return str(n + (1 if off_by_one or n <= 0 or rng.random() < 0.5 else -1))
    if kind == "boolean":
        return "false" if value == "true" else "true"
    q, body = value[0], value[1:-1]
    if not body:
        return q + "x" + q
    if body[-1].isalpha():
        c = "x" if body[-1] != "x" else "y"
        return q + body[:-1] + c + q
    return q + body + "x" + q


def mutate_line(line0, lines, masked, rng, only_kind=None, off_by_one=False):
    text, mtext = lines[line0], masked[line0]
    spans = [s for s in literal_spans(text, mtext) if only_kind is None or s[0] == only_kind]
    if not spans:
        return None
    kind, a, b, value = rng.choice(spans)
    new = text[:a] + change_literal(kind, value, rng, off_by_one) + text[b:]
    return (line0, new, f"{value} -> {new[a:len(new) - (len(text) - b)]}")


def candidate_lines(blocks, lines, masked, assertion):
    out = []
    for _, first, last in blocks:
        for k in range(first + 1, last):
            if not masked[k].strip() or masked[k].strip().startswith("@"):
                continue
            if bool(ASSERTION.search(masked[k])) == assertion:
                out.append(k)
    return out


def make_mutant(op, language, lines, masked, blocks, rng):
    """One mutant of the file by operator `op`: [(line0, new_text, description)], or None when none applies."""
    asserts = candidate_lines(blocks, lines, masked, True)
    setups = candidate_lines(blocks, lines, masked, False)
    if op == "assert_literal" and asserts:
        for _ in range(6):
            e = mutate_line(rng.choice(asserts), lines, masked, rng)
            if e:
                return [e]
    if op == "setup_literal" and setups:
        for _ in range(6):
            e = mutate_line(rng.choice(setups), lines, masked, rng)
            if e:
                return [e]
    if op == "off_by_one":
        pool = asserts + setups
        for _ in range(6):
            if not pool:
                break
            e = mutate_line(rng.choice(pool), lines, masked, rng, only_kind="number", off_by_one=True)
            if e:
                return [e]
    if op == "comparison":
        pool = [k for k in asserts + setups if COMPARISON.search(masked[k])]
        flips = {"===": "!==", "!==": "===", "==": "!=", "!=": "==", "<=": "<", ">=": ">", "<": "<=", ">": ">="}
        if pool:
            k = rng.choice(pool)
            ms = [m for m in COMPARISON.finditer(masked[k])
                  if not (m.group(1) in "<>" and language == "java" and re.search(r"\w<|>\s*\w|<\w", masked[k]))]
            if ms:
                m = rng.choice(ms)
                new = lines[k][:m.start()] + flips[m.group(1)] + lines[k][m.end():]
                return [(k, new, f"{m.group(1)} -> {flips[m.group(1)]}")]
    if op == "wrong_assertion":
        table = JS_WRONG if language == "javascript" else JAVA_WRONG
        pool = [(k, a, b) for k in asserts for a, b in table if a in masked[k]]
        if pool:
            k, a, b = rng.choice(pool)
            i = masked[k].index(a)
            new = lines[k][:i] + b + lines[k][i + len(a):]
            return [(k, new, f"{a} -> {b}")]
    if op == "swapped_arguments":
        pool = [(k, m) for k in asserts + setups for m in SWAP.finditer(lines[k])
                if m.group(1) != m.group(2) and masked[k][m.start()] == "("]
        if pool:
            k, m = rng.choice(pool)
            new = lines[k][:m.start()] + f"({m.group(2)}, {m.group(1)})" + lines[k][m.end():]
            return [(k, new, f"swapped {m.group(1)}, {m.group(2)}")]
    if op == "multi_line":
        with_literals = [b for b in blocks if sum(1 for k in range(b[1] + 1, b[2])
                                                  if literal_spans(lines[k], masked[k])) >= 2]
        if with_literals:
            _, first, last = rng.choice(with_literals)
            ks = [k for k in range(first + 1, last) if literal_spans(lines[k], masked[k])]
            edits = []
            for k in sorted(rng.sample(ks, 2)):
                e = mutate_line(k, lines, masked, rng)
                if e:
                    edits.append(e)
            if len(edits) == 2:
                return edits
    if op == "campaign":
        counts = {}
        for _, first, last in blocks:
            for k in range(first, last + 1):
                for kind, a, b, value in literal_spans(lines[k], masked[k]):
                    if kind == "string" and len(value) > 3:
                        counts.setdefault(value, set()).add(k)
        tokens = [v for v, ks in counts.items() if len(ks) >= 3]
        if tokens:
            value = rng.choice(sorted(tokens))
            new_value = change_literal("string", value, rng)
            edits = []
            for k, text in enumerate(lines):
                spans = [s for s in literal_spans(text, masked[k]) if s[0] == "string" and s[3] == value]
                if spans:
                    new = text
                    for _, a, b, _ in reversed(spans):
                        new = new[:a] + new_value + new[b:]
                    edits.append((k, new, f"{value} -> {new_value} (campaign)"))
            return edits
    return None


# ---------------------------------------------------------------------------------------------------------------
# Runs.

def run(cmd, cwd, env=None, timeout=300):
    try:
        return subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def junit_failures(report_dir):
    """{(classname, name, file): message} of the failed/errored test cases in the JUnit XML files of report_dir,
    with the message built as spark's reader builds it (src/formats/junit.cpp)."""
    out = {}
    for p in sorted(Path(report_dir).glob("*.xml")):
        try:
            tree = ET.parse(p)
        except ET.ParseError:
            continue
        for tc in tree.iter("testcase"):
            detail = tc.find("failure")
            if detail is None:
                detail = tc.find("error")
            if detail is None:
                continue
            message = detail.get("message", "")
            body = detail.text or ""
            text = body if body else message
            if message and body and message not in body:
                text = message + "\n" + body
            out[(tc.get("classname", ""), tc.get("name", ""), tc.get("file", ""))] = ANSI.sub("", text)
    return out


def junit_passed(report_dir):
    n = 0
    for p in Path(report_dir).glob("*.xml"):
        try:
            for tc in ET.parse(p).iter("testcase"):
                if tc.find("failure") is None and tc.find("error") is None and tc.find("skipped") is None:
                    n += 1
        except ET.ParseError:
            pass
    return n


class JavaProject:
    language = "java"

    def __init__(self, work, tmp):
        self.work, self.tmp = work, tmp
        if not Path(CONSOLE).exists() or not shutil.which("javac"):
            die("javac or JUnit 5's console launcher (" + CONSOLE + ") missing: run scripts/setup.sh --corpus")
        self.jars = ":".join(str(Path("/usr/share/java", j)) for j in JAVA_JARS if Path("/usr/share/java", j).exists())
        mains = [p for p in ["src/main/java"] if (work / p).is_dir()]
        tests = [p for p in ["src/test/java"] if (work / p).is_dir()]
        if not tests:
            die("no src/test/java in the project")
        self.sourcepath = ":".join(str(work / p) for p in mains + tests)
        # Maven's resource folders are on the class path of the tests, as Surefire puts them.
        self.resources = [str(work / p) for p in ["src/test/resources", "src/main/resources"] if (work / p).is_dir()]
        self.base_out = {}

    def test_files(self):
        return sorted(str(p.relative_to(self.work)) for p in (self.work / "src/test/java").rglob("*Test*.java"))

    def class_name(self, rel, content):
        m = re.search(r"^\s*package\s+([\w.]+)\s*;", content, re.M)
        return (m.group(1) + "." if m else "") + Path(rel).stem

    def baseline(self, rel, content):
        out = self.tmp / ("base-" + re.sub(r"\W", "_", rel))
        out.mkdir(exist_ok=True)
        r = run(["javac", "-J-XX:TieredStopAtLevel=1", "-nowarn", "-encoding", "UTF-8", "-d", str(out), "-cp", self.jars, "-sourcepath",
                 self.sourcepath, str(self.work / rel)], self.work)
        if r is None or r.returncode != 0:
            return None
        self.base_out[rel] = out
        return self.run_tests(rel, content, [str(out)])

    def run_tests(self, rel, content, classpath):
        reports = Path(tempfile.mkdtemp(dir=self.tmp))
        r = run(["java", "-XX:TieredStopAtLevel=1", "-jar", CONSOLE, "-cp",
                 ":".join(classpath + self.resources + [self.jars]), "--select-class", self.class_name(rel, content),
                 "--reports-dir", str(reports), "--disable-banner", "--details=none"], self.work)
        if r is None:
            return None
        return reports

    def mutant(self, rel, content):
        src_dir = Path(tempfile.mkdtemp(dir=self.tmp))
        src = src_dir / Path(rel).name
        src.write_text(content)
        out = src_dir / "out"
        out.mkdir()
        r = run(["javac", "-J-XX:TieredStopAtLevel=1", "-nowarn", "-encoding", "UTF-8", "-implicit:none", "-d", str(out), "-cp",
                 str(self.base_out[rel]) + ":" + self.jars, str(src)], self.work)
        if r is None or r.returncode != 0:
            return None  # a compile error is not a test failure here
        return self.run_tests(rel, content, [str(out), str(self.base_out[rel])])

    def stable_paths(self, message):
        return message.replace(str(self.tmp) + "/", "/build/")

    def test_id(self, rel, content, key):
        classname, name, _ = key
        return classname + "#" + name.split("(")[0], name.split("(")[0]


class JsProject:
    language = "javascript"

    def __init__(self, work, tmp):
        self.work, self.tmp = work, tmp
        tools = ROOT / "third_party/js-test-tools/node_modules"
        if not (tools / ".bin/jest").exists():
            die("no Jest in third_party/js-test-tools: run scripts/setup.sh --tests")
        self.jest, self.reporter = str(tools / ".bin/jest"), str(tools / "jest-junit")
        self.cache = self.tmp / "jest-cache"

    def test_files(self):
        out = []
        for p in self.work.rglob("*.js"):
            rel = str(p.relative_to(self.work))
            if "node_modules" in rel.split("/"):
                continue
            if re.search(r"\.(test|spec)\.js$", rel) or "/__tests__/" in "/" + rel:
                out.append(rel)
        return sorted(out)

    def baseline(self, rel, content):
        return self.run_tests(rel)

    def run_tests(self, rel):
        reports = Path(tempfile.mkdtemp(dir=self.tmp))
        env = dict(os.environ, JEST_JUNIT_OUTPUT_FILE=str(reports / "report.xml"), JEST_JUNIT_ADD_FILE_ATTRIBUTE="true",
                   JEST_JUNIT_ANCESTOR_SEPARATOR=" > ", JEST_JUNIT_CLASSNAME="{classname}",
                   JEST_JUNIT_TITLE="{title}", FORCE_COLOR="0", CI="true")
        config = json.dumps({"testEnvironment": "node", "rootDir": str(self.work), "cacheDirectory": str(self.cache)})
        r = run([self.jest, "--ci", "--config", config, "--reporters=default", "--reporters=" + self.reporter,
                 "--runTestsByPath", rel], self.work, env=env)
        if r is None or not (reports / "report.xml").exists():
            return None
        return reports

    def mutant(self, rel, content):
        path = self.work / rel
        original = path.read_text()
        path.write_text(content)
        try:
            return self.run_tests(rel)
        finally:
            path.write_text(original)

    def stable_paths(self, message):
        tools = str(ROOT / "third_party/js-test-tools/node_modules")
        return message.replace(str(self.work), "/build/work").replace(tools, "/build/work/node_modules")

    def test_id(self, rel, content, key):
        # The id spark's JUnit reader gives a jest-junit test case (src/formats/junit.cpp); tests/lang_corpus_check.py
        # checks it against the id `spark localize` reads from the case's own stack trace.
        classname, name, file_attr = key
        path = file_attr or rel
        while path.startswith("./"):
            path = path[2:]
        tid = path
        if classname and classname != name:
            tid += " > " + classname
        return tid + " > " + name, name


# ---------------------------------------------------------------------------------------------------------------

OPERATORS = ["assert_literal", "setup_literal", "off_by_one", "comparison", "wrong_assertion", "swapped_arguments",
             "multi_line", "campaign"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--language", required=True, choices=["java", "javascript"])
    ap.add_argument("--git-dir", required=True)
    ap.add_argument("--rev", required=True)
    ap.add_argument("--project", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", type=int, default=120)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-files", type=int, default=60)
    ap.add_argument("--keep")
    args = ap.parse_args()

    rev = run(["git", "--git-dir", args.git_dir, "rev-parse", "--verify", args.rev + "^{commit}"], ".")
    if rev is None or rev.returncode != 0:
        die(f"{args.git_dir}: no commit {args.rev}")
    sha = rev.stdout.strip()
    when = run(["git", "--git-dir", args.git_dir, "show", "-s", "--format=%ct", sha], ".").stdout.strip()
    t0 = datetime.utcfromtimestamp(int(when))

    tmp = Path(tempfile.mkdtemp(prefix="spark-lang-corpus."))
    work = Path(args.keep) if args.keep else tmp / "work"
    work.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "--git-dir", args.git_dir, "archive", "--format=tar", sha],
                             stdout=subprocess.PIPE, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(work)
    project = JavaProject(work, tmp) if args.language == "java" else JsProject(work, tmp)

    rng = random.Random(args.seed)
    files = project.test_files()
    rng.shuffle(files)
    files = files[:args.max_files]
    say(f"{args.project} at {sha[:12]}: {len(files)} test files to try")

    cases = []
    stats = {"files_ok": 0, "files_skipped": 0, "runs": 0, "killed": 0, "survived": 0, "no_result": 0}
    per_file = max(2, args.cases // max(1, len(files) // 2))
    for rel in files:
        if len(cases) >= args.cases:
            break
        content = (work / rel).read_text(errors="replace")
        base = project.baseline(rel, content)
        if base is None or junit_failures(base) or junit_passed(base) == 0:
            stats["files_skipped"] += 1
            continue
        stats["files_ok"] += 1
        lines = content.split("\n")
        masked = mask_line_states(lines)
        blocks = test_blocks(args.language, lines, masked)
        if not blocks:
            continue
        made = 0
        ops = OPERATORS[:]
        rng.shuffle(ops)
        for op in ops * 2:
            if made >= per_file or len(cases) >= args.cases:
                break
            edits = make_mutant(op, args.language, lines, masked, blocks, rng)
            if not edits:
                continue
            new_lines = lines[:]
            for k, text, _ in edits:
                new_lines[k] = text
            mutated = "\n".join(new_lines)
            stats["runs"] += 1
            reports = project.mutant(rel, mutated)
            if reports is None:
                stats["no_result"] += 1  # did not compile (Java), or the runner wrote no report
                continue
            failures = {k: project.stable_paths(m) for k, m in junit_failures(reports).items()}
            if not failures:
                stats["survived"] += 1
                continue
            stats["killed"] += 1
            mutated_lines = sorted(k for k, _, _ in edits)
            chosen = []
            for key, message in failures.items():
                tid, name = project.test_id(rel, mutated, key)
                block = next((b for b in blocks if b[0] == name), None)
                if op == "campaign":
                    if block is None:
                        continue
                    outside = [k for k in mutated_lines if block_of(blocks, k) is None]
                    inside = [k for k in mutated_lines if block[1] <= k <= block[2]]
                    labels = sorted(set(inside + outside))
                    if labels:
                        chosen.append((tid, message, labels))
                    if len(chosen) >= 4:
                        break
                else:
                    holds = block is not None and any(block[1] <= k <= block[2] for k in mutated_lines)
                    chosen.insert(0 if holds else len(chosen), (tid, message, mutated_lines))
            if op != "campaign":
                chosen = chosen[:1]
            for tid, message, labels in chosen:
                n = len(cases)
                short = args.project.split("/")[-1].lower()
                cases.append({
                    "id": f"{short}-seeded-{n:04d}",
                    "project": args.project,
                    "test_id": tid,
                    "language": args.language,
                    "failure_time": (t0 + timedelta(minutes=n)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "error_message": message,
                    "files": [{"path": rel, "content": mutated}],
                    "faulty_lines": [{"path": rel, "line": k + 1} for k in labels],
                    "faulty_commit": None,
                    "fixed_commit": None,
                    "source": "seeded",
                    "meta": {"operator": op, "mutation": [d for _, _, d in edits], "head_commit": sha,
                             "runner": "junit5-console" if args.language == "java" else "jest+jest-junit"},
                })
            made += 1
            say(f"{rel}: {op} killed ({len(cases)} cases)")

    tmp_out = Path(args.out + ".tmp")
    with open(tmp_out, "w") as f:
        for c in cases:
            f.write(json.dumps(c) + "\n")
    os.replace(tmp_out, args.out)
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    say(f"wrote {len(cases)} cases to {args.out}; " + ", ".join(f"{k} {v}" for k, v in stats.items()))
    return 0 if cases else 1


if __name__ == "__main__":
    sys.exit(main())
