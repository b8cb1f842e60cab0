#!/usr/bin/python3
"""spark and its Python peers on the same data in the same run, alternating (bench/peers.sh drives it).

  harness.py localizer BUILD N --corpus CASES.jsonl... [--queries 20] [--rounds 3] [--import-rounds 2] [--chunk 0]
                       [--work DIR] [--keep]
  harness.py miner BUILD REPO PREFIX [--rounds 3]

Every figure is a median over rounds in which spark and its peer ran back to back, the order swapped each round,
with its floor measured in the same rounds. Times are wall times of whole processes (fork to exit, as a CI step
sees them); peak memory is each process's own maximum resident set (wait4's ru_maxrss).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import json
import re

PY = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "localizer_peer.py")
MINER = os.path.join(HERE, "miner_peer.py")


def run(args, cwd=None, stdout=subprocess.DEVNULL, env=None):
    """Runs a process to its end: (wall seconds, peak RSS in MiB, stdout text or None)."""
    with tempfile.TemporaryFile() as err:   # a file, not a pipe: a chatty stderr cannot stall the child
        start = time.perf_counter()
        p = subprocess.Popen(args, cwd=cwd, stdout=stdout, stderr=err, env=env)
        out = p.stdout.read() if stdout == subprocess.PIPE else None
        _, status, usage = os.wait4(p.pid, 0)
        seconds = time.perf_counter() - start
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            err.seek(0)
            sys.exit(f"harness: {' '.join(args)} exited {p.returncode}: {err.read().decode(errors='replace')[-2000:]}")
    return seconds, usage.ru_maxrss / 1024.0, out.decode() if out is not None else None


def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def fmt_ratio(a, b):
    return f"{a / b:.2f}" if b else "-"


# ---------------------------------------------------------------------------------------------------------- localizer

def write_queries(queries_jsonl, folder):
    """Each query case's test file and failure text in a folder of its own: what a CI step hands `localize`."""
    out = []
    for i, line in enumerate(open(queries_jsonl, "rb")):
        c = json.loads(line)
        path = c["test_id"].split("::")[0]
        f = next((f for f in c["files"] if f["path"] == path), c["files"][0])
        d = os.path.join(folder, str(i))
        os.makedirs(os.path.join(d, os.path.dirname(f["path"])), exist_ok=True)
        with open(os.path.join(d, f["path"]), "w") as fh:
            fh.write(f["content"])
        with open(os.path.join(d, "error.txt"), "w") as fh:
            fh.write(c["error_message"])
        out.append((d, f["path"], c["test_id"]))
    return out


def localizer(args):
    spark = os.path.join(args.build, "spark")
    grow = os.path.join(args.build, "bench", "spark_grow_corpus")
    warm = os.path.join(args.build, "bench", "spark_localize_warm")
    n, q = args.n, args.queries
    work = tempfile.mkdtemp(prefix=f"spark-peers-{n}-", dir=args.work)
    try:
        # The grown knowledge base (spark_scale's, case for case) and Q more copies as the new failures.
        everything = os.path.join(work, "all.jsonl")
        gen_s, _, _ = run([grow, str(n + q), "0.2", everything] + args.corpus)
        cases, queries = os.path.join(work, "cases.jsonl"), os.path.join(work, "queries.jsonl")
        with open(everything, "rb") as src, open(cases, "wb") as a, open(queries, "wb") as b:
            for i, line in enumerate(src):
                (a if i < n else b).write(line)
        os.unlink(everything)
        size_mb = os.path.getsize(cases) / 1e6
        # Imported in files of --chunk cases, one `import` process each, in order, as a team adds cases over time (both
        # stream a file: memory does not grow with it, docs/PERFORMANCE.md "Import memory").
        chunks = [cases]
        if 0 < args.chunk < n:
            chunks = []
            with open(cases, "rb") as src:
                for i, line in enumerate(src):
                    if i % args.chunk == 0:
                        chunks.append(os.path.join(work, f"cases-{len(chunks)}.jsonl"))
                        out = open(chunks[-1], "wb")
                    out.write(line)
                    if i % args.chunk == args.chunk - 1 or i == n - 1:
                        out.close()
            os.unlink(cases)
        print(f"n={n}: corpus {size_mb:.0f} MB of JSON Lines, written in {gen_s:.1f} s (not timed below)",
              file=sys.stderr)

        # Import + index: a new store each round, spark and the peer alternating; the floor, reading the corpus.
        res = {"spark": [], "peer": [], "read": []}
        rss = {"spark": 0.0, "peer": 0.0}
        detail = {"spark": [], "peer": []}
        ranker = []   # spark index's ranker learning, which the peer does not do
        for r in range(args.import_rounds):
            for who in (("spark", "peer") if r % 2 == 0 else ("peer", "spark")):
                kb = os.path.join(work, f"kb-{who}")
                shutil.rmtree(kb, ignore_errors=True)
                t1 = m1 = 0.0
                for chunk in chunks:
                    t, m, _ = run([spark, "--kb", kb, "import", chunk] if who == "spark" else [PY, PEER, "import", kb, chunk])
                    t1, m1 = t1 + t, max(m1, m)
                t2, m2, out = run([spark, "--kb", kb, "index"] if who == "spark" else [PY, PEER, "index", kb],
                                  stdout=subprocess.PIPE)
                if who == "spark":   # "time: embedding 0.71 s, index 0.00 s, ranker 3.56 s (...)"
                    m = re.search(r"time: embedding ([\d.]+) s, index ([\d.]+) s, ranker ([\d.]+) s", out)
                    ranker.append(float(m.group(3)) if m else float("nan"))
                res[who].append(t1 + t2)
                detail[who].append((t1, t2))
                rss[who] = max(rss[who], m1, m2)
                print(f"  round {r + 1} {who}: import {t1:.1f} s + index {t2:.1f} s; peak {max(m1, m2):.0f} MiB",
                      file=sys.stderr)
            t, _, _ = run(["cat"] + chunks)
            res["read"].append(t)
        imp = {k: statistics.median(v) for k, v in res.items()}

        # A new process per failure: spark localize, the peer, and the floors, alternating per query.
        folders = write_queries(queries, os.path.join(work, "q"))
        kb_spark, kb_peer = os.path.join(work, "kb-spark"), os.path.join(work, "kb-peer")
        shutil.rmtree(os.path.join(kb_spark, "structures"), ignore_errors=True)   # no test file parsed yet
        lat = {k: [] for k in ("spark-first", "spark", "peer-first", "peer", "spark-version", "python-pass",
                               "python-imports")}
        lrss = {"spark": 0.0, "peer": 0.0}
        for r in range(args.rounds + 1):
            for i, (d, path, test_id) in enumerate(folders):
                cmds = [("spark", [spark, "--kb", kb_spark, "localize", "--test", path, "--error", "error.txt",
                                   "--test-id", test_id, "--format", "json"]),
                        ("peer", [PY, PEER, "localize", kb_peer, "--test", path, "--error", "error.txt",
                                  "--test-id", test_id]),
                        ("spark-version", [spark, "--version"]),
                        ("python-pass", [PY, "-c", "pass"]),
                        ("python-imports", [PY, "-c", "import faiss, numpy, Levenshtein, sqlite3, json, re"])]
                if (r + i) % 2:
                    cmds.reverse()
                for who, cmd in cmds:
                    t, m, _ = run(cmd, cwd=d)
                    key = who + "-first" if r == 0 and who in ("spark", "peer") else who
                    lat[key].append(t * 1000.0)
                    if who in lrss:
                        lrss[who] = max(lrss[who], m)

        # In process: every query localized in one process after one load, alternating. spark reads the structures
        # of the test-file versions `spark localize` parsed above, as a later process does (KB/structures); spark-cold
        # keeps none and parses every version in the process.
        hot = {"spark": [], "peer": [], "spark-cold": []}
        cold_env = dict(os.environ, SPARK_BENCH_NO_STRUCTURES="1")
        for r in range(args.rounds):
            for who in (("spark", "peer", "spark-cold") if r % 2 == 0 else ("spark-cold", "peer", "spark")):
                cmd = [warm, kb_spark, queries] if who.startswith("spark") else [PY, PEER, "warm", kb_peer, queries]
                _, _, out = run(cmd, stdout=subprocess.PIPE, env=cold_env if who == "spark-cold" else None)
                hot[who].append(tuple(float(x) for x in out.split()))
        hot = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for k, v in hot.items()}

        p = {k: (pct(v, 0.5), pct(v, 0.95)) for k, v in lat.items() if v}
        print(f"\n### {n:,} cases ({args.import_rounds} import rounds, imported in {len(chunks)} file(s); "
              f"{args.rounds} localize rounds of {q} failures after a first)\n")
        print("| measure | spark | Python peer | peer / spark | floor |")
        print("|---|---|---|---|---|")
        print(f"| import + index, cases/s (median s) | {n / imp['spark']:,.0f} ({imp['spark']:.1f} s) | "
              f"{n / imp['peer']:,.0f} ({imp['peer']:.1f} s) | **{fmt_ratio(imp['peer'], imp['spark'])}** | "
              f"reading the {size_mb:.0f} MB corpus (`cat`): {imp['read']:.2f} s |")
        sd = [statistics.median(x[i] for x in detail['spark']) for i in (0, 1)]
        pdt = [statistics.median(x[i] for x in detail['peer']) for i in (0, 1)]
        print(f"| of which import / index, s | {sd[0]:.1f} / {sd[1]:.1f} | {pdt[0]:.1f} / {pdt[1]:.1f} | "
              f"{fmt_ratio(pdt[0], sd[0])} / {fmt_ratio(pdt[1], sd[1])} | |")
        rk = statistics.median(ranker)
        print(f"| the same without spark's ranker learning ({rk:.1f} s; the peer has no ranker) | "
              f"{n / (imp['spark'] - rk):,.0f} cases/s | | **{fmt_ratio(imp['peer'], imp['spark'] - rk)}** | |")
        print(f"| peak RSS of import, index (MiB) | {rss['spark']:.0f} | {rss['peer']:.0f} | "
              f"{fmt_ratio(rss['peer'], rss['spark'])} | |")
        print(f"| new process, first, p50 / p95 ms | {p['spark-first'][0]:.1f} / {p['spark-first'][1]:.1f} | "
              f"{p['peer-first'][0]:.1f} / {p['peer-first'][1]:.1f} | {fmt_ratio(p['peer-first'][0], p['spark-first'][0])} | |")
        print(f"| new process, again, p50 / p95 ms | {p['spark'][0]:.1f} / {p['spark'][1]:.1f} | "
              f"{p['peer'][0]:.1f} / {p['peer'][1]:.1f} | **{fmt_ratio(p['peer'][0], p['spark'][0])}** | "
              f"`spark --version` {p['spark-version'][0]:.1f}; `python3 -c pass` {p['python-pass'][0]:.1f}; "
              f"the peer's imports {p['python-imports'][0]:.1f} |")
        print(f"| peak RSS of a localize process (MiB) | {lrss['spark']:.0f} | {lrss['peer']:.0f} | "
              f"{fmt_ratio(lrss['peer'], lrss['spark'])} | |")
        print(f"| in process, p50 / p95 ms | {hot['spark'][0]:.1f} / {hot['spark'][1]:.1f} | "
              f"{hot['peer'][0]:.1f} / {hot['peer'][1]:.1f} | **{fmt_ratio(hot['peer'][0], hot['spark'][0])}** | "
              f"the failures' test-file versions parsed by the `spark localize` runs above, read, not parsed again |")
        print(f"| in process, every version parsed in the process, p50 / p95 ms | {hot['spark-cold'][0]:.1f} / "
              f"{hot['spark-cold'][1]:.1f} | {hot['peer'][0]:.1f} / {hot['peer'][1]:.1f} | "
              f"{fmt_ratio(hot['peer'][0], hot['spark-cold'][0])} | `SPARK_BENCH_NO_STRUCTURES=1` |")
        sys.stdout.flush()
    finally:
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------------- miner

def miner(args):
    walk = os.path.join(args.build, "bench", "spark_history_walk")
    spark_s, git_s, peer_s = [], [], []
    spark_rss = peer_rss = 0.0
    commits = touching = 0
    for r in range(args.rounds):
        for who in (("spark", "peer") if r % 2 == 0 else ("peer", "spark")):
            if who == "spark":
                # One run of spark's walk and `git log -p --first-parent -- PREFIX` back to back (spark_history_walk).
                _, _, out = run([walk, args.repo, "--prefix", args.prefix, "--runs", "1"], stdout=subprocess.PIPE)
                for line in out.splitlines():
                    if line.startswith("run 1:"):
                        parts = line.replace(",", "").split()
                        spark_s.append(float(parts[3]))
                        git_s.append(float(parts[8]))
                    if line.startswith("peak memory:"):
                        spark_rss = max(spark_rss, float(line.split()[3]))
            else:
                _, m, out = run([PY, MINER, args.repo, "--prefix", args.prefix], stdout=subprocess.PIPE)
                c, t, _, s = out.split()
                commits, touching = int(c), int(t)
                peer_s.append(float(s))
                peer_rss = max(peer_rss, m)
    s, g, pe = (statistics.median(x) for x in (spark_s, git_s, peer_s))
    name = os.path.basename(os.path.normpath(args.repo))
    print(f"| {name} `{args.prefix}` | {commits:,} ({touching:,}) | {s:.2f} s, {commits / s:,.0f} commits/s | "
          f"{g:.2f} s | {pe:.2f} s, {commits / pe:,.0f} commits/s | **{s / g:.2f}** | **{pe / s:.1f}** | "
          f"{spark_rss:.0f} / {peer_rss:.0f} MiB |")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    a = sub.add_parser("localizer")
    a.add_argument("build")
    a.add_argument("n", type=int)
    a.add_argument("--corpus", nargs="+", required=True)
    a.add_argument("--queries", type=int, default=20)
    a.add_argument("--rounds", type=int, default=3)
    a.add_argument("--import-rounds", type=int, default=2)
    a.add_argument("--work", default=None)
    a.add_argument("--keep", action="store_true")
    a.add_argument("--chunk", type=int, default=0, help="import in files of this many cases (0: one file)")
    a.set_defaults(run=localizer)
    a = sub.add_parser("miner")
    a.add_argument("build")
    a.add_argument("repo")
    a.add_argument("prefix")
    a.add_argument("--rounds", type=int, default=3)
    a.set_defaults(run=miner)
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    args.run(args)


if __name__ == "__main__":
    main()
