#!/usr/bin/env bash
# The newcomer check: both README commands, exactly as written, in a brand-new Debian 12 root; and the Debian
# package (scripts/package.sh) built in one such root and installed with apt-get in another, which has no build tools.
#
# Makes (once, then reuses) a pristine Debian 12 minbase root with debootstrap, plus git (a newcomer has cloned the
# project), and for each README command: copies the pristine root, clones this repository's HEAD into it (a plain
# clone: no ../shared beside it, nothing built), and runs the command there as root under chroot. Prints each
# command's result and time; exits 1 when either fails. Logs are kept in the work folder.
#
#   scripts/check_fresh_debian.sh [--only demo|test|package] [--keep]
#
# Environment:
#   SPARK_FRESH_CACHE   where the pristine root is kept (default /var/cache/spark-fresh-debian)
#   SPARK_FRESH_WORK    where the copies and logs go (default: a new folder under /var/tmp)
#   SPARK_FRESH_MIRROR  the Debian mirror (default http://deb.debian.org/debian)
#
# Needs root (debootstrap, chroot, mounts) and Debian's debootstrap package (installed when missing). Only
# committed work is checked: the clone is of HEAD. Where this machine reaches the package registries through a TLS
# proxy with its own CA, the machine's CA certificates are carried into the root (and NODE_EXTRA_CA_CERTS is set for
# npm), so that the check tests the project, not the network. Too slow for every CI run (a full build, twice for the
# test command); CI runs its static half, scripts/check_tools.py.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${SPARK_FRESH_CACHE:-/var/cache/spark-fresh-debian}
mirror=${SPARK_FRESH_MIRROR:-http://deb.debian.org/debian}
only=""
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --only) only=${2:?--only takes demo, test or package}; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "check_fresh_debian: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$only" in ""|demo|test|package) ;; *) echo "check_fresh_debian: --only takes demo, test or package" >&2; exit 2 ;; esac

say() { printf 'check_fresh_debian: %s\n' "$*" >&2; }
[ "$(id -u)" = 0 ] || { say "needs root (debootstrap, chroot, mounts)"; exit 1; }
if ! command -v debootstrap >/dev/null; then
  say "installing debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
fi

pristine="$cache/bookworm-minbase"
if [ ! -f "$pristine/.spark-pristine" ]; then
  say "making the pristine root $pristine (debootstrap --variant=minbase --include=git bookworm)"
  mkdir -p "$cache"
  rm -rf "$pristine.tmp"
  start=$(date +%s)
  debootstrap --variant=minbase --include=git bookworm "$pristine.tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    { say "debootstrap failed; see $cache/debootstrap.log"; exit 1; }
  date -u +%FT%TZ >"$pristine.tmp/.spark-pristine"
  rm -rf "$pristine"
  mv "$pristine.tmp" "$pristine"
  say "pristine root made in $(($(date +%s) - start)) s"
else
  say "reusing the pristine root $pristine (made $(cat "$pristine/.spark-pristine"))"
fi

work=${SPARK_FRESH_WORK:-$(mktemp -d /var/tmp/spark-fresh.XXXXXX)}
mkdir -p "$work"
head=$(git -C "$root" rev-parse HEAD)
if [ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]; then
  say "note: uncommitted changes are not checked (the clone is of HEAD ${head:0:10})"
fi

# Runs one README command in its own copy of the pristine root. Mounts live in a private mount namespace, so they
# vanish with it whatever happens.
run_in_fresh_root() {
  local name=$1 command=$2
  local box="$work/$name-root" log="$work/$name.log"
  rm -rf "$box"
  cp -a "$pristine" "$box"
  cp /etc/resolv.conf "$box/etc/resolv.conf" 2>/dev/null || true
  # The machine's extra CA certificates (a TLS proxy's): Debian's ca-certificates, once setup.sh installs it,
  # adds whatever is in /usr/local/share/ca-certificates; until then, and for npm, the machine's bundle is used.
  mkdir -p "$box/usr/local/share/ca-certificates" "$box/etc/spark-check"
  cp /usr/local/share/ca-certificates/*.crt "$box/usr/local/share/ca-certificates/" 2>/dev/null || true
  local ca_env=()
  if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    cp /etc/ssl/certs/ca-certificates.crt "$box/etc/spark-check/ca-bundle.crt"
    ca_env=(NODE_EXTRA_CA_CERTS=/etc/spark-check/ca-bundle.crt)
  fi
  git clone -q --no-local "$root" "$box/root/spark"
  git -C "$box/root/spark" checkout -q "$head"
  # A clone from a local folder has that folder as origin; a newcomer's points at the project's host.
  git -C "$box/root/spark" remote set-url origin https://example.invalid/spark.git
  if [ -n "${inputs:-}" ]; then cp $inputs "$box/root/"; fi
  say "$name: running '$command' in a fresh Debian 12 root (log: $log)"
  local start rc=0
  start=$(date +%s)
  unshare --mount --propagation private -- sh -c '
    set -e
    box=$1; shift
    mount --rbind /dev "$box/dev"
    mount -t proc proc "$box/proc"
    mount --rbind /sys "$box/sys"
    mount -t tmpfs tmpfs "$box/tmp"
    exec chroot "$box" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
  ' sh "$box" "${ca_env[@]}" /bin/bash -c "cd /root/spark && $command" >"$log" 2>&1 || rc=$?
  local secs=$(($(date +%s) - start))
  results+=("$(printf '%-18s exit %-3s %4d min %02d s' "$command" "$rc" $((secs / 60)) $((secs % 60)))")
  say "$name: exit $rc after ${secs} s; the last lines:"
  tail -n 15 "$log" | sed 's/^/    /' >&2
  if [ -n "${artifacts:-}" ] && [ "$rc" = 0 ]; then cp "$box"/$artifacts "$work/"; fi
  [ "$keep" = 1 ] || rm -rf "$box"
  return "$rc"
}

results=()
status=0
if [ -z "$only" ] || [ "$only" = demo ]; then run_in_fresh_root demo "scripts/demo.sh" || status=1; fi
if [ -z "$only" ] || [ "$only" = test ]; then run_in_fresh_root test "scripts/test.sh" || status=1; fi
if [ -z "$only" ] || [ "$only" = package ]; then
  # Built where the README's set-up ran; installed where nothing but Debian's minbase and git is.
  rm -f "$work"/spark_*.deb
  if artifacts="root/out/spark_*.deb" run_in_fresh_root package "scripts/setup.sh && scripts/package.sh /root/out"; then
    cp "$work"/spark_*.deb "$work/spark.deb"
    inputs="$work/spark.deb" run_in_fresh_root install "mkdir -p /root/try/tests && cp /root/spark/scripts/package_smoke.sh /root/try/ && \
      rm -rf /root/spark && apt-get update -qq && apt-get install -y -qq /root/spark.deb && \
      cd /root/try && sh package_smoke.sh" || status=1
  else
    status=1
  fi
fi

echo "newcomer check of ${head:0:10} in a fresh Debian 12 minbase root ($(nproc) cores):"
for r in "${results[@]}"; do echo "  $r"; done
echo "logs: $work"
exit "$status"
