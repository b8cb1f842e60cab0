#!/usr/bin/python3
"""The miner's history walk as a Python team would write it with GitPython (python3-git), the way PyDriller walks a
repository: the first-parent commits that touch PREFIX, each diffed against its first parent (the root against the
empty tree) with a patch per file. The same work as bench/history_walk.cpp (spark_history_walk); bench/peers.sh
times them and `git log -p --first-parent -- PREFIX` in one run. Not shipped.

  miner_peer.py REPO [--prefix test/]      prints: commits walked, commits touching PREFIX, patch bytes, seconds

It checks, as spark_history_walk does, that it walked the commits `git log --first-parent -- PREFIX` names.
"""
import argparse
import sys
import time

import git


def walk(repo_path, prefix):
    repo = git.Repo(repo_path)
    commits = touching = patch_bytes = 0
    shas = []
    # PyDriller's Repository(...).traverse_commits() with only_in_branch/first-parent: git rev-list underneath,
    # path-limited here so that git itself skips the commits that change nothing under PREFIX.
    for commit in repo.iter_commits("HEAD", paths=prefix, first_parent=True, reverse=True):
        parent = commit.parents[0] if commit.parents else git.NULL_TREE
        if parent is git.NULL_TREE:
            diffs = commit.diff(git.NULL_TREE, paths=prefix, create_patch=True, R=True)
        else:
            diffs = parent.diff(commit, paths=prefix, create_patch=True)
        touching += 1
        shas.append(commit.hexsha)
        for d in diffs:
            patch_bytes += len(d.diff or b"")
    commits = int(repo.git.rev_list("--first-parent", "--count", "HEAD"))
    return commits, touching, patch_bytes, shas


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("repo")
    ap.add_argument("--prefix", default="test/")
    args = ap.parse_args()
    start = time.perf_counter()
    commits, touching, patch_bytes, shas = walk(args.repo, args.prefix)
    seconds = time.perf_counter() - start
    expected = git.Repo(args.repo).git.log("--reverse", "--first-parent", "--format=%H", "--", args.prefix).split()
    if shas != expected:
        print(f"miner_peer: the walk's commits are not the ones git log names for {args.prefix}", file=sys.stderr)
        sys.exit(1)
    print(f"{commits} {touching} {patch_bytes} {seconds:.3f}")


if __name__ == "__main__":
    main()
