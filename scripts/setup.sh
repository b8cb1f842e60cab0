#!/usr/bin/env bash
# Installs what spark needs to build and test on Debian 12, and fetches the pinned
# tree-sitter Python grammar. Idempotent: a second run with everything present only checks.
#
#   scripts/setup.sh            # as root (or with sudo available)
#   scripts/setup.sh --tests    # also what only the tests need (PostgreSQL 15, whose server the store tests start;
#                               # Debian's chromium, for the HTML report check; clang-16 with libFuzzer and libomp,
#                               # for scripts/fuzz.sh)
#
# Environment: SPARK_SKIP_APT=1 skips the Debian packages (for machines set up by hand).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
grammar_dir="$root/third_party/tree-sitter-python"
grammar_version=0.23.6
grammar_sha1=807e50c415a761c613614f902432f563e85b51b6

packages=(libgit2-dev libfaiss-dev libcurl4-openssl-dev nlohmann-json3-dev libpcre2-dev
          libtree-sitter-dev libcli11-dev libsqlite3-dev libpugixml-dev libcpp-httplib-dev
          libgtest-dev libgmock-dev libbenchmark-dev libtomlplusplus-dev pkg-config cmake make g++
          python3 python3-pytest git ca-certificates gnuplot-nox libpq-dev)
if [ "${1:-}" = --tests ]; then
    packages+=(chromium clang-16 libclang-rt-16-dev libomp-16-dev postgresql-15)
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

# The Python grammar: npm pack (runs no install scripts), checksum, ABI 14 check.
if [ -f "$grammar_dir/.version" ] && [ "$(cat "$grammar_dir/.version")" = "$grammar_version" ]; then
    say "tree-sitter-python $grammar_version present"
else
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    say "fetching tree-sitter-python@$grammar_version with npm pack"
    (cd "$tmp" && npm pack --silent "tree-sitter-python@$grammar_version" >/dev/null)
    tarball="$tmp/tree-sitter-python-$grammar_version.tgz"
    [ -f "$tarball" ] || { say "npm pack produced no $tarball"; exit 1; }
    got=$(sha1sum "$tarball" | cut -d' ' -f1)
    if [ "$got" != "$grammar_sha1" ]; then
        say "checksum mismatch for $tarball: got $got, want $grammar_sha1"; exit 1
    fi
    tar -xzf "$tarball" -C "$tmp"
    if ! grep -q '^#define LANGUAGE_VERSION 14$' "$tmp/package/src/parser.c"; then
        say "tree-sitter-python $grammar_version: parser.c is not language ABI 14"; exit 1
    fi
    rm -rf "$grammar_dir.new"
    mkdir -p "$grammar_dir.new"
    cp -r "$tmp/package/src" "$grammar_dir.new/src"
    cp "$tmp/package/LICENSE" "$grammar_dir.new/LICENSE" 2>/dev/null || true
    echo "$grammar_version" > "$grammar_dir.new/.version"
    rm -rf "$grammar_dir"
    mv "$grammar_dir.new" "$grammar_dir"
    say "tree-sitter-python $grammar_version installed in third_party/ (checksum and ABI 14 verified)"
fi
