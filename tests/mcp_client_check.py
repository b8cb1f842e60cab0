#!/usr/bin/env python3
"""`spark mcp` driven by the official MCP TypeScript SDK's client (tests/mcp/client.mjs), against a knowledge base
made the way a team makes one: a real git repository, real pytest at its default settings, `spark record` after
each run. A product rename breaks a test; the test's fix is recorded and learnt; the same rename then breaks another
test, which the client localizes, asks about, and records through the server.

Usage: mcp_client_check.py SPARK_BINARY      (Node and the SDK come from scripts/setup.sh --tests)
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SDK = os.path.join(SOURCE, "third_party", "js-test-tools", "node_modules", "@modelcontextprotocol", "sdk")


def run(command, cwd, env=None):
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, errors="replace")


def git(repo, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@x", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@x")
    r = run(["git", *args], repo, env)
    if r.returncode != 0:
        sys.exit("git %s: %s" % (" ".join(args), r.stderr))


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


SHOP = "class Order:\n    def __init__(self, prices):\n        self.prices = prices\n        self.total = sum(prices)\n"
ORDERS = ("from shop import Order\n\n\ndef test_order_total():\n    order = Order([2, 3])\n"
          "    assert order.%s == 5\n\n\ndef test_order_items():\n    assert Order([1]).prices == [1]\n")
REFUNDS = ("from shop import Order\n\n\ndef make_refund():\n    return Order([1, 1])\n\n\n"
           "def test_refund_total():\n    refund = make_refund()\n    assert refund.total_price == 2\n")


def main():
    spark = os.path.abspath(sys.argv[1])
    if not os.path.isdir(SDK) or not shutil.which("node"):
        sys.exit("the MCP SDK or Node is missing: scripts/setup.sh --tests installs them (third_party/js-test-tools)")
    with tempfile.TemporaryDirectory() as tmp:
        repo = os.path.join(tmp, "shop")
        os.makedirs(repo)
        env = dict(os.environ, SPARK_KB=os.path.join(repo, ".spark"))
        env.pop("SPARK_LLM_BASE_URL", None)
        git(repo, "init", "-q", "-b", "main")
        write(os.path.join(repo, ".gitignore"), ".spark/\nreport.xml\n")
        write(os.path.join(repo, "conftest.py"), "")
        write(os.path.join(repo, "shop.py"), SHOP)

        def commit_and_record(message):
            git(repo, "add", "-A")
            git(repo, "commit", "-q", "-m", message)
            tested = run(["/usr/bin/python3", "-B", "-m", "pytest", "-p", "no:cacheprovider",
                          "--junitxml=report.xml", "tests"], repo)
            r = run([spark, "record", "--junit", "report.xml", "--no-localize"], repo, env)
            if r.returncode != 0:
                sys.exit("spark record: " + r.stderr)
            return tested.stdout

        write(os.path.join(repo, "tests", "test_orders.py"), ORDERS % "total_price")
        commit_and_record("orders: a test of the total, written against the old name")
        write(os.path.join(repo, "tests", "test_orders.py"), ORDERS % "total")
        commit_and_record("orders: total_price is total now")
        write(os.path.join(repo, "tests", "test_refunds.py"), REFUNDS)
        output = commit_and_record("refunds")
        if "AttributeError" not in output:
            sys.exit("pytest did not fail as the scenario needs:\n" + output)
        cases = run([spark, "export"], repo, env)
        if cases.stdout.count("\n") != 1:
            sys.exit("the fix was not learnt as one case: " + cases.stdout + cases.stderr)
        scenario = {"test_file": "tests/test_refunds.py", "error": output,
                    "test_id": "tests/test_refunds.py::test_refund_total", "faulty_line": 10,
                    "fixed_test_id": "tests/test_orders.py::test_order_total", "fix_added": "order.total == 5",
                    "fix_token": "refund.total ==", "report": "report.xml",
                    "verify_command": "/usr/bin/python3 -B -m pytest -p no:cacheprovider {test_id}"}
        scenario_file = os.path.join(tmp, "scenario.json")
        write(scenario_file, json.dumps(scenario))
        client = run(["node", os.path.join(SOURCE, "tests", "mcp", "client.mjs"), spark, repo, scenario_file], repo,
                     env)
        print(client.stdout, end="")
        if client.returncode != 0:
            print(client.stderr, end="")
            sys.exit(1)
        if run(["git", "status", "--porcelain"], repo).stdout.strip():
            sys.exit("the server changed the work tree: " + run(["git", "status", "--porcelain"], repo).stdout)


if __name__ == "__main__":
    main()
