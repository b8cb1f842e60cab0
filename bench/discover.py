#!/usr/bin/python3
"""`spark mine --discover` on a real repository, against its peers measured in the same run (docs/PERFORMANCE.md):

  * the candidate scan (`--dry-run`, no runs) against `git log -p --first-parent` over the same range;
  * the whole discovery with `-j 2` against `-j 1` (a new knowledge base each time: nothing reused);
  * the work trees' set-up cost per commit, as the discovery's summary reports it.

Usage: bench/discover.py SPARK REPO "RUN COMMAND {test_id}" [--since DATE] [--pairs N] [--scan-only]
Each pair runs the two commands in turn (A B A B ...), so a drift of the machine's speed hits both; medians and the
median of the pairwise ratios are printed. Exits 1 when a command fails.
"""
import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time


def timed(cmd, cwd=None):
    start = time.monotonic()
    r = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.monotonic() - start
    if r.returncode != 0:
        sys.exit(f"{cmd[0]} failed (exit {r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return seconds, r.stderr


def pairs(a, b, n):
    ta, tb, ratios, err = [], [], [], ""
    for _ in range(n):
        x, err = a()
        y, _ = b()
        ta.append(x)
        tb.append(y)
        ratios.append(x / y)
    return statistics.median(ta), statistics.median(tb), statistics.median(ratios), err


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("spark")
    p.add_argument("repo")
    p.add_argument("run")
    p.add_argument("--since", default="")
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--scan-only", action="store_true", help="only the scan against git log -p")
    args = p.parse_args()
    since = ["--since", args.since] if args.since else []
    git_since = [f"--since={args.since}"] if args.since else []

    scan = lambda: timed([args.spark, "mine", "--discover", "--dry-run", "--repo", args.repo] + since)
    log = lambda: timed(["git", "-C", args.repo, "log", "-p", "--first-parent"] + git_since)
    scan(), log()  # warm the page cache
    s, g, ratio, err = pairs(scan, log, max(args.pairs, 5))
    m = re.search(r"scanned (\d+) commits.*?(\d+) fix candidates? with (\d+) tests?", err)
    print(f"scan: {m.group(0) if m else '?'}")
    print(f"  spark --dry-run {s:.3f} s, git log -p --first-parent {g:.3f} s: ratio {ratio:.2f} (median of pairs)")

    if args.scan_only:
        return

    def discover(jobs):
        def run():
            with tempfile.TemporaryDirectory(prefix="spark-bench-kb-") as kb:
                return timed([args.spark, "--kb", kb, "mine", "--discover", "--repo", args.repo, "--run", args.run,
                              "-j", str(jobs)] + since)
        return run

    one, two, ratio, err = pairs(discover(1), discover(2), args.pairs)
    print(f"runs: -j 1 {one:.1f} s, -j 2 {two:.1f} s: speed-up {ratio:.2f} x (median of pairs)")
    for line in err.splitlines():
        if "work trees:" in line or "ran " in line or "labelled" in line:
            print("  " + line.strip())


if __name__ == "__main__":
    main()
