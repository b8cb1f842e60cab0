#!/usr/bin/env python3
"""Apply `spark localize --format json`'s suggested edits and run the real failing test: do they make it pass?

    python3 bench/suggest_eval.py --spark build/spark --work /tmp/suggest_eval --jobs 2 --timeout 60 \
        --repo mahmoud/boltons=/work/.mirror/mahmoud+boltons/repo \
        --repo pallets/click=/work/.mirror/pallets+click/repo \
        --repo more-itertools/more-itertools=/work/.mirror/more-itertools+more-itertools/repo \
        --repo pytoolz/toolz=/work/.mirror/pytoolz+toolz/repo \
        --details /tmp/suggest_eval/details.jsonl /tmp/fixcorpus/dev /tmp/fixcorpus/dev-tblong

For each CORPUS/<project>/cases.jsonl: a knowledge base in WORK/kb/<corpus>/<project>/.spark gets the file's cases
(`spark import`), and `spark localize --case FILE --format json` localizes every case as a query (it never retrieves
itself; labels are not read; default settings). Each query's test file, as the case holds it, is written over a
checkout of its project at `meta.head_commit` (`git --git-dir=GITDIR archive | tar -x`, one checkout per worker) and
its test is run (`/usr/bin/python3 -m pytest -p no:cacheprovider -q -o addopts= TEST_ID`, PYTHONPATH=src when the
checkout has a src/ folder, PYTHONDONTWRITEBYTECODE=1 so that no stale assertion-rewrite cache is read): a query
whose unmodified file passes, or whose test cannot be run (not found, timeout), is excluded and counted. For a
failing query with `preferred` suggestions, the most confident one ("top") is applied alone (its line must read
`old`; it becomes `new`) and the test run again; when the query has several preferred suggestions (one per line),
all of them applied together ("all") are run too. When an edit renames a parametrized test's id (a literal in
its parameters), the test id is not found: the ids of that test function collected after the edit and not before
are run instead. The checkout's files are restored after every run. Nothing is downloaded.
"""
import argparse, collections, json, os, queue, re, shutil, subprocess, sys, threading, time
from concurrent.futures import ThreadPoolExecutor

PYTHON = "/usr/bin/python3"
CATEGORIES = ("campaign", "seeded-other", "history")


def category(case):
    if case.get("source") == "history":
        return "history"
    return "campaign" if (case.get("meta") or {}).get("operator") == "campaign" else "seeded-other"


def apply_edits(content, edits):
    """content with each (line, old, new) made (lines end as spark counts them); None when a line does not read old."""
    parts = re.split(r"(\r\n|\r|\n)", content)  # lines at even indexes
    for line, old, new in edits:
        i = 2 * (line - 1)
        if line < 1 or i >= len(parts) or parts[i] != old:
            return None
        parts[i] = new
    return "".join(parts)


def localize(args, corpus, project, cases_path):
    scratch = os.path.join(args.work, "kb", os.path.basename(corpus.rstrip("/")), project)
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    kb = os.path.join(scratch, ".spark")
    subprocess.run([args.spark, "--kb", kb, "import", cases_path], cwd=scratch, check=True, capture_output=True)
    out = subprocess.run([args.spark, "--kb", kb, "localize", "--case", cases_path, "--format", "json"],
                         cwd=scratch, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


class Checkouts:
    """One extracted tree per (repository, commit, worker slot), and the commit's own version of each file."""

    def __init__(self, work, repos):
        self.work, self.repos, self.lock, self.dirs, self.originals = work, repos, threading.Lock(), {}, {}

    def get(self, repo, commit, slot):
        key = (repo, commit, slot)
        with self.lock:
            if key not in self.dirs:
                dest = os.path.join(self.work, "checkouts", f"{repo.replace('/', '+')}-{commit[:12]}-w{slot}")
                shutil.rmtree(dest, ignore_errors=True)
                os.makedirs(dest)
                archive = subprocess.Popen(["git", "--git-dir", self.repos[repo], "archive", commit], stdout=subprocess.PIPE)
                subprocess.run(["tar", "-x", "-C", dest], stdin=archive.stdout, check=True)
                if archive.wait() != 0:
                    raise RuntimeError(f"git archive {repo} {commit} failed")
                self.dirs[key] = dest
            return self.dirs[key]

    def original(self, repo, commit, path):
        key = (repo, commit, path)
        with self.lock:
            if key not in self.originals:
                p = subprocess.run(["git", "--git-dir", self.repos[repo], "show", f"{commit}:{path}"], capture_output=True)
                self.originals[key] = p.stdout if p.returncode == 0 else None
            return self.originals[key]


def pytest(root, ids, timeout, collect=False):
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    if os.path.isdir(os.path.join(root, "src")):
        env["PYTHONPATH"] = "src"
    cmd = [PYTHON, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-o", "addopts="] + (["--collect-only"] if collect else []) + ids
    try:
        p = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return "timeout", ""


def collected(root, test_id, timeout):
    _, out = pytest(root, [test_id.split("[")[0]], timeout, collect=True)
    return {l.strip() for l in out.splitlines() if "::" in l and not l.startswith(("ERROR", "FAILED"))}


def evaluate(job, args, checkouts, slots):
    case, loc = job["case"], job["loc"]
    repo, commit, tid = case["project"], case["meta"]["head_commit"], case["test_id"]
    files = {f["path"]: f["content"] for f in case["files"]}
    pref = [s for s in loc.get("suggestions") or [] if s.get("preferred")]
    rec = dict(corpus=job["corpus"], project=job["project"], category=job["category"], id=case["id"], test_id=tid,
               operator=case["meta"].get("operator"), suggestions=len(loc.get("suggestions") or []), preferred=len(pref))
    slot = slots.get()
    try:
        root = checkouts.get(repo, commit, slot)

        def put(contents):
            for path, text in contents.items():
                with open(os.path.join(root, path), "w", encoding="utf-8", newline="") as f:
                    f.write(text)

        def restore():
            for path in files:
                orig, dest = checkouts.original(repo, commit, path), os.path.join(root, path)
                if orig is None:
                    os.path.exists(dest) and os.remove(dest)
                else:
                    with open(dest, "wb") as f:
                        f.write(orig)

        put(files)
        rc, out = pytest(root, [tid], args.timeout)
        restore()
        rec["base"] = "pass" if rc == 0 else "fail" if rc in (1, 2) else f"unrunnable({rc})"
        if rec["base"] != "fail" or not pref:
            return rec
        top = max(pref, key=lambda s: s["confidence"])  # the first of the most confident
        labels = {(f["path"], f["line"]): f.get("fix") for f in case.get("faulty_lines") or []}
        rec["top"] = {k: top[k] for k in ("path", "line", "old", "new", "change", "from_case", "confidence")}
        rec["top"].update(labelled=(top["path"], top["line"]) in labels, is_fix=labels.get((top["path"], top["line"])) == [top["new"]])
        variants = [("top", [top])] + ([("all", pref)] if len(pref) > 1 else [])
        for name, edits in variants:
            by_path = collections.defaultdict(list)
            for s in edits:
                by_path[s["path"]].append((s["line"], s["old"], s["new"]))
            changed = {p: apply_edits(files.get(p, ""), e) for p, e in by_path.items()}
            result = {}
            if any(v is None for v in changed.values()):
                result["result"] = "old-mismatch"
            else:
                put(files), put(changed)
                rc, out = pytest(root, [tid], args.timeout)
                if rc == 4 and "[" in tid:  # the edit renamed the parametrized id
                    after = collected(root, tid, args.timeout)
                    put(files)
                    new_ids = sorted(after - collected(root, tid, args.timeout))
                    put(changed)
                    result["renamed_to"] = new_ids
                    if new_ids:
                        rc, out = pytest(root, new_ids, args.timeout)
                restore()
                result["result"] = "pass" if rc == 0 else "fail" if rc in (1, 2) else f"unrunnable({rc})"
                if rc != 0:
                    result["output_tail"] = "\n".join(l for l in out.splitlines() if l.startswith("E "))[-600:]
            rec.setdefault(name, {}).update(result)
        rec["all"] = rec.get("all", {"result": rec["top"]["result"]})
        return rec
    finally:
        slots.put(slot)


def pct(a, b):
    return f"{a} ({100.0 * a / b:.0f}%)" if b else f"{a} (-)"


def report(recs, corpora):
    print("failures: cases whose unmodified file fails; coverage: of those, with a preferred suggestion; "
          "precision: of those, the top suggestion applied alone makes the test pass; labelled/= fix: the top "
          "suggestion's line is a labelled faulty line / its new text is that line's fix; all: every preferred "
          "suggestion applied together passes.\n")
    for corpus in corpora:
        rows = [r for r in recs if r["corpus"] == corpus]
        print(f"## {corpus}\n")
        print("| project | kind | cases | excluded: base passes | excluded: unrunnable | failures | coverage | "
              "top passes (precision) | top on labelled line | top = the fix | all preferred pass |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for project in sorted({r["project"] for r in rows}) + ["overall"]:
            for kind in CATEGORIES + ("all",):
                sel = [r for r in rows if project in ("overall", r["project"]) and kind in ("all", r["category"])]
                if not sel:
                    continue
                fail = [r for r in sel if r["base"] == "fail"]
                sug = [r for r in fail if "top" in r]
                passed = sum(r["top"]["result"] == "pass" for r in sug)
                print(f"| {project} | {kind} | {len(sel)} | {sum(r['base'] == 'pass' for r in sel)} | "
                      f"{sum(r['base'].startswith('unrunnable') for r in sel)} | {len(fail)} | {pct(len(sug), len(fail))} | "
                      f"{pct(passed, len(sug))} | {pct(sum(r['top']['labelled'] for r in sug), len(sug))} | "
                      f"{pct(sum(r['top']['is_fix'] for r in sug), len(sug))} | "
                      f"{pct(sum(r['all']['result'] == 'pass' for r in sug), len(sug))} |")
        print("\nPrecision of the top suggestion by its confidence:\n")
        print("| confidence | kind | top suggestions | pass | on labelled line |\n|---|---|---:|---:|---:|")
        for lo, hi, name in ((0, 0.3, "< 0.3"), (0.3, 0.6, "0.3-0.6"), (0.6, 9, ">= 0.6")):
            for kind in CATEGORIES + ("all",):
                sel = [r for r in rows if "top" in r and lo <= r["top"]["confidence"] < hi and kind in ("all", r["category"])]
                if sel:
                    print(f"| {name} | {kind} | {len(sel)} | {pct(sum(r['top']['result'] == 'pass' for r in sel), len(sel))} | "
                          f"{pct(sum(r['top']['labelled'] for r in sel), len(sel))} |")
        print()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpora", nargs="+", help="folders holding <project>/cases.jsonl")
    ap.add_argument("--spark", default="build/spark")
    ap.add_argument("--repo", action="append", default=[], help="owner/name=GITDIR (a bare git dir)")
    ap.add_argument("--work", default="/tmp/suggest_eval")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per pytest run")
    ap.add_argument("--details", help="write one JSON record per query here")
    args = ap.parse_args()
    args.spark = os.path.abspath(args.spark)  # spark runs in the knowledge base's scratch folder
    repos = dict(r.split("=", 1) for r in args.repo)
    start, jobs = time.time(), []
    for corpus in args.corpora:
        for project in sorted(os.listdir(corpus)):
            path = os.path.join(corpus, project, "cases.jsonl")
            if not os.path.isfile(path):
                continue
            with open(path, encoding="utf-8") as f:
                cases = [json.loads(l) for l in f if l.strip()]
            locs = localize(args, corpus, project, path)
            assert len(locs) == len(cases) and all(a["test_id"] == b["test_id"] for a, b in zip(locs, cases)), path
            for case, loc in zip(cases, locs):
                if case["project"] not in repos:
                    sys.exit(f"no --repo for {case['project']}")
                jobs.append(dict(corpus=corpus, project=project, category=category(case), case=case, loc=loc))
    print(f"localized {len(jobs)} queries in {time.time() - start:.0f} s; running tests", file=sys.stderr)
    slots = queue.Queue()
    [slots.put(i) for i in range(args.jobs)]
    checkouts = Checkouts(args.work, repos)
    with ThreadPoolExecutor(args.jobs) as pool:
        recs = list(pool.map(lambda j: evaluate(j, args, checkouts, slots), jobs))
    if args.details:
        with open(args.details, "w", encoding="utf-8") as f:
            for r in recs:
                f.write(json.dumps(r) + "\n")
    report(recs, args.corpora)
    print(f"run time: {time.time() - start:.0f} s ({args.jobs} workers)")


if __name__ == "__main__":
    main()
