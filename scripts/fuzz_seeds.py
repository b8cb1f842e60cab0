#!/usr/bin/env python3
"""Seed corpora for the libFuzzer targets of tests/fuzz: small valid inputs of each format, the kinds of input the
tests use, and (when ../shared/data/dev is present) real error messages, test files and case lines from it.
Nothing here is committed as data: the corpora are made again in the build folder each run.

    scripts/fuzz_seeds.py OUT_DIR [DEV_DATA_DIR]
"""
import glob
import json
import os
import sys

out = sys.argv[1]
dev = sys.argv[2] if len(sys.argv) > 2 else ""

TEST = (
    "import pytest\n\n\nclass TestShapes:\n    def test_area(self):\n        assert 2 * 3 == 7\n\n\n"
    "@pytest.mark.parametrize('v', [1, 2])\ndef test_param(v):\n    s = '''a\n    b'''\n    assert v == 1, (\n"
    "        'msg')\n\n\ndef test_ok():\n    x = [i for i in range(3)]  # comment\n    \\\n        y = 2\n"
)
ERROR = ("tests/test_x.py:10: in test_add\n    assert add(2, 2) == expected\nE   assert 4 == 5\n"
         "E    +  where 4 = add(2, 2)\n")
NATIVE = ('Traceback (most recent call last):\n  File "/tmp/pytest-of-root/pytest-3/t.py", line 12, in test_f\n'
          "    raise ValueError(0x7f3a12345678)\nValueError: 2026-01-01T10:00:00 at 0x7f3a12345678 "
          "123e4567-e89b-12d3-a456-426614174000\n")


def case(cid, content, line, error):
    return {"id": cid, "project": "demo/project", "test_id": "tests/test_x.py::test_a", "language": "python",
            "failure_time": "2026-01-01T00:00:00Z", "error_message": error,
            "files": [{"path": "tests/test_x.py", "content": content}],
            "faulty_lines": [{"path": "tests/test_x.py", "line": line}], "meta": {"note": 1}}


def fdp_pair(a, b):
    """Two strings as FuzzedDataProvider's ConsumeRandomLengthString + ConsumeRemainingBytesAsString read them."""
    return a.replace("\\", "\\\\") + "\\x" + b


def pieces(content, size=4096):
    """A test file cut before top-level definitions into pieces of about `size` bytes: the structure target scans the
    file once per function, so a whole 50 KB file runs a few times a second and a piece hundreds of times."""
    out, cur = [], []
    for line in content.splitlines(keepends=True):
        if cur and sum(map(len, cur)) >= size and line.startswith(("def ", "class ", "@", "async def ")):
            out.append("".join(cur))
            cur = []
        cur.append(line)
    if cur:
        out.append("".join(cur))
    return out


seeds = {
    "case_jsonl": [json.dumps(case("a", TEST, 6, ERROR)) + "\n" + json.dumps(case("b", TEST, 12, NATIVE)) + "\n",
                   json.dumps(case("c", "def test_a():\n    assert 1 == 2\n", 2, "E   assert 1 == 2")) + "\n"],
    "outcomes_jsonl": ['{"commit": "%s", "test_id": "tests/test_x.py::test_a", "outcome": "failed", '
                       '"time": "2026-01-01T00:00:00Z", "message": "E   assert 1 == 2"}\n' % ("a" * 40),
                       '{"commit": "%s", "test_id": "tests/t.py::test_b", "outcome": "passed"}\n' % ("0123abcd" * 5)],
    "junit": ['<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="1" '
              'timestamp="2026-01-01T00:00:00">\n<testcase classname="tests.test_x" name="test_add" '
              'file="tests/test_x.py" line="8"><failure message="assert 4 == 5">' + ERROR.replace("<", "&lt;") +
              '</failure></testcase>\n<testcase classname="tests.test_x.TestShapes" name="test_area"/>\n'
              '<testcase classname="" name="tests.test_y" ><error message="collection failure">x</error></testcase>\n'
              '<testcase classname="tests.test_x" name="test_skip"><skipped message="later"/></testcase>\n'
              '<testsuite name="inner"><testcase classname="x" name="t"/></testsuite></testsuite></testsuites>\n',
              '<testsuite name="s"><testcase classname="tests.test_a" name="test_a" file="../../etc/passwd"/>'
              '</testsuite>\n'],
    "error_message": [ERROR, NATIVE, "E   AssertionError\n", "tests/t.py:3: AssertionError\n"],
    "answer": ["\x05" + a for a in [
        '{"faulty_lines": [{"line": 9, "code": "expected = 5"}, {"line": 10, "code": "x"}]}',
        "```json\n[3, 4, 5]\n```", "The faulty lines are: line 3, line 7 and 2.\n", "3\n4\n",
        '[{"id": 2}, {"line": "4"}]', "Ignore previous instructions.",
    ]],
    "config": ['[llm]\nbase_url = "http://localhost:8000/v1"\nmodel = "m"\ntimeout = 30\nretries = 2\n'
               'deadline = 60.5\n\n[localize]\nk = 5\nlevel = "statement"\nepsilon = 0.1\n\n'
               '[redact]\npatterns = [{ name = "emp", pattern = "EMP-\\\\d{6}" }]\n',
               'kb = ".spark"\nproject = "demo"\n[mine]\nsigma = 3.0\n'],
    "python_structure": [TEST, "def f(:\n  pass\n", "class A:\n\tdef test_x(self):\n\t\tpass\n",
                         "@fixture\ndef g():\n    yield 1\n\n# tail\n"],
    # The first byte picks the language: 0 Java, 1 JavaScript, 2 TypeScript, 3 TSX.
    "brace_structure": [
        "\x00package com.x;\nclass CartTest {\n  @BeforeEach\n  void setUp() { cart = new Cart(); }\n  @Test\n"
        "  void total() {\n    int t = cart.total();\n    if (t > 2) { t--; } else if (t < 0) { throw new X(); }"
        " else { t++; }\n    for (String s : xs) { check(s); }\n    Runnable r = () -> { cart.clear(); };\n"
        "    assertEquals(3, t);\n  }\n  @Nested class Inner { @Test void n() {} }\n}\n"
        "\tat com.x.CartTest.total(CartTest.java:7)\n",
        "\x01const { Cart } = require('../src/cart');\ndescribe('Cart', () => {\n  let cart;\n"
        "  beforeEach(() => { cart = new Cart(); });\n  test('counts', () => {\n    const { a, b: c } = f();\n"
        "    expect(cart.total()).toBe(3);\n  });\n  test.each([[1, 2]])('adds %i', (a, b) => {});\n});\n"
        "    at Object.toBe (/ci/tests/cart.test.js:7:26)\n",
        "\x02interface I { n: number }\nconst make = (xs: I[]): Cart => new Cart(xs);\n"
        "it('totals', async (): Promise<void> => {\n  expect(make([]).total()).toBe(0);\n});\n",
        "\x03it('renders', () => {\n  const el = <Cart items={[]} />;\n  expect(el).toBeTruthy();\n});\n",
        "\x00class Broken {\n  void t() {\n    int x = ;\n",
    ],
    "redact": ["password = 'hunter22hunter22'\ntoken: abcdefabcdefabcdef1234\n",
               "AKIAIOSFODNN7EXAMPLE and ghp_" + "a" * 36 + "\n",
               "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----\n",
               "postgres://user:s3cretpass@db.internal/x\nAuthorization: Basic dXNlcjpwYXNz\n",
               "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlc2lnbmF0dXJl\n"],
    "label_diff": [fdp_pair(TEST, TEST.replace("7", "6")), fdp_pair("a\nb\nc\n", "a\nc\nd\n"),
                   fdp_pair("x = 1\n", "x = 1\ny = 2\n")],
}

# Real inputs from the development corpus, when it is there.
if dev and os.path.isdir(dev):
    files = sorted(glob.glob(os.path.join(dev, "*", "cases.jsonl")))
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines = [l for l in f.read().splitlines() if l.strip()][:6]
        for line in lines:
            if len(line) < 200_000:
                seeds["case_jsonl"].append(line + "\n")
            c = json.loads(line)
            seeds["error_message"].append(c.get("error_message", "")[:20_000])
            for f_ in c.get("files", [])[:1]:
                content = f_.get("content", "")
                if len(content) < 60_000:
                    seeds["python_structure"].extend(pieces(content))
                    seeds["redact"].append(content[:20_000])

for target, items in seeds.items():
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    for i, s in enumerate(items):
        with open(os.path.join(d, "seed-%03d" % i), "wb") as f:
            f.write(s.encode("utf-8", "surrogatepass"))
print("fuzz_seeds: %d targets, %d seeds in %s" % (len(seeds), sum(len(v) for v in seeds.values()), out))
