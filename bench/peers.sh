#!/usr/bin/env bash
# spark against the peers a user would pick instead, on the same data in the same run (docs/PERFORMANCE.md, "Against
# the peers (Python)"): the SPARK pipeline in Python (bench/peers/localizer_peer.py: Debian's numpy, FAISS,
# python-Levenshtein, SQLite) at each size, and a GitPython history walk (bench/peers/miner_peer.py) against
# spark_history_walk and `git log -p --first-parent` on each repository.
#   bench/peers.sh [BUILD_DIR] [SIZES...]          # 10000 100000 by default
# Environment: ROUNDS (3: localize rounds of QUERIES (20) failures after a first), IMPORT_ROUNDS (2), CHUNK (10000:
# the corpus imported in files of this many cases, one import process each; 0: one file), REPOS
# ("NAME:PREFIX ...", clones under REPO_DIR, default /tmp/peers-repos; made from /work/.mirror/*+NAME/repo when
# missing; never committed here), MINER_ROUNDS (5), WORK (temporary folder, default /tmp). SIZES= "" skips the
# localizer, REPOS= "" the miner.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
shift || true
sizes=${*-10000 100000}
py=/usr/bin/python3
missing=()
for pair in numpy:python3-numpy faiss:python3-faiss Levenshtein:python3-levenshtein git:python3-git \
            sklearn:python3-sklearn; do
    "$py" -c "import ${pair%%:*}" 2>/dev/null || missing+=("${pair#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "peers.sh: the Python peers need Debian's ${missing[*]}: apt-get install ${missing[*]}" >&2
    exit 2
fi
for t in spark bench/spark_grow_corpus bench/spark_localize_warm bench/spark_history_walk; do
    [ -x "$build/$t" ] || { echo "peers.sh: no $build/$t (cmake --build $build --target spark spark_grow_corpus spark_localize_warm spark_history_walk)" >&2; exit 1; }
done
data=$root/../shared/data/dev
[ -d "$data" ] || data=/work/shared/data/dev
corpus=("$data"/*/cases.jsonl)
[ -f "${corpus[0]}" ] || { echo "peers.sh: no corpus at ../shared/data/dev" >&2; exit 1; }
echo "# spark against its Python peers, $(date -u +%F) at $(git -C "$root" rev-parse --short HEAD)"
for n in $sizes; do
    "$py" "$root/bench/peers/harness.py" localizer "$build" "$n" --corpus "${corpus[@]}" --queries "${QUERIES:-20}" \
        --rounds "${ROUNDS:-3}" --import-rounds "${IMPORT_ROUNDS:-2}" --chunk "${CHUNK:-10000}" --work "${WORK:-/tmp}"
done
repos=${REPOS-click:tests/ pyparsing:tests/ pytest:testing/}
[ -n "$repos" ] || exit 0
repo_dir=${REPO_DIR:-/tmp/peers-repos}
echo
echo "### Miner: first-parent history with each commit's patch under PREFIX (${MINER_ROUNDS:-5} rounds)"
echo
echo "| repository | commits (touching PREFIX) | spark_history_walk | git log -p | GitPython peer | spark / git | peer / spark | peak RSS spark / peer |"
echo "|---|---|---|---|---|---|---|---|"
for r in $repos; do
    name=${r%%:*} prefix=${r#*:}
    if [ ! -d "$repo_dir/$name" ]; then
        mirror=$(ls -d /work/.mirror/*+"$name"/repo 2>/dev/null | head -1)
        [ -n "$mirror" ] || { echo "peers.sh: no clone $repo_dir/$name and no mirror of it" >&2; exit 1; }
        git clone -q "$mirror" "$repo_dir/$name"
    fi
    "$py" "$root/bench/peers/harness.py" miner "$build" "$repo_dir/$name" "$prefix" --rounds "${MINER_ROUNDS:-5}"
done
