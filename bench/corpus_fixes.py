#!/usr/bin/env python3
"""Add each faulty line's `fix` (docs/FORMATS.md) to a corpus of cases, reading the fixed files from git.

    bench/corpus_fixes.py --out /tmp/fixcorpus \
        --repo pallets/click=/path/to/click.git --repo mahmoud/boltons=... \
        /work/shared/data/dev /work/shared/data/dev-tblong

Each CORPUS/<project>/cases.jsonl is written to OUT/<basename of CORPUS>/<project>/cases.jsonl (its
outcomes.jsonl copied beside it). The faulty side is a case's file content; the fixed side is the file at
`fixed_commit` (source history) or at `meta.head_commit` (source seeded: the unmutated file), read with
`git --git-dir=DIR show COMMIT:PATH` from the repository of the case's `project`. Nothing is downloaded.
The diff is difflib's (autojunk off) on lines; each non-equal opcode is a hunk (git's hunks with no context).
Within a hunk that added as many lines as it removed a faulty line's fix is its counterpart, else the hunk's
whole new side ([] when the fix deleted it). A faulty line in no hunk gets no `fix`. Every other byte of a
line is kept: the `fix` keys are the only change (each line keeps its own \\u-escaping style).
"""
import argparse, collections, difflib, json, os, re, shutil, subprocess, sys

def split_lines(text):
    """Lines as spark counts them: \\n, \\r\\n and a lone \\r end a line; no line break in a line."""
    lines = re.split(r"\r\n|\r|\n", text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines

def tokens(s):
    return re.findall(r"\w+|[^\w\s]", s)

def token_distance(a, b):
    ops = difflib.SequenceMatcher(None, tokens(a), tokens(b), autojunk=False).get_opcodes()
    return sum(max(i2 - i1, j2 - j1) for op, i1, i2, j1, j2 in ops if op != "equal")

def line_fixes(old, new):
    """{1-based old line: replacement lines} for every old line in a changed hunk."""
    out = {}
    sm = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op in ("replace", "delete"):
            for k in range(i1, i2):
                out[k + 1] = [new[j1 + k - i1]] if i2 - i1 == j2 - j1 else list(new[j1:j2])
    return out

class Repos:
    def __init__(self, specs):
        self.dirs, self.cache = {}, {}
        for spec in specs:
            name, _, d = spec.partition("=")
            if not d or not os.path.isdir(d):
                sys.exit(f"--repo {spec}: expected OWNER/NAME=GIT_DIR")
            self.dirs[name] = d

    def show(self, project, commit, path):
        """The file's text at commit, or (None, reason)."""
        if project not in self.dirs:
            return None, f"no --repo for {project}"
        key = (project, commit, path)
        if key not in self.cache:
            r = subprocess.run(["git", f"--git-dir={self.dirs[project]}", "show", f"{commit}:{path}"],
                               capture_output=True)
            if r.returncode != 0:
                self.cache[key] = (None, r.stderr.decode(errors="replace").strip().splitlines()[-1])
            else:
                try:
                    self.cache[key] = (r.stdout.decode("utf-8"), None)
                except UnicodeDecodeError as e:
                    self.cache[key] = (None, f"not UTF-8: {e}")
        return self.cache[key]

def dump_like(obj, original):
    """obj as JSON in the escaping style of the original line (both styles occur in the corpora)."""
    ascii_ = json.dumps(json.loads(original))
    return json.dumps(obj) if ascii_ == original else json.dumps(obj, ensure_ascii=False)

def augment(case, repos, stats, problems, sanity):
    src = case.get("source")
    meta = case.get("meta") or {}
    commit = case.get("fixed_commit") if src == "history" else meta.get("head_commit")
    op = meta.get("operator") or src or "?"
    files = {f["path"]: f["content"] for f in case["files"]}
    fixes_by_path = {}
    for path in {fl["path"] for fl in case.get("faulty_lines") or []}:
        if not commit:
            problems.append(f"{case['id']}: no {'fixed_commit' if src == 'history' else 'meta.head_commit'}")
            continue
        new, why = repos.show(case["project"], commit, path)
        if new is None:
            problems.append(f"{case['id']}: {path} at {commit[:10]}: {why}")
            continue
        old_lines = split_lines(files[path])
        fixes_by_path[path] = line_fixes(old_lines, split_lines(new))
        if src == "seeded":  # the recorded mutation should be exactly the faulty lines
            extra = set(fixes_by_path[path]) - {fl["line"] for fl in case["faulty_lines"] if fl["path"] == path}
            span = meta.get("test_function_span")
            if op == "campaign" and span:  # a campaign mutates the whole file; a case labels its test's lines
                stats[op]["outside"] += bool(extra)
                extra = {n for n in extra if span[0] <= n <= span[1]}
            if extra:
                problems.append(f"{case['id']}: {path}: changed lines not labelled faulty: {sorted(extra)[:8]}")
    s = stats[op]
    s["cases"] += 1
    for fl in case.get("faulty_lines") or []:
        s["lines"] += 1
        fix = fixes_by_path.get(fl["path"], {}).get(fl["line"])
        if fix is None:
            s["no fix"] += 1
            continue
        fl["fix"] = fix
        s["fixed"] += 1
        s["[]"] += fix == []
        if src == "seeded" and len(case["faulty_lines"]) == 1:
            text = split_lines(files[fl["path"]])[fl["line"] - 1]
            d = token_distance(text, fix[0]) if len(fix) == 1 else None
            sanity[case["id"]] = (op, text, fix, d)

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpora", nargs="+", help="folders holding <project>/cases.jsonl")
    ap.add_argument("--repo", action="append", default=[], metavar="OWNER/NAME=GIT_DIR")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    out_root = os.path.realpath(a.out)
    if out_root == here or out_root.startswith(here + os.sep):
        sys.exit(f"--out {a.out}: corpora are not written inside the project ({here})")
    repos = Repos(a.repo)
    all_problems, sanity = [], {}  # sanity: case id -> (operator, faulty text, fix, token distance)
    for corpus in a.corpora:
        corpus = corpus.rstrip("/")
        for project in sorted(os.listdir(corpus)):
            src = os.path.join(corpus, project, "cases.jsonl")
            if not os.path.isfile(src):
                continue
            dst_dir = os.path.join(out_root, os.path.basename(corpus), project)
            os.makedirs(dst_dir, exist_ok=True)
            stats = collections.defaultdict(collections.Counter)
            problems, out_lines = [], []
            with open(src, encoding="utf-8", newline="") as f:
                for raw in f:
                    original = raw.rstrip("\n")
                    case = json.loads(original)
                    augment(case, repos, stats, problems, sanity)
                    out_lines.append(dump_like(case, original) + "\n")
            with open(os.path.join(dst_dir, "cases.jsonl"), "w", encoding="utf-8", newline="") as f:
                f.writelines(out_lines)
            outcomes = os.path.join(corpus, project, "outcomes.jsonl")
            if os.path.isfile(outcomes):
                shutil.copyfile(outcomes, os.path.join(dst_dir, "outcomes.jsonl"))
            total = sum(stats.values(), collections.Counter())
            print(f"{os.path.basename(corpus)}/{project}: {total['cases']} cases, {total['lines']} faulty lines, "
                  f"{total['fixed']} with a fix ({total['[]']} of them []), {total['no fix']} without")
            for op in sorted(stats):
                s = stats[op]
                print(f"    {op:18} cases {s['cases']:4}  lines {s['lines']:5}  fix {s['fixed']:5}  "
                      f"[] {s['[]']:4}  none {s['no fix']:4}" +
                      (f"  (file also mutated outside the test: {s['outside']})" if op == "campaign" else ""))
            for p in problems:
                print(f"    ! {p}")
            all_problems += [f"{os.path.basename(corpus)}/{project}: {p}" for p in problems]
    print(f"\nseeded single-line mutations (distinct case ids): {len(sanity)}")
    dist = collections.Counter("n/a" if d is None else min(d, 6) for _, _, _, d in sanity.values())
    print("  token distance (6 = 6 or more):", dict(sorted(dist.items(), key=str)))
    print(f"  fix equal to the faulty line: {sum(f == [t] for _, t, f, _ in sanity.values())}")
    for cid, (op, text, fix, d) in sorted(sanity.items()):
        if d is None or d == 0 or d > 5:
            print(f"  ? {cid} ({op}, distance {d}): {text.strip()!r} -> {[x.strip() for x in fix]!r}")
    print(f"problems: {len(all_problems)}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
