#!/usr/bin/env python3
"""Makes the demo's sample data: a small Python project of spark's own, broken in recorded ways.

For each break (a mutation of the test code, like the `seeded` cases of the corpus format) it runs the real pytest
with --junitxml, takes the failure text from the JUnit XML, and writes a labelled case whose faulty lines are the
mutated lines. One further break, not in the corpus, is the "new failure" the demo localizes.

    python3 scripts/demo_corpus.py OUT_DIR
writes OUT_DIR/project/ (the clean project), OUT_DIR/cases.jsonl, OUT_DIR/query/ (the broken test file and
failure.txt) and OUT_DIR/query/truth.json (the faulty line, for the demo to check its answer against).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

LIBRARY = '''\
"""A tiny geometry and inventory library: the system under test."""


class Shape:
    def __init__(self, kind, width, height):
        self.kind = kind
        self.width = width
        self.height = height


def area(shape):
    if shape.kind == "triangle":
        return shape.width * shape.height / 2
    return shape.width * shape.height


def perimeter(shape):
    return 2 * (shape.width + shape.height)


def scale(shape, factor):
    return Shape(shape.kind, shape.width * factor, shape.height * factor)


class Inventory:
    def __init__(self):
        self.items = {}

    def add(self, name, quantity, price):
        self.items[name] = (quantity, price)

    def remove(self, name):
        if name not in self.items:
            raise KeyError(name)
        del self.items[name]

    def total(self):
        return sum(q * p for q, p in self.items.values())

    def describe(self, name):
        quantity, price = self.items[name]
        return f"{name}: {quantity} x {price:.2f}"
'''

TESTS = '''\
import pytest

from shapes import Inventory, Shape, area, perimeter, scale


def make_rectangle(width=4, height=5):
    return Shape("rectangle", width, height)


@pytest.fixture
def stocked():
    inventory = Inventory()
    inventory.add("bolt", 3, 0.25)
    inventory.add("nut", 10, 0.1)
    return inventory


def test_area_rectangle():
    shape = make_rectangle()
    result = area(shape)
    assert result == 20


def test_area_triangle():
    shape = Shape("triangle", 6, 4)
    result = area(shape)
    assert result == 12


def test_perimeter():
    shape = make_rectangle(width=2, height=3)
    assert perimeter(shape) == 10


def test_scale_doubles_both_sides():
    shape = scale(make_rectangle(), 2)
    assert shape.width == 8
    assert shape.height == 10


def test_inventory_total(stocked):
    assert stocked.total() == pytest.approx(1.75)


def test_inventory_describe(stocked):
    text = stocked.describe("bolt")
    assert text == "bolt: 3 x 0.25"


def test_remove_missing_item(stocked):
    with pytest.raises(KeyError):
        stocked.remove("washer")


class TestInventoryChanges:
    def setup_method(self):
        self.inventory = Inventory()
        self.inventory.add("gear", 2, 1.5)

    def test_add_replaces_quantity(self):
        self.inventory.add("gear", 5, 1.5)
        assert self.inventory.total() == 7.5

    def test_remove_then_total(self):
        self.inventory.remove("gear")
        assert self.inventory.total() == 0
'''

# (test function, [(old line text, new line text), ...]); the changed lines are the faulty lines.
CORPUS_BREAKS = [
    ("test_area_rectangle", [("    assert result == 20", "    assert result == 21")]),
    ("test_area_triangle", [('    shape = Shape("triangle", 6, 4)', '    shape = Shape("triangle", 6, 5)')]),
    ("test_perimeter", [("    shape = make_rectangle(width=2, height=3)", "    shape = make_rectangle(width=3, height=3)")]),
    ("test_scale_doubles_both_sides", [("    assert shape.width == 8", "    assert shape.height == 8")]),
    ("test_inventory_total", [('    inventory.add("bolt", 3, 0.25)', '    inventory.add("bolt", 4, 0.25)')]),
    ("test_inventory_describe", [('    assert text == "bolt: 3 x 0.25"', '    assert text == "bolt: 3 x 0.250"')]),
    ("test_remove_missing_item", [("    with pytest.raises(KeyError):", "    with pytest.raises(ValueError):")]),
    ("TestInventoryChanges::test_add_replaces_quantity",
     [('        self.inventory.add("gear", 5, 1.5)', '        self.inventory.add("gear", 5, 2.5)')]),
    ("TestInventoryChanges::test_remove_then_total", [('        self.inventory.remove("gear")', '        self.inventory.remove("Gear")')]),
    ("test_area_rectangle", [("    shape = make_rectangle()", "    shape = make_rectangle(height=6)")]),
    ("test_perimeter", [("    assert perimeter(shape) == 10", "    assert perimeter(shape) == 12")]),
]

# The new failure: a setup literal again, in a test the corpus has no case for.
QUERY_BREAK = ("test_scale_doubles_both_sides",
               [("    shape = scale(make_rectangle(), 2)", "    shape = scale(make_rectangle(), 3)")])


def apply(source, changes):
    lines = source.split("\n")
    faulty = []
    for old, new in changes:
        index = lines.index(old)  # raises if the demo's own data drifted
        lines[index] = new
        faulty.append(index + 1)
    return "\n".join(lines), faulty


def run_pytest(project, test_source, node):
    """Runs one test with the real pytest; returns the failure text from its JUnit XML."""
    with open(os.path.join(project, "tests", "test_shapes.py"), "w") as f:
        f.write(test_source)
    junit = os.path.join(project, "report.xml")
    cmd = [sys.executable, "-B", "-m", "pytest", "-q", "--tb=short", "-p", "no:cacheprovider", f"--junitxml={junit}",
           f"tests/test_shapes.py::{node}" if node else "tests/test_shapes.py"]
    env = dict(os.environ, PYTHONPATH=project, PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True)
    if not os.path.exists(junit):
        raise SystemExit(f"demo_corpus: pytest wrote no JUnit XML (is pytest installed for {sys.executable}?)\n"
                         f"{proc.stdout}\n{proc.stderr}")
    tree = ET.parse(junit)
    os.remove(junit)
    for case in tree.iter("testcase"):
        for tag in ("failure", "error"):
            element = case.find(tag)
            if element is not None:
                return element.text or element.get("message", "")
    if proc.returncode == 0:
        return None
    raise SystemExit(f"demo_corpus: pytest failed without a failing test case:\n{proc.stdout}\n{proc.stderr}")


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: demo_corpus.py OUT_DIR")
    out = sys.argv[1]
    project = os.path.join(out, "project")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(project, "tests"))
    with open(os.path.join(project, "shapes.py"), "w") as f:
        f.write(LIBRARY)
    # The clean suite passes: every failure below comes from the recorded break alone.
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(project, os.path.join(tmp, "p"))
        if run_pytest(os.path.join(tmp, "p"), TESTS, "") is not None:
            raise SystemExit("demo_corpus: the clean sample suite does not pass")
    cases = []
    for number, (node, changes) in enumerate(CORPUS_BREAKS):
        source, faulty = apply(TESTS, changes)
        message = run_pytest(project, source, node)
        if message is None:
            raise SystemExit(f"demo_corpus: break {number} of {node} did not make it fail")
        cases.append({
            "id": f"demo-{number:02d}", "project": "spark/demo", "test_id": f"tests/test_shapes.py::{node}",
            "language": "python", "failure_time": f"2026-11-{number + 1:02d}T09:00:00Z", "error_message": message,
            "files": [{"path": "tests/test_shapes.py", "content": source}],
            "faulty_lines": [{"path": "tests/test_shapes.py", "line": line} for line in faulty],
            "faulty_commit": None, "fixed_commit": None, "source": "seeded"})
    with open(os.path.join(out, "cases.jsonl"), "w") as f:
        for case in cases:
            f.write(json.dumps(case) + "\n")
    node, changes = QUERY_BREAK
    source, faulty = apply(TESTS, changes)
    message = run_pytest(project, source, node)
    os.makedirs(os.path.join(out, "query", "tests"))
    with open(os.path.join(out, "query", "tests", "test_shapes.py"), "w") as f:
        f.write(source)
    with open(os.path.join(out, "query", "failure.txt"), "w") as f:
        f.write(message)
    with open(os.path.join(out, "query", "truth.json"), "w") as f:
        json.dump({"test_id": f"tests/test_shapes.py::{node}", "faulty_lines": faulty}, f)
    with open(os.path.join(project, "tests", "test_shapes.py"), "w") as f:
        f.write(TESTS)
    print(f"demo_corpus: {len(cases)} labelled cases from real pytest runs in {out}/cases.jsonl; "
          f"new failure in {out}/query/")


if __name__ == "__main__":
    main()
