#!/usr/bin/env python3
"""Does `spark mine` rebuild a corpus's history cases from its recorded outcomes?

    scripts/check_history.py SPARK REPO CORPUS_DIR [--project NAME]

REPO is a clone of the project (any clone with the history, e.g. fetched for this check; never commit it);
CORPUS_DIR holds cases.jsonl and outcomes.jsonl (the development corpus's layout). The miner runs twice into
temporary knowledge bases: with its default rule (any test-code change between failure and fix labels) and with
--test-only-fixes (only fixes that changed nothing but test code, the rule the corpus was built with). For every
`source: history` case of the corpus it reports whether a mined case has the same failing commit and test, the same
fix, the same faulty lines, the same files and the same error message; then the mined cases the corpus does not
have, with why.
"""
import json
import os
import subprocess
import sys
import tempfile


def load(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def mine(spark, repo, corpus_dir, project, extra):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "mined.jsonl")
        quarantine = os.path.join(tmp, "q.jsonl")
        cmd = [spark, "--kb", os.path.join(tmp, "kb"), "mine", "--repo", repo, "--outcomes",
               os.path.join(corpus_dir, "outcomes.jsonl"), "--project", project, "-o", out,
               "--quarantine", quarantine] + extra
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"spark mine failed ({run.returncode}):\n{run.stderr}")
        return load(out), load(quarantine), run.stderr


def lines(c):
    return sorted((x["path"], x["line"]) for x in c["faulty_lines"])


def compare(corpus, mined, quarantined, label):
    history = [c for c in corpus if c.get("source") == "history"]
    everything = {(c["faulty_commit"], c["test_id"]): (c, "corpus") for c in mined}
    everything.update({(c["faulty_commit"], c["test_id"]): (c, "quarantine") for c in quarantined})
    print(f"## {label}: {len(mined)} labelled + {len(quarantined)} quarantined mined; "
          f"{len(history)} history cases in the corpus")
    matched = 0
    for c in history:
        found = everything.get((c["faulty_commit"], c["test_id"]))
        if not found:
            print(f"  MISSING  {c['id']}  {c['test_id']}  {c['faulty_commit'][:10]}")
            continue
        m, where = found
        checks = {
            "fix": m["fixed_commit"] == c["fixed_commit"],
            "lines": lines(m) == lines(c),
            "files": [f["path"] for f in m["files"]] == [f["path"] for f in c["files"]],
            "code": [f["content"] for f in m["files"]] == [f["content"] for f in c["files"]],
            "message": m["error_message"] == c["error_message"],
        }
        ok = all(checks.values())
        matched += ok
        bad = ", ".join(k for k, v in checks.items() if not v)
        print(f"  {'SAME' if ok else 'DIFFERENT'}  {c['id']}  ({where}; {len(lines(c))} faulty lines)"
              + (f"  differs in: {bad}" if bad else ""))
    known = {(c["faulty_commit"], c["test_id"]) for c in history}
    extra = [(m, w) for k, (m, w) in everything.items() if k not in known]
    print(f"  {matched} of {len(history)} history cases rebuilt exactly; {len(extra)} mined cases not in the corpus")
    return extra


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    spark, repo, corpus_dir = sys.argv[1:4]
    project = sys.argv[sys.argv.index("--project") + 1] if "--project" in sys.argv else os.path.basename(
        os.path.normpath(corpus_dir))
    corpus = load(os.path.join(corpus_dir, "cases.jsonl"))
    mined, quarantined, log = mine(spark, repo, corpus_dir, project, [])
    print(log.strip())
    extra = compare(corpus, mined, quarantined, "default rule")
    for m, where in extra:
        changed = subprocess.run(["git", "-C", repo, "diff", "--name-only", m["faulty_commit"], m["fixed_commit"]],
                                 capture_output=True, text=True).stdout.split()
        span = subprocess.run(["git", "-C", repo, "rev-list", "--count", "--first-parent",
                               m["faulty_commit"] + ".." + m["fixed_commit"]], capture_output=True, text=True)
        other = [p for p in changed if not (p.startswith("tests/") or p.startswith("test/"))]
        print(f"  extra  {m['id']}  {m['test_id']}  ({where}; fix {span.stdout.strip()} commits later; "
              f"{len(other)} non-test files changed in between, e.g. {', '.join(other[:2]) or '-'})")
    mined2, quarantined2, log2 = mine(spark, repo, corpus_dir, project, ["--test-only-fixes"])
    print(log2.strip())
    extra2 = compare(corpus, mined2, quarantined2, "--test-only-fixes")
    for m, where in extra2:
        print(f"  extra  {m['id']}  {m['test_id']}  ({where})")


if __name__ == "__main__":
    main()
