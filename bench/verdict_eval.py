#!/usr/bin/env python3
"""How well `verdict` (docs/LOCALIZER.md, "Triage") tells whose fault a failure is, beside the trivial baseline that
always says `test`.

    bench/verdict_eval.py SPARK CORPUS VERDICT_CORPUS [--work /tmp/verdict-eval]

CORPUS/<project>/cases.jsonl are failures whose fault is in the test code (the dev corpora: class `test`);
VERDICT_CORPUS/<project>/{product,environment}.jsonl are failures of the same projects whose fault is in the product
or the machine (bench/product_faults.py makes them; `meta.class` says which). Per project, the CORPUS cases are
imported into a fresh knowledge base (the team's learnt test faults) and every failure of the three classes is
localized against it (`spark localize --case FILE --format json`; a case never retrieves itself). The history is
empty (no recorded runs), so `flaky` is not measured here (tests/triage_test.cpp covers it).

Prints, per class and overall: failures, the verdict's accuracy, how many it left `unknown`, its accuracy on the
rest, the confusion, and the baseline's accuracy.
"""
import argparse, collections, json, os, pathlib, shutil, subprocess, sys

CLASSES = ["test", "product", "environment"]


def localize(spark, work, cases):
    out = subprocess.run([spark, "localize", "--case", str(cases), "--format", "json"], cwd=work,
                         capture_output=True, text=True)
    if out.returncode not in (0, 1):
        sys.exit(f"{cases}: spark localize exited {out.returncode}: {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spark")
    ap.add_argument("corpus", type=pathlib.Path)
    ap.add_argument("verdicts", type=pathlib.Path)
    ap.add_argument("--work", type=pathlib.Path, default=pathlib.Path("/tmp/verdict-eval"))
    a = ap.parse_args()
    spark = os.path.abspath(a.spark)
    confusion = collections.defaultdict(collections.Counter)  # true class -> predicted -> n
    per_project = {}
    for project_dir in sorted(p for p in a.verdicts.iterdir() if p.is_dir()):
        project = project_dir.name
        cases = a.corpus / project / "cases.jsonl"
        if not cases.exists():
            print(f"{project}: no {cases}, skipped")
            continue
        work = a.work / project
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        subprocess.run(["git", "init", "-q"], cwd=work, check=True)
        imp = subprocess.run([spark, "import", str(cases.resolve())], cwd=work, capture_output=True, text=True)
        if imp.returncode != 0:
            sys.exit(f"{cases}: import failed: {imp.stderr}")
        counts = collections.defaultdict(collections.Counter)
        for cls, path in [("test", cases)] + [(c, project_dir / f"{c}.jsonl") for c in CLASSES[1:]]:
            if not path.exists() or path.stat().st_size == 0:
                continue
            for loc in localize(spark, work, path.resolve()):
                got = (loc.get("verdict") or {}).get("class", "unknown")
                confusion[cls][got] += 1
                counts[cls][got] += 1
        per_project[project] = counts

    def row(name, c):
        n = sum(c.values())
        right, unknown = c.get(name, 0), c.get("unknown", 0)
        said = n - unknown
        return (f"| {name} | {n} | {100 * right / n:.1f} | {unknown} ({100 * unknown / n:.0f}%) | "
                f"{100 * right / said:.1f} | {100.0 if name == 'test' else 0.0:.1f} | "
                + ", ".join(f"{k} {v}" for k, v in sorted(c.items())) + " |") if n else f"| {name} | 0 | - | - | - | - | - |"

    header = ("| class | failures | accuracy % | unknown | accuracy where it said % | always `test` % | verdicts |\n"
              "|---|---|---|---|---|---|---|")
    print(f"## {a.corpus} + {a.verdicts}\n")
    print(header)
    for cls in CLASSES:
        print(row(cls, confusion[cls]))
    total = sum(sum(c.values()) for c in confusion.values())
    right = sum(confusion[c].get(c, 0) for c in CLASSES)
    baseline = sum(confusion["test"].values())
    print(f"\nall {total}: accuracy {100 * right / total:.1f}% (always `test`: {100 * baseline / total:.1f}%); "
          f"balanced (mean over classes): {sum(100 * confusion[c].get(c, 0) / max(1, sum(confusion[c].values())) for c in CLASSES) / 3:.1f}% "
          f"(always `test`: 33.3%)")
    print("\nper project (accuracy % test / product / environment):")
    for project, counts in per_project.items():
        cells = []
        for cls in CLASSES:
            n = sum(counts[cls].values())
            cells.append(f"{100 * counts[cls].get(cls, 0) / n:.1f} ({n})" if n else "-")
        print(f"  {project}: " + " / ".join(cells))


if __name__ == "__main__":
    main()
