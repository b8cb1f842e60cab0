#!/usr/bin/env python3
"""End-to-end check of scripts/lang_corpus.py on two small projects this test makes (a git repository each):
JavaScript run with Jest (third_party/js-test-tools, from scripts/setup.sh --tests) and Java run with JUnit 5's
console launcher (Debian's junit5).

For each language it asks for a few cases and checks each one:
  - it is a labelled case spark imports and evaluates (`spark eval` exits 0 on the corpus);
  - its faulty lines are lines the mutation changed (they differ from the project's own file);
  - its error message is the runner's, naming the test file;
  - its test id is the one `spark localize` reads from the case's own stack trace (no --test-id given), so the
    script's id mapping and spark's agree.

Usage: tests/lang_corpus_check.py SPARK_BINARY      exit 0 when every check holds, 1 otherwise (each failure printed)
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "lang_corpus.py"

JS_FILES = {
    "package.json": '{"name": "shop", "version": "1.0.0", "private": true}\n',
    "cart.js": """class Cart {
  constructor() { this.items = []; }
  add(name, price, count) { this.items.push({ name, price, count }); }
  total() { return this.items.reduce((s, i) => s + i.price * i.count, 0); }
  count() { return this.items.reduce((s, i) => s + i.count, 0); }
}
module.exports = { Cart };
""",
    "tests/cart.test.js": """const { Cart } = require('../cart');

describe('Cart', () => {
  test('totals prices', () => {
    const cart = new Cart();
    cart.add('apple', 3, 2);
    cart.add('pear', 5, 1);
    expect(cart.total()).toBe(11);
  });

  test('counts items', () => {
    const cart = new Cart();
    cart.add('apple', 3, 2);
    cart.add('plum', 4, 3);
    expect(cart.count()).toBe(5);
    expect(cart.items.length).toBe(2);
  });

  test('starts empty', () => {
    const cart = new Cart();
    expect(cart.count()).toBe(0);
    expect(cart.items.length === 0).toBeTruthy();
  });
});
""",
}

JAVA_FILES = {
    "src/main/java/com/example/shop/Cart.java": """package com.example.shop;

import java.util.ArrayList;
import java.util.List;

public class Cart {
    private final List<int[]> items = new ArrayList<>();

    public void add(int price, int count) {
        items.add(new int[] {price, count});
    }

    public int total() {
        int sum = 0;
        for (int[] item : items) sum += item[0] * item[1];
        return sum;
    }

    public int count() {
        int sum = 0;
        for (int[] item : items) sum += item[1];
        return sum;
    }
}
""",
    "src/test/java/com/example/shop/CartTest.java": """package com.example.shop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class CartTest {
    @Test
    void totalsPrices() {
        Cart cart = new Cart();
        cart.add(3, 2);
        cart.add(5, 1);
        assertEquals(11, cart.total());
    }

    @Test
    void countsItems() {
        Cart cart = new Cart();
        cart.add(3, 2);
        cart.add(4, 3);
        assertEquals(5, cart.count());
        assertTrue(cart.count() > 4);
    }

    @Test
    void startsEmpty() {
        Cart cart = new Cart();
        assertEquals(0, cart.count());
        assertEquals(0, cart.total());
    }
}
""",
}

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def make_repo(root, files):
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "project"], check=True)


def run_language(spark, language, files, test_file, tmp):
    repo = tmp / (language + "-project")
    make_repo(repo, files)
    out = tmp / (language + ".jsonl")
    r = subprocess.run([sys.executable, str(SCRIPT), "--language", language, "--git-dir", str(repo / ".git"),
                        "--rev", "HEAD", "--project", "example/shop", "--out", str(out), "--cases", "4"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    check(r.returncode == 0, f"{language}: lang_corpus.py exit {r.returncode}:\n{r.stdout[-3000:]}")
    if r.returncode != 0:
        return
    cases = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    check(len(cases) >= 3, f"{language}: {len(cases)} cases, wanted at least 3")
    original = files[test_file].split("\n")
    for c in cases:
        where = f"{language} {c['id']}"
        check(c["language"] == language and c["source"] == "seeded", f"{where}: language/source {c['language']}/{c['source']}")
        check(len(c["files"]) == 1 and c["files"][0]["path"] == test_file, f"{where}: files {[f['path'] for f in c['files']]}")
        lines = c["files"][0]["content"].split("\n")
        check(len(c["faulty_lines"]) >= 1, f"{where}: no faulty line")
        for fl in c["faulty_lines"]:
            n = fl["line"]
            check(fl["path"] == test_file and 1 <= n <= len(lines) and lines[n - 1] != original[n - 1],
                  f"{where}: faulty line {fl} is not a line the mutation changed")
        check(Path(test_file).name in c["error_message"], f"{where}: the message names no {Path(test_file).name}")
        # spark reads the test id from the case's own trace: it must be the id the script wrote.
        work = tmp / "localize" / c["id"]
        (work / test_file).parent.mkdir(parents=True, exist_ok=True)
        (work / test_file).write_text(c["files"][0]["content"])
        (work / "error.txt").write_text(c["error_message"])
        lr = subprocess.run([spark, "localize", "--kb", str(work / "kb"), "--test", test_file, "--error", "error.txt",
                             "--format", "json"], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        check(lr.returncode == 0, f"{where}: spark localize exit {lr.returncode}: {lr.stderr[-500:]}")
        if lr.returncode == 0:
            got = json.loads(lr.stdout).get("test_id")
            check(got == c["test_id"], f"{where}: spark reads the test id {got!r} from the trace, the case says {c['test_id']!r}")
    er = subprocess.run([spark, "eval", str(out), "--mode", "builtin,traceback"], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
    check(er.returncode == 0, f"{language}: spark eval exit {er.returncode}: {er.stderr[-500:]}")
    print(f"{language}: {len(cases)} cases checked")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    spark = str(Path(sys.argv[1]).resolve())
    with tempfile.TemporaryDirectory(prefix="spark-lang-corpus-check.") as t:
        tmp = Path(t)
        run_language(spark, "javascript", JS_FILES, "tests/cart.test.js", tmp)
        run_language(spark, "java", JAVA_FILES, "src/test/java/com/example/shop/CartTest.java", tmp)
    print(f"lang_corpus_check: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
