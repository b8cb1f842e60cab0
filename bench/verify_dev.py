#!/usr/bin/env python3
"""How often spark's suggested edits work on real projects: `spark localize --verify` on every case of a corpus, in
a checkout of the case's project at the case's commit, with the case's (faulty) test files written over it.

    bench/corpus_fixes.py --out /tmp/fixcorpus --repo OWNER/NAME=GIT_DIR ... ../shared/data/dev ../shared/data/dev-tblong
    bench/verify_dev.py SPARK /tmp/fixcorpus/dev OUT.json --repo OWNER/NAME=GIT_DIR ... [--only TEXT] [--limit N]

CORPUS_DIR holds PROJECT/cases.jsonl with each faulty line's `fix` (bench/corpus_fixes.py adds them to the dev
corpora, as `spark mine` stores them: suggestions repeat the fixes a knowledge base holds); each --repo names a
fetched repository of a project the cases name (`project` field). The protocol is `spark eval`'s (docs/EVAL.md): the query's knowledge base
is every other case of the corpus but its exact duplicates; the ranker is learnt without the query's fold (5 folds by
a hash of the id). For each case: the suggestions, and for each, verified / not verified / not run; an edit is
*exact* when it edits a faulty line into that line's true fix (the case's own `fix` of the line: its counterpart in
the fixed test file) — the test-repair papers' plausible (verified) and exact measures.

The test command is Debian's pytest at the corpus's settings, the project's own configuration's addopts off:
  PYTHONPATH=src:. /usr/bin/python3 -B -m pytest -p no:cacheprovider -q -o addopts= {test_id}
Writes OUT.json (per case and the totals) and prints the totals' table.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

COMMAND = ("PYTHONPATH=src:. /usr/bin/python3 -B -m pytest -p no:cacheprovider -q -o addopts= "
           "-W ignore::pytest.PytestUnknownMarkWarning {test_id}")
FOLDS = 5


def run(args, cwd=None, check=True, env=None):
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True, errors="replace", env=env)
    if check and r.returncode != 0:
        sys.exit("%s: exit %d\n%s%s" % (" ".join(args), r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    return r


def fold_of(case_id):
    return int(hashlib.sha1(case_id.encode()).hexdigest(), 16) % FOLDS


def duplicate(a, b):
    return a["error_message"] == b["error_message"] and \
        sorted((f["path"], f["content"]) for f in a["files"]) == sorted((f["path"], f["content"]) for f in b["files"])


def write_jsonl(path, cases):
    with open(path, "w") as f:
        for c in cases:
            f.write(json.dumps(c) + "\n")


def tested_commit(case):
    if case.get("source") == "history":
        return case.get("faulty_commit")
    return (case.get("meta") or {}).get("head_commit")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spark")
    ap.add_argument("corpus")
    ap.add_argument("out")
    ap.add_argument("--repo", action="append", default=[])
    ap.add_argument("--limit", type=int, default=0, help="at most N cases (a quick look)")
    ap.add_argument("--only", default="", help="only the cases whose id holds this text")
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args()
    spark = os.path.abspath(args.spark)
    repos = dict(r.split("=", 1) for r in args.repo)
    cases = []
    for project in sorted(os.listdir(args.corpus)):
        path = os.path.join(args.corpus, project, "cases.jsonl")
        if os.path.isfile(path):
            with open(path) as f:
                cases.extend(json.loads(line) for line in f if line.strip())
    missing = sorted({c["project"] for c in cases} - set(repos))
    if missing:
        sys.exit("no --repo for " + ", ".join(missing))
    with_fix = sum(all("fix" in fl for fl in c["faulty_lines"]) for c in cases)
    if with_fix == 0:
        sys.exit("no case holds a faulty line's fix: make the corpus with bench/corpus_fixes.py")
    print("%d of %d cases with a fix for every faulty line" % (with_fix, len(cases)), file=sys.stderr)
    queries = [c for c in cases if args.only in c["id"]]
    queries = queries[:args.limit] if args.limit else queries
    work = tempfile.mkdtemp(prefix="spark-verify-dev-")
    results = []
    started = time.time()
    try:
        # One checkout per project, moved from commit to commit.
        trees = {}
        for project, git_dir in repos.items():
            tree = os.path.join(work, "tree-" + project.replace("/", "+"))
            run(["git", "clone", "-q", "--shared", "--no-checkout", git_dir, tree])
            trees[project] = tree
        # The ranker of fold f: learnt from the cases of the other folds.
        fold_kbs = {}
        for f in sorted({fold_of(q["id"]) for q in queries}):
            kb = os.path.join(work, "fold%d" % f)
            others = os.path.join(work, "fold%d.jsonl" % f)
            write_jsonl(others, [c for c in cases if fold_of(c["id"]) != f])
            run([spark, "--kb", kb, "import", others])
            run([spark, "--kb", kb, "index"])
            fold_kbs[f] = kb
        for n, q in enumerate(queries, 1):
            f = fold_of(q["id"])
            kb = os.path.join(work, "kb")
            shutil.rmtree(kb, ignore_errors=True)
            # The exact duplicates of q leave too, as spark eval leaves them out: with one in another fold, the
            # knowledge base is made without it (its ranker learnt without q, as every other).
            twins = [c for c in cases if c["id"] != q["id"] and fold_of(c["id"]) != f and duplicate(c, q)]
            if twins:
                write_jsonl(os.path.join(work, "rest.jsonl"),
                            [c for c in cases if c["id"] != q["id"] and not duplicate(c, q)])
                run([spark, "--kb", kb, "import", os.path.join(work, "rest.jsonl")])
                run([spark, "--kb", kb, "index"])
            else:
                shutil.copytree(fold_kbs[f], kb)
                rest = [c for c in cases if fold_of(c["id"]) == f and c["id"] != q["id"] and not duplicate(c, q)]
                if rest:
                    write_jsonl(os.path.join(work, "rest.jsonl"), rest)
                    run([spark, "--kb", kb, "import", os.path.join(work, "rest.jsonl")])
            tree = trees[q["project"]]
            run(["git", "checkout", "-q", "-f", tested_commit(q)], cwd=tree)
            run(["git", "clean", "-q", "-f", "-d", "-x"], cwd=tree)
            for file in q["files"]:
                target = os.path.join(tree, file["path"])
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "w") as out:
                    out.write(file["content"])
            write_jsonl(os.path.join(work, "query.jsonl"), [q])
            r = run([spark, "--kb", kb, "localize", "--case", os.path.join(work, "query.jsonl"), "--format", "json",
                     "--verify", COMMAND, "--verify-timeout", str(args.timeout)], cwd=tree, check=False)
            record = {"id": q["id"], "project": q["project"], "source": q.get("source"),
                      "operator": (q.get("meta") or {}).get("operator"), "suggestions": []}
            if r.returncode != 0:
                record["error"] = r.stderr.strip().splitlines()[-1:] or ["exit %d" % r.returncode]
            else:
                loc = json.loads(r.stdout)
                loc = loc[0] if isinstance(loc, list) else loc
                true_fix = {(fl["path"], fl["line"]): fl.get("fix") for fl in q["faulty_lines"]}
                for s in loc.get("suggestions", []):
                    v = s.get("verification") or {}
                    record["suggestions"].append({
                        "line": s["line"], "new": s["new"], "status": v.get("status"), "message": v.get("message"),
                        "exact": true_fix.get((s["path"], s["line"])) == [s["new"]]})
            results.append(record)
            verified = sum(s["status"] == "verified" for s in record["suggestions"])
            print("[%d/%d] %s: %d suggestion(s), %d verified%s" % (
                n, len(queries), q["id"], len(record["suggestions"]), verified,
                " (error: %s)" % record["error"] if "error" in record else ""), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    totals = summarize(results)
    totals["seconds"] = round(time.time() - started, 1)
    with open(args.out, "w") as f:
        json.dump({"corpus": os.path.abspath(args.corpus), "command": COMMAND, "totals": totals, "cases": results}, f,
                  indent=1)
    print(table(totals))


def summarize(results):
    def block(rs):
        with_s = [r for r in rs if r["suggestions"]]
        edits = [s for r in rs for s in r["suggestions"]]
        return {
            "failures": len(rs),
            "with_suggestion": len(with_s),
            "with_verified": sum(any(s["status"] == "verified" for s in r["suggestions"]) for r in rs),
            "first_verified": sum(bool(r["suggestions"]) and r["suggestions"][0]["status"] == "verified" for r in rs),
            "with_exact_verified": sum(any(s["status"] == "verified" and s["exact"] for s in r["suggestions"])
                                       for r in rs),
            "edits": len(edits),
            "verified": sum(s["status"] == "verified" for s in edits),
            "not_verified": sum(s["status"] == "not verified" for s in edits),
            "not_run": sum(s["status"] == "not run" for s in edits),
            "verified_exact": sum(s["status"] == "verified" and s["exact"] for s in edits),
            "exact": sum(s["exact"] for s in edits),
            "errors": sum("error" in r for r in rs),
        }
    out = {"all": block(results)}
    for key in ("source", "project"):
        for value in sorted({r[key] or "?" for r in results}):
            out["%s=%s" % (key, value)] = block([r for r in results if (r[key] or "?") == value])
    return out


def table(totals):
    rows = ["| subset | failures | with a suggestion | with a verified one | first verified | with an exact verified "
            "one | edits | verified | not verified | not run | verified and exact |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, b in totals.items():
        if not isinstance(b, dict):
            continue
        rows.append("| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d |" % (
            name, b["failures"], b["with_suggestion"], b["with_verified"], b["first_verified"],
            b["with_exact_verified"], b["edits"], b["verified"], b["not_verified"], b["not_run"],
            b["verified_exact"]))
    return "\n".join(rows)


if __name__ == "__main__":
    main()
