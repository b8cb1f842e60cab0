#!/usr/bin/python3
r"""Failures of known class for the verdict's evaluation: `product` (a seeded mutation of the code under test, the
tests untouched) and `environment` (the untouched code run on a perturbed machine), made as the dev corpus was
(../shared/data/dev/MANIFEST.md), in the corpus format (docs/FORMATS.md) as queries: no faulty_lines.

Usage: bench/product_faults.py --out DIR [--seed N] [--target N] [--cap N] [--env-cap N] [--jobs N] PROJ=CHECKOUT...
  e.g. bench/product_faults.py --out /tmp/verdict-corpus click=/tmp/vc-work/click boltons=/tmp/vc-work/boltons \
         more-itertools=/tmp/vc-work/more-itertools toolz=/tmp/vc-work/toolz
PROJ is click, boltons, more-itertools or toolz; CHECKOUT its tree at the HEAD the dev corpus used (a `git archive`
of it). The checkouts are copied (one copy a worker) and never changed. Writes DIR/<proj>/product.jsonl,
DIR/<proj>/environment.jsonl and DIR/SUMMARY.md. Each run is Debian's pytest at its default traceback style:
  /usr/bin/python3 -m pytest -p no:cacheprovider -q --color=no -o addopts= --continue-on-collection-errors \
    -W ignore::pytest.PytestUnknownMarkWarning [-m 'not stress'] --junitxml=report.xml TEST_FILES...
with PYTHONPATH=<src root> and PYTHONDONTWRITEBYTECODE=1 (a mutation may keep a file's size and mtime second).
A mutation's run takes the test files that import the mutated module (directly or through the package); only the
product lines the unmutated run executes are mutated; a test failing before any mutation is never kept.
"""
import argparse, ast, builtins, collections, concurrent.futures as cf, contextlib, datetime, io, json, os, queue
import random, re, shutil, subprocess, sys, tempfile, time, tokenize
import xml.etree.ElementTree as ET
from itertools import zip_longest

PROJECTS = {  # name: (repository, HEAD of the dev corpus, source root, package, extra pytest arguments)
    "click": ("pallets/click", "2c8cd3ac958a7eb316d67f2d316c27086c4c0369", "src", "click", ["-m", "not stress"]),
    "boltons": ("mahmoud/boltons", "967864f89791509f9eb36b22b4579d36b72a6df2", ".", "boltons", []),
    "more-itertools": ("more-itertools/more-itertools", "2fe1b2eeb9d75f994113fe3ac76d14b6bcd6fb10", ".",
                       "more_itertools", []),
    "toolz": ("pytoolz/toolz", "568c2b8393973cd172a466546c9d95779c452438", ".", "toolz", []),
}
PYTEST = ["/usr/bin/python3", "-m", "pytest", "-p", "no:cacheprovider", "-q", "--color=no", "-o", "addopts=",
          "--continue-on-collection-errors", "-W", "ignore::pytest.PytestUnknownMarkWarning"]
COVERAGE_PLUGIN = '''import json, os, sys, threading
ROOT, OUT, SEEN = os.environ["VC_COV_ROOT"], os.environ["VC_COV_OUT"], set()
def _line(frame, event, arg):
    if event == "line": SEEN.add((frame.f_code.co_filename, frame.f_lineno))
    return _line
def _call(frame, event, arg):
    return _line if frame.f_code.co_filename.startswith(ROOT) else None
sys.settrace(_call); threading.settrace(_call)
def pytest_unconfigure(config):
    sys.settrace(None)
    with open(OUT, "w") as f: json.dump(sorted(SEEN), f)
'''
# How the machine is perturbed: (environment variables, command prefix, extra pytest arguments, module made missing).
ENVIRONMENTS = {
    "missing-module:termios": ({}, [], [], "termios"), "missing-module:pickle": ({}, [], [], "pickle"),
    "missing-module:doctest": ({}, [], [], "doctest"),
    "temp-root-not-a-directory": ({"PYTEST_DEBUG_TEMPROOT": "{tmp}/a-file/tmp"}, [], [], None),
    "python-optimize-2": ({"PYTHONOPTIMIZE": "2"}, [], ["-W", "ignore::pytest.PytestConfigWarning"], None),
    "narrow-terminal-COLUMNS=20": ({"COLUMNS": "20"}, [], [], None),
    "empty-PATH": ({"PATH": "/nonexistent"}, [], [], None),
    "no-network-namespace": ({}, ["/usr/bin/unshare", "-n"], [], None),
    "open-files-limit-18": ({}, ["/usr/bin/prlimit", "--nofile=18"], [], None),
    "address-space-limit-150MB": ({}, ["/usr/bin/prlimit", f"--as={150 << 20}"], [], None),
    "ascii-locale": ({"LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0",
                      "PYTHONIOENCODING": "ascii"}, [], [], None),
    "timezone-UTC+14": ({"TZ": "Pacific/Kiritimati"}, [], [], None),
    "missing-HOME": ({"HOME": "/nonexistent"}, [], [], None),
}
NOT_DONE = """## What did not work or was not tried
- Checkouts: `git --git-dir=/work/.mirror/<owner>+<name>/repo archive <HEAD> | tar -x -C /tmp/vc-work/<proj>`.
- A tiny per-test timeout: Debian's python3-pytest-timeout is not installed (only the run's own timeout exists).
- A missing third-party dependency: the four projects' collected tests import none. Stdlib modules pytest imports
  itself (difflib, shlex, copy, socket, hashlib, uuid, decimal) cannot be made missing without pytest failing to
  start; one the tests import at module level only fails collection (no test id, not kept).
- An unwritable TMPDIR or HOME: the runs are root (permissions do not hold) and tempfile falls back to /tmp; the
  temp root is broken through PYTEST_DEBUG_TEMPROOT instead (pytest's tmp_path fixtures).
- The environment runs that made no test fail say `0 failing` above. Memory limits are erratic: at 100 MB boltons
  hangs, more-itertools' pytest dies of MemoryError compiling test_more.py (INTERNALERROR, no failing test) below
  about 400 MB; 150 MB is kept for click's and boltons' thread and allocation failures."""
NEGATE = {ast.Eq: (rb"==", "!="), ast.NotEq: (rb"!=", "=="), ast.Lt: (rb"<(?!=)", ">="), ast.LtE: (rb"<=", ">"),
          ast.Gt: (rb">(?!=)", "<="), ast.GtE: (rb">=", "<"), ast.Is: (rb"\bis\b(?!\s+not)", "is not"),
          ast.IsNot: (rb"\bis\s+not\b", "is"), ast.In: (rb"(?<!not )\bin\b", "not in"),
          ast.NotIn: (rb"\bnot\s+in\b", "in")}
OTHER_EXCEPTION = {"ValueError": "TypeError", "TypeError": "ValueError", "KeyError": "LookupError",
                   "IndexError": "ValueError", "AttributeError": "TypeError", "RuntimeError": "ValueError"}
COMMON = set(dir(builtins)).union(*(dir(t) for t in (str, bytes, list, dict, set, int, float, object, io.StringIO,
                                                     io.BytesIO, tuple, type, Exception)))
OPERATORS = ["literal", "comparison", "off_by_one", "swap_args", "rename", "return_value", "raise_exc"]


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def module_name(rel, src):
    parts = os.path.relpath(rel, src).removesuffix(".py").split(os.sep)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(tree, mod, is_pkg):
    """The module names a file imports, relative ones resolved, with their parent packages."""
    out = set()
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = mod.split(".") if is_pkg else mod.split(".")[:-1]
                base = ".".join(pkg[:len(pkg) - node.level + 1] + ([node.module] if node.module else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        for parts in (n.split(".") for n in names):
            out.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return out


class Project:
    def __init__(self, name, checkout):
        self.name, self.checkout = name, os.path.abspath(checkout)
        self.repo, self.head, self.src, self.pkg, self.extra = PROJECTS[name]
        self.texts, self.product, self.tests, deps, self.reach = {}, {}, [], {}, {}
        pkg_dir = os.path.normpath(os.path.join(self.src, self.pkg)) + os.sep
        for dirpath, dirs, files in os.walk(self.checkout):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
            for rel in sorted(os.path.relpath(os.path.join(dirpath, f), self.checkout) for f in files):
                if rel.endswith(".py") and "tests" in rel.split(os.sep) and os.path.basename(rel).startswith("test_"):
                    self.tests.append(rel)
                elif rel.endswith(".py") and rel.startswith(pkg_dir):
                    self.product[module_name(rel, self.src)] = rel
                else:
                    continue
                with open(os.path.join(self.checkout, rel), encoding="utf-8") as fh:
                    self.texts[rel] = fh.read()
        for mod, rel in self.product.items():
            deps[mod] = imports(ast.parse(self.texts[rel]), mod, rel.endswith("__init__.py"))
        for t in self.tests:  # test file -> the product modules it imports, directly or not
            todo, self.reach[t] = list(imports(ast.parse(self.texts[t]), "", False)), set()
            while todo:
                m = todo.pop()
                if m in self.product and m not in self.reach[t]:
                    self.reach[t].add(m)
                    todo.extend(deps[m])
        self.runnable = self.tests

    def files_for(self, rel):
        return [t for t in self.runnable if module_name(rel, self.src) in self.reach[t]]


def run_pytest(root, files, project, tmp, how=({}, [], [], None), timeout=600, cov=None):
    """Runs pytest in `root`: ({node id: failure text}, seconds, 'ok'|'timeout'|'no report'); a test file that fails
    to collect is keyed `collect:<its dotted name>`. `cov`: write there the product lines the run executes."""
    env_extra, prefix, args, missing = how
    report = os.path.join(tempfile.mkdtemp(dir=tmp), "report.xml")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST", "VC_COV"))}
    env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=os.path.join(root, project.src))
    if missing:  # a module of that name first on the path, failing to import as a missing one does
        with open(os.path.join(os.path.dirname(report), missing + ".py"), "w") as f:
            f.write(f"raise ModuleNotFoundError(\"No module named '{missing}'\", name={missing!r})\n")
        env["PYTHONPATH"] = os.path.dirname(report) + os.pathsep + env["PYTHONPATH"]
    if cov:
        env.update(VC_COV_ROOT=os.path.normpath(os.path.join(root, project.src, project.pkg)) + os.sep,
                   VC_COV_OUT=cov, PYTHONPATH=tmp + os.pathsep + env["PYTHONPATH"])
        args = [*args, "-p", "vc_cov"]
    env.update({k: v.format(tmp=tmp) for k, v in env_extra.items()})
    cmd = [*prefix, *PYTEST, *project.extra, *args, f"--junitxml={report}", *files]
    start, status = time.monotonic(), "ok"
    p = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:  # the report may be written already: a thread left hanging at exit
        os.killpg(p.pid, 9), p.wait()
        status = "timeout"
    seconds, failures = time.monotonic() - start, {}
    for case in ET.parse(report).getroot().iter("testcase") if os.path.exists(report) else []:
        bad = [e for e in case if e.tag in ("failure", "error")]
        text = (bad[0].text or bad[0].get("message", "")).replace(root, project.checkout) if bad else ""
        parts = case.get("classname", "").split(".")
        if bad and parts == [""]:
            failures["collect:" + case.get("name")] = text
        for i in range(len(parts), 0, -1):
            if bad and "/".join(parts[:i]) + ".py" in project.texts:
                failures["::".join(["/".join(parts[:i]) + ".py", *parts[i:], case.get("name")])] = text
                break
    status = status if os.path.exists(report) or status != "ok" else "no report"
    shutil.rmtree(os.path.dirname(report))
    return failures, seconds, status


def mutations(text, covered, test_text):
    """Every candidate single mutation of one product file: (operator, line, [(line, col0, col1, new)], what)."""
    tree, lines = ast.parse(text), text.splitlines(keepends=True)
    seg = lambda n: lines[n.lineno - 1].encode()[n.col_offset:n.end_col_offset].decode()
    ch = lambda ln, b: len(lines[ln - 1].encode()[:b].decode())  # ast's byte column -> character column
    one = lambda n: n.lineno == n.end_lineno and n.lineno in covered
    edit = lambda n, new: (n.lineno, [(n.lineno, ch(n.lineno, n.col_offset), ch(n.lineno, n.end_col_offset), new)])
    parent, skip = {}, set()  # annotations, docstrings and f-strings are not mutated
    for node in ast.walk(tree):
        parent.update((c, node) for c in ast.iter_child_nodes(node))
        ann = [getattr(node, "annotation", None), getattr(node, "returns", None)]
        if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            ann.append(node)
        skip.update(id(x) for a in ann if a is not None for x in ast.walk(a))
    for node in (n for n in ast.walk(tree) if id(n) not in skip):
        if isinstance(node, ast.Constant) and one(node):
            v, up = node.value, parent.get(node)
            up = parent.get(up) if isinstance(up, ast.UnaryOp) else up
            if isinstance(v, bool):
                yield ("literal", *edit(node, repr(not v)), f"{v} -> {not v}")
            elif isinstance(v, int) and (isinstance(up, (ast.BinOp, ast.Subscript, ast.Slice, ast.Compare)) or (
                    isinstance(up, ast.Call) and isinstance(up.func, ast.Name) and up.func.id == "range")):
                new = v + 1 if v <= 0 or (v + node.lineno) % 2 else v - 1
                yield ("off_by_one", *edit(node, repr(new)), f"{v} -> {new}")
            elif isinstance(v, (int, float)):
                new = {0: 1, 1: 2}.get(v, v * 2)
                yield ("literal", *edit(node, repr(new)), f"{v!r} -> {new!r}")
            elif isinstance(v, (str, bytes)) and 0 < len(v) <= 40:
                new = v.upper() if v.upper() != v else v + v[:1]
                yield ("literal", *edit(node, repr(new)), f"{v!r} -> {new!r}")
        elif isinstance(node, ast.Compare) and one(node):
            for a, b, op in zip([node.left] + node.comparators, node.comparators, node.ops):
                pattern, new = NEGATE[type(op)]
                m = re.search(pattern, lines[node.lineno - 1].encode()[a.end_col_offset:b.col_offset])
                if m:
                    c0 = a.end_col_offset + m.start()
                    yield ("comparison", node.lineno, [(node.lineno, ch(node.lineno, c0),
                                                        ch(node.lineno, c0 + len(m.group())), new)],
                           f"{m.group().decode()} -> {new}")
        elif isinstance(node, ast.Call) and len(node.args) >= 2 and one(node.args[0]) and one(node.args[1]):
            a, b = node.args[:2]
            if a.lineno == b.lineno and seg(a) != seg(b) and not isinstance(a, ast.Starred) \
                    and not isinstance(b, ast.Starred):
                mid = lines[a.lineno - 1].encode()[a.end_col_offset:b.col_offset].decode()
                yield ("swap_args", a.lineno, [(a.lineno, ch(a.lineno, a.col_offset), ch(a.lineno, b.end_col_offset),
                                                seg(b) + mid + seg(a))], f"{seg(a)}, {seg(b)} swapped")
        elif isinstance(node, ast.Return) and node.value is not None and one(node.value) \
                and not isinstance(node.value, ast.Constant):
            v = node.value
            negatable = isinstance(v, (ast.Compare, ast.BoolOp)) or (isinstance(v, ast.UnaryOp) and
                                                                     isinstance(v.op, ast.Not))
            new = f"not ({seg(v)})" if negatable else "None"
            yield ("return_value", *edit(v, new), f"return {seg(v)} -> return {new}")
        elif isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = seg(exc) if one(exc) else ""
            if re.fullmatch(r"[\w.]*(Error|Exception|Warning|Exit|Abort)", name):
                new = OTHER_EXCEPTION.get(name, "RuntimeError")
                yield ("raise_exc", *edit(exc, new), f"raise {name} -> raise {new}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and len(node.name) >= 4 \
                and not node.name.startswith("__") and node.name not in COMMON and node.body[0].lineno in covered \
                and re.search(rf"\b{node.name}\b", test_text):
            yield ("rename", node.lineno, None, f"{node.name} -> {node.name}_v2")


def rename_edits(project, old, new):
    """A refactoring's rename across the package: every name token, and every string that is just the name."""
    out = {}
    for rel in project.product.values():
        for tok in tokenize.generate_tokens(io.StringIO(project.texts[rel]).readline):
            if tok.string == old or (tok.type == tokenize.STRING and tok.string[1:-1] == old
                                     and tok.string[0] in "'\"" and tok.string[0] == tok.string[-1]):
                out.setdefault(rel, []).append((*tok.start, tok.end[1], tok.string.replace(old, new)))
    return out


def write(root, project, edits):
    for rel, es in edits.items():
        lines = project.texts[rel].splitlines(keepends=True)
        for ln, c0, c1, new in sorted(es, reverse=True):
            lines[ln - 1] = lines[ln - 1][:c0] + new + lines[ln - 1][c1:]
        with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
            f.write("".join(lines))


def case(project, kind, n, test_id, text, when, meta):
    path = test_id.split("::")[0]
    return {"id": f"{project.name}-{kind}-{n:04d}", "project": project.repo, "test_id": test_id,
            "language": "python", "failure_time": when, "error_message": text,
            "files": [{"path": path, "content": project.texts[path]}], "faulty_commit": None,
            "meta": {"class": kind, **meta, "head_commit": project.head}}


def build(project, args, pool, tmp, log):
    slots = queue.Queue()
    for i in range(args.jobs):
        slots.put(shutil.copytree(project.checkout, os.path.join(tmp, f"{project.name}-w{i}"),
                                  ignore=shutil.ignore_patterns("__pycache__", ".git")))

    @contextlib.contextmanager
    def worker():
        root = slots.get()
        try:
            yield root
        finally:
            slots.put(root)
    cov = os.path.join(tmp, f"{project.name}-cov.json")
    with worker() as root:
        base, seconds, status = run_pytest(root, project.tests, project, tmp, cov=cov)
        covered = collections.defaultdict(set)
        for fn, ln in json.load(open(cov)) if os.path.exists(cov) else []:
            covered[os.path.relpath(fn, root)].add(ln)
    broken = {t for t in project.tests if "collect:" + t.replace("/", ".").removesuffix(".py") in base}
    project.runnable = [t for t in project.tests if t not in broken and project.reach[t]]
    timeout = max(60, 2 * seconds)  # the unmutated run is traced, so slower than a mutation's
    log(f"{project.name}: baseline {seconds:.0f}s ({status}), failing {sorted(base)}, {len(project.runnable)} test "
        f"files, {sum(map(len, covered.values()))} product lines run")
    rng, by_op = random.Random(f"{args.seed}-{project.name}"), collections.defaultdict(list)
    defs = collections.Counter(re.findall(r"(?m)^\s*(?:async\s+)?def\s+(\w+)", "\n".join(
        project.texts[r] for r in project.product.values())))
    for mod, rel in sorted(project.product.items()):
        if project.files_for(rel) and covered[rel]:
            test_text = "\n".join(project.texts[t] for t in project.files_for(rel))
            for m in mutations(project.texts[rel], covered[rel], test_text):
                if m[0] != "rename" or defs[m[3].split()[0]] == 1:  # a rename of one definition
                    by_op[m[0]].append((rel, *m))
    for op in OPERATORS:
        rng.shuffle(by_op[op])
    order = [c for group in zip_longest(*[by_op[o] for o in OPERATORS]) for c in group if c]

    def attempt(m):
        rel, op, line, es, what = m
        edits = rename_edits(project, what.split()[0], what.split()[-1]) if op == "rename" else {rel: es}
        with worker() as root:
            try:
                write(root, project, edits)
                res = run_pytest(root, sorted({t for r in edits for t in project.files_for(r)}), project, tmp,
                                 timeout=timeout)
            finally:
                write(root, project, {r: [] for r in edits})
        return m, res, now()
    product, stats = [], collections.Counter()
    for i in range(0, min(len(order), args.max_runs), 2 * args.jobs):
        for (rel, op, line, _, what), (fails, _, status), when in pool.map(attempt, order[i:i + 2 * args.jobs]):
            fails = {t: x for t, x in fails.items() if t not in base and not t.startswith("collect:")}
            stats[op, "tried"] += 1
            stats[op, "kept" if fails else "no failing test" if status == "ok" else status] += 1
            for t in sorted(rng.sample(sorted(fails), min(args.cap, len(fails)))):
                product.append(case(project, "product", len(product), t, fails[t], when, {
                    "operator": op, "mutation": what, "mutated_path": rel, "mutated_line": line}))
            if len(product) >= args.target:
                break
        if len(product) >= args.target:
            break
    environment, env_stats = [], {}
    for t in [t for t in sorted(base) if "PackageNotFoundError" in base[t] and not t.startswith("collect:")]:
        how = "not-installed (no distribution metadata; fails before any change)"
        environment.append(case(project, "environment", len(environment), t, base[t], now(), {"how": how}))
        env_stats[how] = f"{len(environment)} failing"

    def perturbed(item):
        with worker() as root:
            return item[0], run_pytest(root, project.runnable, project, tmp, item[1], timeout), now()
    for how, (fails, _, status), when in pool.map(perturbed, ENVIRONMENTS.items()):
        fails = {t: x for t, x in fails.items() if t not in base and not t.startswith("collect:")}
        env_stats[how] = f"{len(fails)} failing ({status})"
        for t in sorted(rng.sample(sorted(fails), min(args.env_cap, len(fails)))):
            environment.append(case(project, "environment", len(environment), t, fails[t], when, {"how": how}))
    return product, environment, stats, env_stats, seconds, len(order)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    for flag, default, what in [("seed", 1, "the RNG's seed"), ("target", 80, "product cases a project"),
                                ("cap", 5, "failing tests kept a mutation"), ("jobs", 2, "pytest runs at once"),
                                ("env-cap", 8, "failing tests kept a perturbation"),
                                ("max-runs", 400, "mutations tried a project at most")]:
        ap.add_argument("--" + flag, type=int, default=default, help=f"{what} (default {default})")
    ap.add_argument("checkouts", nargs="+", metavar="PROJ=CHECKOUT")
    args = ap.parse_args()
    start, log = time.monotonic(), lambda m: print(f"[{time.monotonic() - start:6.0f}s] {m}", file=sys.stderr)
    summary = ["# Verdict evaluation corpus: product and environment failures", "",
               f"Made by `{' '.join(['bench/product_faults.py'] + sys.argv[1:])}`.", "", __doc__.split("\n\n")[1],
               "", "| project | class | operator / how | cases |", "|---|---|---|---|"]
    notes = []
    with cf.ThreadPoolExecutor(args.jobs) as pool, tempfile.TemporaryDirectory(prefix="vc-run-") as tmp:
        open(os.path.join(tmp, "a-file"), "w").close()
        with open(os.path.join(tmp, "vc_cov.py"), "w") as f:
            f.write(COVERAGE_PLUGIN)
        for name, _, checkout in (spec.partition("=") for spec in args.checkouts):
            project = Project(name, checkout)
            product, environment, stats, env_stats, base_s, candidates = build(project, args, pool, tmp, log)
            os.makedirs(os.path.join(args.out, name), exist_ok=True)
            for kind, cases in (("product", product), ("environment", environment)):
                if not cases:  # spark refuses a file of no cases
                    summary.append(f"| {name} | {kind} | **total** (no {kind}.jsonl written) | **0** |")
                    continue
                with open(os.path.join(args.out, name, f"{kind}.jsonl"), "w", encoding="utf-8") as f:
                    f.writelines(json.dumps(c, ensure_ascii=False) + "\n" for c in cases)
                counts = collections.Counter(c["meta"].get("operator") or c["meta"]["how"] for c in cases)
                summary += [f"| {name} | {kind} | {k} | {n} |" for k, n in sorted(counts.items())]
                summary.append(f"| {name} | {kind} | **total** | **{len(cases)}** |")
            notes.append(f"- **{name}**: unmutated run {base_s:.0f}s; {candidates} candidate mutations; tried: " +
                         "; ".join(f"{op}: " + ", ".join(f"{n} {k}" for (o, k), n in stats.items() if o == op)
                                   for op in OPERATORS if stats[op, "tried"]))
            notes.append("  - environment runs: " + "; ".join(f"{h}: {r}" for h, r in env_stats.items()))
            log(f"{name}: {len(product)} product, {len(environment)} environment cases")
    summary += ["", "## Runs", ""] + notes + ["", NOT_DONE, "",
                                              f"Total time {time.monotonic() - start:.0f}s, {args.jobs} workers.", ""]
    with open(os.path.join(args.out, "SUMMARY.md"), "w") as f:
        f.write("\n".join(summary))


if __name__ == "__main__":
    main()
