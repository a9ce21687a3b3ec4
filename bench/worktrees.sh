#!/usr/bin/env bash
# Worktree benchmarks (issue: streams come alive):
#  1. `git boulder stream init` of 8 streams vs `git worktree add` of the same 8, repository of
#     20,000 files, same run.
#  2. `git boulder status` with 50 streams in the plan (8 of them with worktrees) vs `git status`.
# Usage: bench/worktrees.sh [RUNS] [INIT_RUNS]   (default 5 status runs, 3 init runs; prints
# medians and ratios). Each init run makes 16 worktrees of 20,000 files: minutes on a slow disk.
source "$(dirname "$0")/common.sh"
RUNS=${1:-5}
INIT_RUNS=${2:-3}
echo "machine: $(machine)"
make_repo "$WORK/base" 20000
mkdir -p "$WORK/base/.boulder" "$WORK/base/.agents/tasks"
{
  echo "version: 1"; echo "streams:"
  for i in $(seq 1 50); do printf '  s%02d:\n    paths: [src/mod%03d/**]\n' "$i" "$i"; done
  echo "settings:"; echo "  base_branch: main"; echo "  path_overlap: ignore"
} > "$WORK/base/.boulder/streams.yaml"
printf '# PRD\n\n### [ ] US-001: x\n' > "$WORK/base/.agents/tasks/prd.md"
git -C "$WORK/base" add -A && git -C "$WORK/base" commit -q -m plan

names=$(seq -f 's%02g' 1 8)
gb=() ; gw=()
for r in $(seq 1 "$INIT_RUNS"); do
  rm -rf "$WORK/a" "$WORK/b"
  git clone -q "$WORK/base" "$WORK/a"; git clone -q "$WORK/base" "$WORK/b"
  # Start each side with the disk quiet: no writeback of the other side's files in the timing.
  sync
  s=$(date +%s%N)
  (cd "$WORK/a" && git-boulder stream init $names >/dev/null 2>&1)
  e=$(date +%s%N); gb+=($(( (e - s) / 1000000 )))
  sync
  s=$(date +%s%N)
  for n in $names; do git -C "$WORK/b" worktree add -q -b "boulder/$n" ".boulder/worktrees/$n" main >/dev/null 2>&1; done
  e=$(date +%s%N); gw+=($(( (e - s) / 1000000 )))
done
mb=$(median "${gb[@]}"); mw=$(median "${gw[@]}")
echo "stream init, 8 streams, 20000 files: git-boulder ${mb} ms, git worktree add ${mw} ms, ratio $(python3 -c "print(round($mb/$mw, 2))")"

sync
all_status() { for n in $names; do git -C "$WORK/a/.boulder/worktrees/$n" status >/dev/null; done; }
sb=() ; sg=() ; sa=()
for r in $(seq 1 "$RUNS"); do
  sb+=($(cd "$WORK/a" && time_ms git-boulder status))
  sg+=($(cd "$WORK/a" && time_ms git status))
  sa+=($(time_ms all_status))
done
mb=$(median "${sb[@]}"); mg=$(median "${sg[@]}"); ma=$(median "${sa[@]}")
echo "status, 50 streams (8 worktrees), 20000 files: git-boulder ${mb} ms, git status ${mg} ms, ratio $(python3 -c "print(round($mb/$mg, 2))")"
echo "  git status in each of the 8 worktrees, one after another: ${ma} ms, ratio $(python3 -c "print(round($mb/$ma, 2))")"

# The same with a file system monitor: core.fsmonitor set to git's fsmonitor-watchman hook (needs
# watchman, Debian package watchman) and core.untrackedCache, as users of big repositories set them.
sample_hook=/usr/share/git-core/templates/hooks/fsmonitor-watchman.sample
if command -v watchman >/dev/null 2>&1 && [ -e "$sample_hook" ]; then
  cp "$sample_hook" "$WORK/a/.git/hooks/fsmonitor-watchman"
  git -C "$WORK/a" config core.fsmonitor "$WORK/a/.git/hooks/fsmonitor-watchman"
  git -C "$WORK/a" config core.untrackedCache true
  # Warm up: watchman crawls each worktree once, git writes its token and untracked cache, and
  # git-boulder keeps the token of a clean check.
  for n in $names; do git -C "$WORK/a/.boulder/worktrees/$n" status >/dev/null; done
  for i in 1 2 3; do (cd "$WORK/a" && git status >/dev/null && git-boulder status >/dev/null); done
  sb=() ; sg=() ; sa=()
  for r in $(seq 1 "$RUNS"); do
    sb+=($(cd "$WORK/a" && time_ms git-boulder status))
    sg+=($(cd "$WORK/a" && time_ms git status))
    sa+=($(time_ms all_status))
  done
  mb=$(median "${sb[@]}"); mg=$(median "${sg[@]}"); ma=$(median "${sa[@]}")
  echo "status with core.fsmonitor (watchman) and core.untrackedCache: git-boulder ${mb} ms, git status ${mg} ms, ratio $(python3 -c "print(round($mb/$mg, 2))")"
  echo "  git status in each of the 8 worktrees, one after another: ${ma} ms, ratio $(python3 -c "print(round($mb/$ma, 2))")"
  for d in "$WORK/a" $(for n in $names; do echo "$WORK/a/.boulder/worktrees/$n"; done); do watchman watch-del "$d" >/dev/null 2>&1 || true; done
else
  echo "status with core.fsmonitor: skipped (watchman, Debian package watchman, or git's fsmonitor-watchman sample is missing)"
fi
