#!/usr/bin/env python3
"""Checks that src/ keeps its layers (docs/ARCHITECTURE.md): a file includes headers of its own layer and of the
layers below it only, and src/ includes nothing of localizer/, miner/ or cli/; above src/ the order is miner,
localizer, evaluation (localizer/eval/), cli/: the localizer includes nothing of the evaluation, and the miner nothing of
either. Every include names its folder ("miner/recording.h", "base/text.h"). CMakeLists.txt links the layers in the
same order; this catches the #include that would make a lower layer need a higher one before the linker does.

Usage: scripts/check_layers.py      exit 0 when every #include keeps the order, 1 otherwise (each breach listed).
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Each layer with the layers it may include (besides itself).
BELOW = {
    "base": set(),
    "code": {"base"},
    "formats": {"base", "code"},
    "store": {"base", "code", "formats"},
    "retrieval": {"base", "code", "formats"},
    "llm": {"base", "code", "formats", "store"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def main():
    breaches = []
    for layer in BELOW:
        folder = ROOT / "src" / layer
        if not folder.is_dir():
            breaches.append(f"src/{layer}/ is missing")
            continue
        for f in sorted(folder.iterdir()):
            if f.suffix not in (".h", ".cpp"):
                continue
            for n, line in enumerate(f.read_text().splitlines(), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = m.group(1)
                head = target.split("/")[0] if "/" in target else None
                if head is None:
                    breaches.append(f"src/{layer}/{f.name}:{n}: \"{target}\" names no layer (write \"<layer>/{target}\")")
                elif head not in BELOW:
                    breaches.append(f"src/{layer}/{f.name}:{n}: \"{target}\" is outside src/ (src/ includes no "
                                    "localizer/, miner/ or cli/ header)")
                elif head != layer and head not in BELOW[layer]:
                    breaches.append(f"src/{layer}/{f.name}:{n}: \"{target}\": {layer} may include only "
                                    f"{', '.join(sorted(BELOW[layer])) or 'itself'}")
    # Above src/: the evaluation (localizer/eval/, target spark_eval) builds on the localizer, the localizer on the
    # miner, never the reverse; cli/ is above them all. Every include names its folder from the project root
    # ("miner/recording.h") or src/ ("base/text.h"), so a reader sees where a header lives.
    above = (("cli", ()),
             ("localizer/eval", ("cli/",)),
             ("localizer", ("cli/", "localizer/eval/"), "the localizer does not include the evaluation or cli/"),
             ("miner", ("cli/", "localizer/"), "the miner does not include the localizer, the evaluation or cli/"))
    for entry in above:
        folder, banned = ROOT / entry[0], entry[1]
        why = entry[2] if len(entry) > 2 else f"{entry[0]}/ does not include cli/"
        for f in sorted(folder.glob("*.[hc]*")):
            for n, line in enumerate(f.read_text().splitlines(), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = m.group(1)
                if banned and target.startswith(banned):
                    breaches.append(f"{f.relative_to(ROOT)}:{n}: \"{target}\": {why}")
                elif "/" not in target and not target.endswith(".inc"):
                    breaches.append(f"{f.relative_to(ROOT)}:{n}: \"{target}\" names no folder (write "
                                    f"\"{entry[0].split('/')[0]}/...\" or a src/ layer's)")
    stray = [p.name for p in (ROOT / "src").iterdir() if p.is_file()]
    if stray:
        breaches.append("files outside the layer folders of src/: " + ", ".join(sorted(stray)))
    for b in breaches:
        print(b)
    if not breaches:
        print(f"src/: {len(BELOW)} layers, every #include keeps the order")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
