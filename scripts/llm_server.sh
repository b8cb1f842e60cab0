#!/usr/bin/env bash
# A real LLM server for spark's tests: llama.cpp's own OpenAI-compatible `llama-server`, built from the llama.cpp sources
# that npm's node-llama-cpp package carries, with a tiny generated model (scripts/tiny_gguf.py). No trained model can
# be had on our machines; the server (HTTP, tokenizer, context limits, JSON-schema grammars, embeddings) is the real
# one, and its model's text is gibberish (docs/LLM.md, "The real server in the tests").
#
#   scripts/llm_server.sh build            # fetch (pinned, checksummed), build, make the model; idempotent
#   scripts/llm_server.sh path             # print the cache folder if it is complete (else exit 1)
#   scripts/llm_server.sh test [BUILD]     # build if needed, then run the real-server tests against BUILD/spark
#                                          # (BUILD defaults to build/; run scripts/setup.sh --tests and build first)
#
# The cache lives outside the clone: SPARK_LLM_SERVER_CACHE, default ~/.cache/spark/llama-server-<commit>. Once it is
# there, the test command (scripts/test.sh) runs the real-server tests too; where it is not, they are skipped and this
# command runs them. Needs npm, git, cmake, g++ and Debian's python3-numpy and python3-yaml (scripts/setup.sh --tests).
# The build takes about 20 minutes of two cores (docs/LLM.md); ccache is used when present.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

package=node-llama-cpp
version=3.21.1
package_sha1=f7579ace3d45c8e93856cebbd8671fa43c2eef1b  # the registry's dist.shasum
llama_commit=80fb11ac73e66d89eae2c6a91d8a77428fa733ed   # the commit gitRelease.bundle holds
model_sha256=25836ea6ca8971eb91ea4e473aeb6d5ba8a682335bdd6fe12964fa0cd2d5670f  # tiny_gguf.py's file, byte for byte
cache=${SPARK_LLM_SERVER_CACHE:-$HOME/.cache/spark/llama-server-${llama_commit:0:7}}

work=""
say() { printf 'llm_server: %s\n' "$*" >&2; }

complete() {
    [ -x "$cache/bin/llama-server" ] && [ -f "$cache/tiny.gguf" ] && [ -f "$cache/.complete" ]
}

build() {
    if complete; then say "present in $cache"; return; fi
    command -v npm >/dev/null || { say "needs npm (scripts/setup.sh)"; exit 1; }
    /usr/bin/python3 -c 'import numpy, yaml' 2>/dev/null ||
        { say "needs Debian's python3-numpy and python3-yaml (scripts/setup.sh --tests)"; exit 1; }
    mkdir -p "$(dirname "$cache")"
    work=$(mktemp -d "$(dirname "$cache")/.llama-build.XXXXXX")
    trap 'rm -rf "${work:-}"' EXIT
    local began=$SECONDS
    say "fetching $package@$version with npm pack"
    (cd "$work" && npm pack --silent "$package@$version" >/dev/null)
    local tarball="$work/$package-$version.tgz" got
    [ -f "$tarball" ] || { say "npm pack produced no $tarball"; exit 1; }
    got=$(sha1sum "$tarball" | cut -d' ' -f1)
    [ "$got" = "$package_sha1" ] || { say "checksum mismatch for $tarball: got $got, want $package_sha1"; exit 1; }
    tar -xzf "$tarball" -C "$work" package/llama/gitRelease.bundle
    git clone -q "$work/package/llama/gitRelease.bundle" "$work/llama.cpp" 2>/dev/null
    got=$(git -C "$work/llama.cpp" rev-parse HEAD)
    [ "$got" = "$llama_commit" ] || { say "the bundle holds $got, not $llama_commit"; exit 1; }
    rm -f "$tarball"

    say "building llama-server (llama.cpp ${llama_commit:0:7}, CPU only, static)"
    local launcher=()
    command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    # Both UI flags off, or the build downloads its web UI; GGML_NATIVE off for a binary any x86-64 runs.
    # CCACHE_BASEDIR: paths relative to the source, so a second build (another temporary folder) hits the cache.
    cmake -S "$work/llama.cpp" -B "$work/llama.cpp/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
        -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF \
        "${launcher[@]}" >"$work/configure.log" 2>&1 || { tail -20 "$work/configure.log" >&2; exit 1; }
    CCACHE_BASEDIR="$work/llama.cpp" cmake --build "$work/llama.cpp/build" --target llama-server -j"$(nproc)" \
        >"$work/build.log" 2>&1 || { tail -30 "$work/build.log" >&2; exit 1; }
    local built=$((SECONDS - began))

    say "making the tiny model (scripts/tiny_gguf.py)"
    /usr/bin/python3 "$root/scripts/tiny_gguf.py" "$work/llama.cpp" "$work/tiny.gguf"
    got=$(sha256sum "$work/tiny.gguf" | cut -d' ' -f1)
    [ "$got" = "$model_sha256" ] || { say "the model's sha256 is $got, not $model_sha256"; exit 1; }

    rm -rf "$cache.new"
    mkdir -p "$cache.new/bin"
    cp "$work/llama.cpp/build/bin/llama-server" "$cache.new/bin/"
    cp "$work/tiny.gguf" "$cache.new/"
    cp "$work/llama.cpp/LICENSE" "$cache.new/LICENSE"
    # The vocabularies and gguf-py, for bench/token_ratio.py (a tiny model with each tokenizer family).
    mkdir -p "$cache.new/src"
    cp -r "$work/llama.cpp/models" "$work/llama.cpp/gguf-py" "$cache.new/src/"
    printf '%s %s llama.cpp %s\nbuilt in %d s on %s cores\n' "$package" "$version" "$llama_commit" "$built" \
        "$(nproc)" >"$cache.new/.complete"
    rm -rf "$cache"
    mv "$cache.new" "$cache"
    rm -rf "$work"  # here, not only on exit: `test` ends in exec, which runs no EXIT trap
    trap - EXIT
    say "llama-server and tiny.gguf in $cache (fetched and built in $((built / 60)) min $((built % 60)) s)"
}

case "${1:-}" in
    build) build ;;
    path) complete && echo "$cache" ;;
    test)
        build
        spark_build=${2:-$root/build}
        [ -x "$spark_build/spark" ] || { say "no $spark_build/spark: build spark first (README)"; exit 1; }
        SPARK_LLM_SERVER_CACHE=$cache exec /usr/bin/python3 "$root/tests/llm_server_check.py" "$spark_build/spark"
        ;;
    *) sed -n '2,16p' "$0" >&2; exit 2 ;;
esac
