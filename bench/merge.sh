#!/usr/bin/env bash
# Merge benchmark (issue: stream merge): `git boulder stream merge` of a 200-commit stream vs
# `git rebase main` in the stream's worktree + `git merge --ff-only` in the main worktree, same
# run, repository of 2,000 files; goal: no slower.
# The stream's 200 commits each change one file of src/mod001/ and add one; main has 5 commits of
# its own (other directories) so every stream commit is rewritten. Each run starts both sides from
# fresh copies of one prepared repository, each with the stream worktree at .boulder/worktrees/s1
# (made after copying: worktree paths are absolute); only the merge itself is timed, and which side
# goes first alternates. After each run both sides must agree: main's tree, 200 new commits on main
# with the same author, subject and tree each, the stream branch at main, both worktrees clean.
# Usage: bench/merge.sh [RUNS]   (default 5; prints medians and the ratio git-boulder ÷ git)
source "$(dirname "$0")/common.sh"
RUNS=${1:-5}
COMMITS=200
echo "machine: $(machine)"

fail() { echo "FAIL: $*" >&2; exit 1; }

base="$WORK/base"
make_repo "$base" 2000
mkdir -p "$base/.boulder" "$base/.agents/tasks"
cat > "$base/.boulder/streams.yaml" <<'YAML'
version: 1
prd: .agents/tasks/prd.md
streams:
  s1:
    paths: [src/mod001/**]
settings:
  base_branch: main
YAML
printf '# PRD\n\n### [x] US-001: x\n' > "$base/.agents/tasks/prd.md"
git -C "$base" add -A && git -C "$base" commit -q -m plan
fork=$(git -C "$base" rev-parse HEAD)

# The stream: COMMITS commits on boulder/s1 from the plan commit, made with fast-import.
python3 - "$base" "$fork" "$COMMITS" <<'PY'
import subprocess, sys
root, fork, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = [f"src/mod001/f{i:05d}.txt" for i in range(1, 2000, 100)]  # the 20 files of src/mod001
out = []
for i in range(n):
    out.append(f"commit refs/heads/boulder/s1\nmark :{i+1}\n"
               f"author Bench <bench@example.com> {1700000000+i} +0000\n"
               f"committer Bench <bench@example.com> {1700000000+i} +0000\n"
               f"data {len(f's1 commit {i:03d}')}\ns1 commit {i:03d}\n")
    if i == 0:
        out.append(f"from {fork}\n")
    f = files[i % len(files)]
    for path, body in ((f, "".join(f"file {f} line {j} rev {i}\n" for j in range(4))),
                       (f"src/mod001/new{i:03d}.txt", f"new {i}\n")):
        out.append(f"M 100644 inline {path}\ndata {len(body)}\n{body}\n")
subprocess.run(["git", "-C", root, "fast-import", "--quiet"], input="".join(out), text=True, check=True)
PY
# Main moves on: 5 commits elsewhere, so the rebase rewrites all of the stream.
for i in 1 2 3 4 5; do
  echo "main $i" >> "$base/src/mod050/f00050.txt"
  echo "main $i" > "$base/src/mod0${i}7/main-$i.txt"
  git -C "$base" add -A && git -C "$base" commit -q -m "main $i"
done
[ "$(git -C "$base" rev-list --count main..boulder/s1)" = "$COMMITS" ] || fail "setup: stream has not $COMMITS commits"
base_tip=$(git -C "$base" rev-parse main)

# prepare DIR SIDE: a fresh copy of the base with the stream worktree, the way SIDE makes it.
prepare() {
  local dir=$1 side=$2
  rm -rf "$dir"
  cp -a "$base" "$dir"
  if [ "$side" = boulder ]; then
    (cd "$dir" && git-boulder stream init s1 >"$WORK/init.log" 2>&1) || { cat "$WORK/init.log" >&2; fail "git boulder stream init s1"; }
  else
    git -C "$dir" worktree add -q .boulder/worktrees/s1 boulder/s1
    echo "/.boulder/worktrees/" >> "$dir/.git/info/exclude"
  fi
  # cp -a changes inode numbers: refresh both indexes now so neither side pays for it when timed.
  git -C "$dir" update-index -q --refresh
  git -C "$dir/.boulder/worktrees/s1" update-index -q --refresh
}

# timed NAME CMD…: run CMD once, print elapsed ms; on failure show its output and stop.
timed() {
  local name=$1 s e; shift
  s=$(date +%s%N)
  "$@" >"$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log" >&2; fail "$name exited non-zero: $*"; }
  e=$(date +%s%N)
  echo $(( (e - s) / 1000000 ))
}
boulder_merge() { cd "$WORK/a" && git-boulder stream merge s1; }
git_merge() { git -C "$WORK/b/.boulder/worktrees/s1" rebase -q main && git -C "$WORK/b" merge -q --ff-only boulder/s1; }

# check: both sides did the same thing.
check() {
  local a="$WORK/a" b="$WORK/b" d
  for d in "$a" "$b"; do
    [ "$(git -C "$d" rev-list --count "$base_tip..main")" = "$COMMITS" ] || fail "$d: main gained $(git -C "$d" rev-list --count "$base_tip..main") commits, not $COMMITS"
    [ "$(git -C "$d" rev-parse main)" = "$(git -C "$d" rev-parse boulder/s1)" ] || fail "$d: boulder/s1 is not at main"
    [ "$(git -C "$d" rev-parse HEAD)" = "$(git -C "$d" rev-parse main)" ] || fail "$d: main worktree HEAD is not main"
    [ "$(git -C "$d/.boulder/worktrees/s1" rev-parse HEAD)" = "$(git -C "$d" rev-parse main)" ] || fail "$d: stream worktree HEAD is not main"
    [ -z "$(git -C "$d" status --porcelain)" ] || fail "$d: main worktree not clean: $(git -C "$d" status --porcelain | head -5)"
    [ -z "$(git -C "$d/.boulder/worktrees/s1" status --porcelain)" ] || fail "$d: stream worktree not clean: $(git -C "$d/.boulder/worktrees/s1" status --porcelain | head -5)"
  done
  [ "$(git -C "$a" rev-parse 'main^{tree}')" = "$(git -C "$b" rev-parse 'main^{tree}')" ] || fail "main's tree differs: git-boulder $(git -C "$a" rev-parse 'main^{tree}'), git $(git -C "$b" rev-parse 'main^{tree}')"
  local fmt='%an <%ae> %ad %T %s'
  diff <(git -C "$a" log --format="$fmt" "$base_tip..main") <(git -C "$b" log --format="$fmt" "$base_tip..main") >"$WORK/log.diff" ||
    { head -20 "$WORK/log.diff" >&2; fail "the rebased commits differ (author, tree or subject; < git-boulder, > git)"; }
}

gb=() ; gg=()
for r in $(seq 1 "$RUNS"); do
  prepare "$WORK/a" boulder
  prepare "$WORK/b" git
  if (( r % 2 )); then
    tb=$(timed boulder boulder_merge); tg=$(timed git git_merge)
  else
    tg=$(timed git git_merge); tb=$(timed boulder boulder_merge)
  fi
  gb+=("$tb"); gg+=("$tg")
  check
done
echo "  runs (ms): git-boulder ${gb[*]}; git ${gg[*]}"
mb=$(median "${gb[@]}"); mg=$(median "${gg[@]}")
echo "stream merge, $COMMITS commits, 2000 files: git-boulder ${mb} ms, git rebase + merge --ff-only ${mg} ms, ratio $(python3 -c "print(round($mb/$mg, 2))")"
