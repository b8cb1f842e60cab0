#!/usr/bin/python3
"""A mined corpus in the two forms the development corpora have: each case's test re-run at its faulty commit.

    bench/corpus_forms.py --repo DIR --out OUT [--project OWNER/NAME] [--env PYTHONPATH=src] [--timeout 120] CASES.jsonl...

For each case of CASES (the output of `spark mine --discover -o`, or of `spark mine --outcomes -o`), the tree of its
`faulty_commit` is written to a scratch folder (`git archive`; the repository's own work tree is never touched), the
case's files over it, and its test runs twice with Debian's pytest:
  * `short`: `--tb=short`, the error message the FAILURES section's body (as ../shared/data/dev);
  * `junit`: pytest's default traceback style with `--junitxml`, the error message the text of the test's <failure>
    or <error> element, which a CI step reads (as ../shared/data/dev-tblong).
Both runs: `-p no:cacheprovider --color=no -o addopts= -o console_output_style=classic`. Every other field of the case
is kept but `project` (--project, for a clone whose remote is a local folder); `meta.tb` says the form. A case whose test passes (or is not found) in a form is left out of it, and named on
stderr. Writes OUT/short/<slug>/cases.jsonl and OUT/junit/<slug>/cases.jsonl, <slug> the project's last path part.
Nothing is downloaded.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

COMMON = ["-p", "no:cacheprovider", "--color=no", "-o", "addopts=", "-o", "console_output_style=classic"]


def tree_at(repo, commit, files, into):
    archive = subprocess.run(["git", "-C", repo, "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    for f in files:
        path = os.path.join(into, f["path"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="") as out:
            out.write(f["content"])


def short_section(output):
    """The body of the first section of pytest's FAILURES (or ERRORS) part: without its `____ name ____` header."""
    lines = output.splitlines()
    start = None
    for i, line in enumerate(lines):
        if re.match(r"^=+ (FAILURES|ERRORS) =+$", line):
            start = i + 1
            break
    if start is None:
        return None
    body = []
    for line in lines[start:]:
        if re.match(r"^_{3,} .* _{3,}$", line):
            if body:
                break
            continue
        if re.match(r"^=+ .* =+$", line) or re.match(r"^-+ Captured ", line):
            break
        body.append(line)
    text = "\n".join(body).strip("\n")
    return text or None


def junit_message(report):
    try:
        root = ET.parse(report).getroot()
    except (ET.ParseError, OSError):
        return None
    for case in root.iter("testcase"):
        for tag in ("failure", "error"):
            el = case.find(tag)
            if el is not None and (el.text or "").strip():
                return el.text
    return None


def run(cmd, cwd, env, timeout):
    try:
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, errors="replace",
                              timeout=timeout).stdout
    except subprocess.TimeoutExpired:
        return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--project", help="the cases' project (default: as mined)")
    ap.add_argument("--env", action="append", default=[], help="K=V for the test runs (PYTHONPATH=src)")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("cases", nargs="+")
    args = ap.parse_args()
    env = dict(os.environ)
    for kv in args.env:
        k, _, v = kv.partition("=")
        env[k] = v
    written = {"short": {}, "junit": {}}
    for path in args.cases:
        for line in open(path, encoding="utf-8"):
            if not line.strip():
                continue
            case = json.loads(line)
            if args.project:
                case["project"] = args.project
            test_id = case["test_id"]
            slug = case["project"].rstrip("/").split("/")[-1]
            with tempfile.TemporaryDirectory(prefix="spark-forms-") as tmp:
                tree_at(args.repo, case["faulty_commit"], case["files"], tmp)
                py = ["/usr/bin/python3", "-B", "-m", "pytest"] + COMMON
                short = short_section(run(py + ["--tb=short", test_id], tmp, env, args.timeout))
                report = os.path.join(tmp, ".spark-report.xml")
                run(py + ["-q", "--junitxml=" + report, test_id], tmp, env, args.timeout)
                junit = junit_message(report)
            for form, message in (("short", short), ("junit", junit)):
                if message is None:
                    print(f"corpus_forms: {case['id']}: {test_id} did not fail at {case['faulty_commit'][:10]} "
                          f"({form}): left out", file=sys.stderr)
                    continue
                c = dict(case)
                c["error_message"] = message
                meta = dict(c.get("meta") or {})
                meta["tb"] = "short" if form == "short" else "long-junit"
                c["meta"] = meta
                written[form].setdefault(slug, []).append(c)
    for form, projects in written.items():
        for slug, cases in projects.items():
            folder = os.path.join(args.out, form, slug)
            os.makedirs(folder, exist_ok=True)
            target = os.path.join(folder, "cases.jsonl")
            with open(target + ".tmp", "w", encoding="utf-8") as out:
                for c in cases:
                    out.write(json.dumps(c, ensure_ascii=False) + "\n")
            os.replace(target + ".tmp", target)
            print(f"corpus_forms: {target}: {len(cases)} cases", file=sys.stderr)


if __name__ == "__main__":
    main()
