#!/usr/bin/env bash
# Installs what spark needs to build and test on Debian 12, and fetches the pinned
# tree-sitter grammars (Python, Java, JavaScript, TypeScript). Idempotent: a second run with everything present only checks.
#
#   scripts/setup.sh            # as root (or with sudo available)
#   scripts/setup.sh --tests    # also what only the tests need (PostgreSQL 15, whose server the store tests start;
#                               # Debian's chromium, for the HTML report check, with chromium-driver and python3-selenium,
#                               # for the audit clicked in a browser; clang-16 with libFuzzer and libomp,
#                               # for scripts/fuzz.sh; clang-tidy-16, for scripts/tidy.sh; a JDK and JUnit 5, for the
#                               # real Java project's tests; python3-jsonschema, which validates real outputs against
#                               # docs/schemas as a user's validator does; python3-numpy, with which
#                               # scripts/tiny_gguf.py writes the real LLM server's tiny model)
#   scripts/setup.sh --corpus   # --tests, and the Java libraries scripts/lang_corpus.py puts on a project's class
#                               # path (assertj, mockito, commons-lang3, commons-collections4, hamcrest, JUnit 4)
#
# Environment: SPARK_SKIP_APT=1 skips the Debian packages (for machines set up by hand).
set -euo pipefail

mode=${1:-}
case "$mode" in ""|--tests|--corpus) ;; *) echo "usage: scripts/setup.sh [--tests|--corpus]" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)

packages=(libgit2-dev libfaiss-dev libcurl4-openssl-dev nlohmann-json3-dev libsimdjson-dev libpcre2-dev
          libtree-sitter-dev libcli11-dev libsqlite3-dev libexpat1-dev libcpp-httplib-dev
          libgtest-dev libgmock-dev libbenchmark-dev libtomlplusplus-dev pkg-config cmake make g++
          python3 python3-pytest git ca-certificates gnuplot-nox libpq-dev liblapack-dev libblas-dev
          libgfortran-12-dev zlib1g-dev)
if [ "$mode" = --tests ] || [ "$mode" = --corpus ]; then
    packages+=(chromium clang-16 libclang-rt-16-dev libomp-16-dev clang-tidy-16 postgresql-15 default-jdk-headless junit5
              python3-jsonschema python3-yaml python3-numpy python3-pytest-xdist python3-pip python3-setuptools
              dpkg-dev help2man chromium-driver python3-selenium)
fi
if [ "$mode" = --corpus ]; then
    packages+=(libassertj-core-java libmockito-java libcommons-lang3-java libcommons-collections4-java libhamcrest-java
               junit4 libjsr305-java libgoogle-gson-java)
fi

say() { printf 'setup: %s\n' "$*" >&2; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        say "need root to run: $*"; exit 1; fi
}

if [ "${SPARK_SKIP_APT:-0}" != 1 ]; then
    missing=()
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    # npm: machines with NodeSource's nodejs already carry npm and conflict with Debian's package.
    command -v npm >/dev/null || missing+=(npm)
    if [ ${#missing[@]} -gt 0 ]; then
        say "installing Debian packages: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        as_root apt-get update -qq
        as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        say "Debian packages present"
    fi
fi

# The grammars: npm pack (runs no install scripts), the registry's sha1 checked, language ABI 14 checked (the Debian
# tree-sitter library loads 13-14), unpacked into third_party/NAME/ through a temporary folder and a rename.
#   fetch_grammar NAME VERSION SHA1 DIR...   (DIRs of the package to keep; each DIR/src/parser.c is checked)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fetch_grammar() {
    local name=$1 version=$2 sha1=$3; shift 3
    local dir="$root/third_party/$name"
    if [ -f "$dir/.version" ] && [ "$(cat "$dir/.version")" = "$version" ]; then
        say "$name $version present"; return
    fi
    say "fetching $name@$version with npm pack"
    local work="$tmp/$name"
    mkdir -p "$work"
    (cd "$work" && npm pack --silent "$name@$version" >/dev/null)
    local tarball="$work/$name-$version.tgz"
    [ -f "$tarball" ] || { say "npm pack produced no $tarball"; exit 1; }
    local got
    got=$(sha1sum "$tarball" | cut -d' ' -f1)
    if [ "$got" != "$sha1" ]; then
        say "checksum mismatch for $tarball: got $got, want $sha1"; exit 1
    fi
    tar -xzf "$tarball" -C "$work"
    rm -rf "$dir.new"
    mkdir -p "$dir.new"
    local sub
    for sub in "$@"; do
        if [ -f "$work/package/$sub/parser.c" ] && ! grep -q '^#define LANGUAGE_VERSION 14$' "$work/package/$sub/parser.c"; then
            say "$name $version: $sub/parser.c is not language ABI 14"; exit 1
        fi
        mkdir -p "$(dirname "$dir.new/$sub")"
        cp -r "$work/package/$sub" "$dir.new/$sub"
    done
    cp "$work/package/LICENSE" "$dir.new/LICENSE" 2>/dev/null || true
    echo "$version" > "$dir.new/.version"
    rm -rf "$dir"
    mv "$dir.new" "$dir"
    say "$name $version installed in third_party/ (checksum and ABI 14 verified)"
}
fetch_grammar tree-sitter-python 0.23.6 807e50c415a761c613614f902432f563e85b51b6 src
fetch_grammar tree-sitter-java 0.23.5 fb150fdaa9c852b3d71ba3144109008ac6a47ac2 src
fetch_grammar tree-sitter-javascript 0.23.1 4e49fa3ad5f996b3ac5cf4f78d6c5dd876788faf src
fetch_grammar tree-sitter-typescript 0.23.2 70bc615a2f664a8e9c87c533382beca587f28ab3 typescript/src tsx/src common

# For the tests only: the JavaScript test tools, pinned by tests/js-tools/package-lock.json (npm ci checks every
# package's integrity hash): Jest and jest-junit, for the real JavaScript project's tests (and scripts/lang_corpus.py's
# JavaScript runs), and the official MCP TypeScript SDK, whose client tests `spark mcp`. Installed into
# third_party/js-test-tools/.
if [ "$mode" = --tests ] || [ "$mode" = --corpus ]; then
    tools="$root/third_party/js-test-tools"
    lock_sum=$(sha1sum "$root/tests/js-tools/package-lock.json" | cut -d' ' -f1)
    if [ -f "$tools/.lock-sha1" ] && [ "$(cat "$tools/.lock-sha1")" = "$lock_sum" ] && [ -x "$tools/node_modules/.bin/jest" ] \
       && [ -f "$tools/node_modules/@modelcontextprotocol/sdk/package.json" ]; then
        say "JavaScript test tools (tests/js-tools: Jest, jest-junit, the MCP SDK) present"
    else
        say "installing Jest, jest-junit and the MCP SDK with npm ci (tests/js-tools/package-lock.json)"
        rm -rf "$tools.new"
        mkdir -p "$tools.new"
        cp "$root/tests/js-tools/package.json" "$root/tests/js-tools/package-lock.json" "$tools.new/"
        (cd "$tools.new" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
        echo "$lock_sum" > "$tools.new/.lock-sha1"
        rm -rf "$tools"
        mv "$tools.new" "$tools"
        say "JavaScript test tools installed in third_party/js-test-tools/"
    fi
fi
