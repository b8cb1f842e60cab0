#!/usr/bin/env bash
# Builds the Debian package: OUTDIR/spark_VERSION_amd64.deb, installable on Debian 12 with only runtime packages.
#
#   scripts/package.sh OUTDIR [BUILD_DIR]
#
# BUILD_DIR is a configured build whose `spark` is packaged (default: build-package, configured Release and built
# here, the binary and its plugin only). The package holds /usr/bin/spark, the HTTP server plugin of `spark audit serve`
# (/usr/lib/spark/spark-http.so, which links cpp-httplib), the man page spark(1) made by help2man from the binary's
# own --help (the main help and every subcommand's: no hand-kept copy), the CI hooks (/usr/share/spark/hooks), the
# pytest plugin (/usr/share/spark/integrations/pytest, and loaded by Debian's pytest from
# /usr/lib/python3/dist-packages), the JSON Schemas and the docs (/usr/share/doc/spark). Its
# Depends are what dpkg-shlibdeps finds the binary linked to and the packages of the libraries it opens with dlopen
# (libgit2, libcurl, libpq), so an install pulls exactly the shared libraries spark needs (docs/PACKAGING.md). Needs dpkg-dev and help2man (installed when missing, as root; setup.sh --tests has them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: scripts/package.sh OUTDIR [BUILD_DIR]}
build=${2:-$root/build-package}
say() { printf 'package: %s\n' "$*" >&2; }
if ! command -v dpkg-shlibdeps >/dev/null || ! command -v help2man >/dev/null; then
  [ "$(id -u)" = 0 ] || { say "dpkg-dev and help2man are missing: install them (scripts/setup.sh --tests does)"; exit 2; }
  say "installing dpkg-dev and help2man"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpkg-dev help2man >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpkg-dev help2man >/dev/null; }
fi
if [ $# -lt 2 ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPARK_BUILD_TESTS=OFF -DSPARK_BUILD_BENCH=OFF >/dev/null
  cmake --build "$build" -j"$(nproc)" --target spark
fi
binary="$build/spark"
[ -x "$binary" ] || { say "no spark binary in $build"; exit 2; }
version=$("$binary" --version | cut -d' ' -f2)
arch=$(dpkg --print-architecture)
mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
pkg="$stage/spark_${version}_$arch"

install -D -m 0755 "$binary" "$pkg/usr/bin/spark"
strip --strip-unneeded "$pkg/usr/bin/spark"
# The HTTP server plugin `spark audit serve` opens (src/base/http_plugin_abi.h), where spark looks for it.
[ -f "$build/spark-http.so" ] || { say "no spark-http.so in $build"; exit 2; }
install -D -m 0644 "$build/spark-http.so" "$pkg/usr/lib/spark/spark-http.so"
strip --strip-unneeded "$pkg/usr/lib/spark/spark-http.so"
install -d "$pkg/usr/share/spark" "$pkg/usr/share/doc/spark" "$pkg/usr/share/man/man1"
cp -r "$root/hooks" "$pkg/usr/share/spark/hooks"
mkdir -p "$pkg/usr/share/spark/integrations"
cp -r "$root/integrations/pytest" "$pkg/usr/share/spark/integrations/pytest"
find "$pkg/usr/share/spark" -name __pycache__ -prune -exec rm -rf {} +
# The pytest plugin where Debian's python3-pytest finds it, as Debian's python3-pytest-* packages are: the module in
# dist-packages and its metadata beside it, whose pytest11 entry point pytest loads (`pytest --spark`; no pip, which
# Debian 12's system Python refuses: "externally-managed-environment").
plugin_version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/integrations/pytest/pyproject.toml")
[ -n "$plugin_version" ] || { say "no version in integrations/pytest/pyproject.toml"; exit 2; }
site="$pkg/usr/lib/python3/dist-packages"
meta="$site/pytest_spark-$plugin_version.dist-info"
install -D -m 0644 "$root/integrations/pytest/pytest_spark.py" "$site/pytest_spark.py"
install -d "$meta"
printf 'Metadata-Version: 2.1\nName: pytest-spark\nVersion: %s\nSummary: %s\nRequires-Python: >=3.9\nRequires-Dist: pytest>=7.2\n' \
  "$plugin_version" "pytest plugin: spark records the session's outcomes and ranks the faulty lines of its failing tests" \
  > "$meta/METADATA"
printf '[pytest11]\nspark = pytest_spark\n' > "$meta/entry_points.txt"
printf 'pytest_spark\n' > "$meta/top_level.txt"
printf 'debian\n' > "$meta/INSTALLER"
chmod 0644 "$meta"/*
cp -r "$root/docs/schemas" "$pkg/usr/share/spark/schemas"
cp "$root/README.md" "$pkg/usr/share/doc/spark/README.md"
cp -r "$root/docs" "$pkg/usr/share/doc/spark/docs"
rm -rf "$pkg/usr/share/doc/spark/docs/schemas"
chmod -R u=rwX,go=rX "$pkg/usr/share"
chmod 0755 "$pkg"/usr/share/spark/hooks/*.sh

# The man page: the main help, then each subcommand's, as help2man reads them from the binary.
include="$stage/commands.h2m"
{
  echo "[COMMANDS]"
  "$binary" --help | sed -n '/^Subcommands:/,$ s/^  \([a-z][a-z-]*\) .*/\1/p' | while read -r sub; do
    echo ".SS spark $sub"
    echo ".nf"
    "$binary" "$sub" --help | sed -e 's/\\/\\e/g' -e 's/^\./\\\&./' -e "s|$binary|spark|g"
    echo ".fi"
  done
  echo "[SEE ALSO]"
  echo "/usr/share/doc/spark/README.md and /usr/share/doc/spark/docs/ (FORMATS.md, MINER.md, LOCALIZER.md, ...)."
} > "$include"
LC_ALL=C.UTF-8 help2man --no-info --locale=C.UTF-8 --name "localize the faulty lines of a failing test from similar failures fixed before" \
  --include "$include" --help-option=--help --version-option=--version "$binary" |
  sed "s|$binary|spark|g" | gzip -9n > "$pkg/usr/share/man/man1/spark.1.gz"

# Depends: the shared libraries the binary and the plugin link, as Debian's packages provide them.
mkdir -p "$stage/debian" "$pkg/DEBIAN"
printf 'Source: spark\n\nPackage: spark\nArchitecture: any\n' > "$stage/debian/control"
depends=$(cd "$stage" && dpkg-shlibdeps -O "$pkg/usr/bin/spark" "$pkg/usr/lib/spark/spark-http.so" 2>/dev/null |
  sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { say "dpkg-shlibdeps found no dependency of $binary"; exit 1; }
# libgit2 (with zlib), libcurl and libpq are opened with dlopen when first needed (CMakeLists.txt, SPARK_STATIC_LIBS),
# so no linker sees them: the build lists their sonames, and the packages holding them here are dependencies too.
[ -s "$build/opened-libraries.txt" ] || { say "$build/opened-libraries.txt is missing: configure the build again"; exit 2; }
for soname in $(cat "$build/opened-libraries.txt"); do
  file=$(ldconfig -p | sed -n "s|^[[:space:]]*$soname (.*) => ||p" | head -n 1)
  # By the file's name: with /lib merged into /usr/lib, dpkg may know the file under either folder.
  owner=$([ -n "$file" ] && dpkg -S "*/$(basename "$(readlink -f "$file")")" 2>/dev/null | head -n 1 | cut -d: -f1)
  [ -n "$owner" ] || { say "no installed package holds $soname, which spark opens"; exit 1; }
  depends="$depends, $owner"
done
size=$(du -sk "$pkg/usr" | cut -f1)
cat > "$pkg/DEBIAN/control" <<EOF
Package: spark
Version: $version
Architecture: $arch
Maintainer: spark developers <spark@localhost>
Installed-Size: $size
Depends: $depends
Recommends: git, python3-pytest
Section: devel
Priority: optional
Homepage: https://github.com/
Description: localize the faulty lines of a failing test from similar failures fixed before
 spark reads a failing test's report (JUnit XML, pytest's output), retrieves the most similar
 failures fixed before from its knowledge base and ranks the test's lines most likely faulty,
 with its own learnt ranker or an OpenAI-compatible LLM. It mines the knowledge base from the
 repository's history and from CI runs (spark record), for Python, Java, JavaScript and TypeScript.
EOF
dpkg-deb --root-owner-group --build "$pkg" "$out/spark_${version}_$arch.deb" >/dev/null
say "wrote $out/spark_${version}_$arch.deb (Depends: $depends)"
