#!/usr/bin/env python3
"""Every program spark's scripts, hooks, tests and benches call must come from a package that scripts/setup.sh
installs (or one of their dependencies), or from Debian's Essential set, which every Debian root has.

The cheap, static half of scripts/check_fresh_debian.sh, run by CI on every change. It finds the programs called:
  - in shell files (scripts/, hooks/, bench/*.sh, .ci/run): the word at each command position;
  - in C++ sources: the command words of string literals (what std::system, popen and /bin/sh -c run);
  - in Python scripts: the first item of subprocess calls' argument lists;
keeps the words that name a program on this machine (shell builtins and keywords are not programs), finds the
Debian package that owns each (dpkg -S), and checks it against setup.sh's packages with their Depends and
Pre-Depends (apt-cache depends --recurse) and against the Essential set. A program called but not installed here
cannot be checked: it is listed as unresolved (a warning, since a word in a message also looks like a command).

Usage: scripts/check_tools.py [--verbose]      exit 0 when every program is covered, 1 otherwise.
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Words at a command position that are not programs: shell builtins and keywords, and words the scan meets in
# messages and Python snippets (a word here is never checked).
NOT_PROGRAMS = set("""
. : [ alias bg bind break builtin case cd command compgen complete continue declare dirs disown do done echo elif else
enable esac eval exec exit export false fc fg fi for function getopts hash help history if in jobs kill let local
logout popd printf pushd pwd read readonly return select set shift shopt source suspend test then time times trap true
type typeset ulimit umask unalias unset until wait while
""".split())

SHELL_FILES = ["scripts/*.sh", "hooks/*.sh", "bench/*.sh", ".ci/run"]
CPP_FILES = ["src/*/*.cpp", "src/*/*.h", "miner/*.cpp", "cli/*.cpp", "localizer/*.cpp", "localizer/eval/*.cpp", "tests/*.cpp", "tests/*.h",
             "bench/*.cpp"]
PY_FILES = ["scripts/*.py", "tests/*.py"]

WORD = r"([A-Za-z0-9_][A-Za-z0-9_.+-]*|/(?:usr/)?s?bin/[A-Za-z0-9_.+-]+)"
SHELL_CMD = re.compile(r"(?:^|[;&|(`]|\$\(|\b(?:then|do|else|exec|time|as_root|xargs|!)\s)\s*" + WORD)
CPP_LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
CPP_COMMAND_STATEMENT = re.compile(r"\b(?:cmd|command|script)\s*\+?=|\b(?:system|popen|execl|execlp|execvp|run_command)\(")
CPP_CMD = re.compile(r"(?:^|\|\s|&&\s|;\s|\$\()\s*" + WORD)
PY_CMD = re.compile(r"subprocess\.\w+\(\s*\[\s*[\"']([^\"']+)[\"']")


# Programs that other programs run for us: nothing in our files names them, and a fresh root lacks them unless
# setup.sh installs them (Debian's cmake only recommends make).
IMPLICIT = {
    "make": "cmake's default generator (Unix Makefiles)",
    "cc": "cmake's C compiler (the tree-sitter grammar is C)",
    "c++": "cmake's C++ compiler",
    "ld": "the compilers' linker",
    "pkg-config": "CMake's FindPkgConfig",
    "objdump": "CMakeLists.txt (the sonames of the libraries opened when needed)",
    "node": "npm",
}


def files(patterns):
    for p in patterns:
        yield from sorted(ROOT.glob(p))


def strip_comment(line):
    # A '#' that starts a word starts a comment (good enough for our scripts: no '#' inside quoted words).
    m = re.search(r"(^|\s)#", line)
    return line[: m.start()] if m else line


def calls():
    """(program word, 'file:line') for every call found."""
    for f in files(SHELL_FILES):
        # Array values (packages=(a b c) over several lines) are not commands: blank them, keeping the line count.
        text = re.sub(r"\b\w+\+?=\([^)]*\)", lambda m: "\n" * m.group(0).count("\n"), f.read_text())
        for n, line in enumerate(text.splitlines(), 1):
            line = strip_comment(line)
            # Assignments before a command (X=1 cmd) and redirections are not the command.
            line = re.sub(r"\b[A-Za-z_][A-Za-z0-9_]*=(?=\$\()", "", line)
            line = re.sub(r"\b[A-Za-z_][A-Za-z0-9_]*=[^\s$]*\s", " ", line)
            for m in SHELL_CMD.finditer(line):
                yield m.group(1), f"{f.relative_to(ROOT)}:{n}"
    for f in files(CPP_FILES):
        # Only the statements that build or run a command: a string literal elsewhere is a message.
        span_left = False
        for n, line in enumerate(f.read_text().splitlines(), 1):
            if line.lstrip().startswith("//"):
                continue
            starts = CPP_COMMAND_STATEMENT.search(line) is not None
            if starts or span_left:
                span_left = not line.rstrip().endswith((";", "{", "}"))
            for lit in CPP_LITERAL.finditer(line):
                text = lit.group(1)
                if starts or span_left or text.startswith(("/usr/bin/", "/bin/", "#!/bin/sh")):
                    for part in text.split("\\n"):
                        for m in CPP_CMD.finditer(part):
                            yield m.group(1), f"{f.relative_to(ROOT)}:{n}"
    for f in files(PY_FILES):
        for n, line in enumerate(f.read_text().splitlines(), 1):
            for m in PY_CMD.finditer(line):
                yield m.group(1), f"{f.relative_to(ROOT)}:{n}"


def self_installed():
    """file → the packages that file installs itself (`apt-get install ... PKG`): tools only that script needs."""
    out = {}
    for f in files(SHELL_FILES):
        for m in re.finditer(r"apt-get install([^\n;|&)]*)", f.read_text()):
            words = [w for w in m.group(1).split() if not w.startswith(("-", ">", "$", "/")) and w != "install"]
            out.setdefault(str(f.relative_to(ROOT)), set()).update(words)
    return out


def setup_packages():
    text = (ROOT / "scripts/setup.sh").read_text()
    out = set()
    for m in re.finditer(r"\b(?:packages|missing)\+?=\(([^)]*)\)", text):
        out.update(w for w in m.group(1).split() if re.fullmatch(r"[a-z0-9][a-z0-9.+-]+", w))
    return out


def closure(packages):
    """The packages with every Depends and Pre-Depends, recursively (virtual packages resolve to providers)."""
    r = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
                        "--no-breaks", "--no-replaces", "--no-enhances", *sorted(packages)],
                       capture_output=True, text=True)
    out = set(packages)
    for line in r.stdout.splitlines():
        line = line.strip()
        m = re.match(r"(?:\|?(?:Pre)?Depends:\s*)?<?([a-z0-9][a-z0-9.+-]+)(?::[a-z0-9]+)?>?$", line)
        if m:
            out.add(m.group(1))
    return out


def owner(path):
    candidates = {str(path), os.path.realpath(path)}
    for c in list(candidates):
        if c.startswith("/usr/"):
            candidates.add(c[4:])
        else:
            candidates.add("/usr" + c)
    for c in sorted(candidates):
        r = subprocess.run(["dpkg", "-S", c], capture_output=True, text=True)
        if r.returncode == 0:
            for line in r.stdout.splitlines():
                pkg, _, f = line.partition(": ")
                if f.strip() == c and "diversion" not in line:
                    return pkg.split(":")[0].split(",")[0].strip()
    return None


# Where programs are looked up: Debian's folders only (a program in /usr/local or a version manager's folder is not
# something a fresh Debian root has).
DEBIAN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"

# debootstrap's minbase root: the Essential set and apt.
MINBASE_EXTRA = {"apt"}


def essential(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Essential}", pkg], capture_output=True, text=True)
    return r.stdout.strip() == "yes"


def main():
    verbose = "--verbose" in sys.argv
    found = {}
    for word, where in calls():
        if word in NOT_PROGRAMS or word.endswith(".py") or word.endswith(".sh"):
            continue
        found.setdefault(word, []).append(where)
    for word, why in IMPLICIT.items():
        found.setdefault(word, []).append(why)
    setup = setup_packages()
    covered = closure(setup)
    own = self_installed()
    bad, unresolved = [], []
    for word in sorted(found):
        path = word if word.startswith("/") else shutil.which(word, path=DEBIAN_PATH)
        if not path or not os.path.exists(path):
            unresolved.append(word)
            continue
        pkg = owner(path)
        if pkg is None:
            bad.append(f"{word} ({path}) belongs to no Debian package, called at {', '.join(found[word][:3])}")
            continue
        if essential(pkg):
            why = "Essential"
        elif pkg in MINBASE_EXTRA:
            why = "in every minbase root"
        elif pkg in setup:
            why = "setup.sh"
        elif pkg in covered:
            why = "a dependency of setup.sh's packages"
        elif all(pkg in own.get(where.split(":")[0], set()) for where in found[word]):
            why = "installed by the only script that calls it"
        else:
            bad.append(f"{word} comes from {pkg}, which setup.sh does not install; called at "
                       f"{', '.join(found[word][:3])}")
            continue
        if verbose:
            print(f"ok  {word:14} {pkg:22} {why}")
    if verbose and unresolved:
        print("not installed on this machine, not checked (words that look like commands): " + " ".join(unresolved))
    for b in bad:
        print("check_tools: " + b, file=sys.stderr)
    print(f"check_tools: {len(found) - len(unresolved)} programs called, {len(bad)} not installed by setup.sh")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
