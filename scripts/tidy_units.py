#!/usr/bin/env python3
"""The translation units scripts/tidy.sh checks, one "FOLDER PATH" line each, from a build's compile_commands.json.

    scripts/tidy_units.py BUILD/compile_commands.json ROOT

A unit is one of spark's own source files (src/, localizer/, miner/, cli/), or a unity batch of a -DSPARK_UNITY=ON
build whose every file is one of them. FOLDER is "cli" for a unit of cli/ (held to cli/.clang-tidy), else "root".
Third-party sources (tree-sitter grammars) are not units.
"""
import json
import os
import re
import sys

OWN = re.compile(r"^(src|localizer|miner|cli)/.*\.cpp$")
BATCH = re.compile(r"/Unity/unity_\d+_cxx\.cxx$")


def main():
    commands, root = sys.argv[1], os.path.realpath(sys.argv[2])
    with open(commands, encoding="utf-8") as f:
        files = sorted({os.path.realpath(os.path.join(e.get("directory", ""), e["file"])) for e in json.load(f)})
    for unit in files:
        if BATCH.search(unit):
            with open(unit, encoding="utf-8") as f:
                included = re.findall(r'#include "([^"]+)"', f.read())
            sources = [os.path.relpath(os.path.realpath(s), root) for s in included]
        else:
            sources = [os.path.relpath(unit, root)]
        if not sources or not all(OWN.match(s) for s in sources):
            continue
        print(("cli " if all(s.startswith("cli/") for s in sources) else "root ") + unit)


if __name__ == "__main__":
    main()
