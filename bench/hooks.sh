#!/usr/bin/env bash
# Hook benchmarks (issue: hooks):
#  1. `git commit` in a stream worktree with the hooks installed vs the same without hooks,
#     repository of 10,000 files, same run; median of RUNS commits each, the two (and, for
#     comparison, a shell hook doing the same job and a hook that does nothing) taking turns.
#     Then the post-commit hook alone, run as git runs it, against that shell hook (PAIRS pairs,
#     default 200).
#  2. pre-push over a stream of 1,000 commits, plan of 20 streams x 5 globs, vs
#     `git log --name-only` over the same commits.
# Usage: bench/hooks.sh [RUNS]   (default 60: a commit here varies by ±20% from one to the next, and
# the median of 30 moved the ratio by ±0.05 from run to run)
source "$(dirname "$0")/common.sh"
RUNS=${1:-60}
echo "machine: $(machine)"
make_repo "$WORK/r" 10000
cd "$WORK/r"
mkdir -p .boulder .agents/tasks
{
  echo "version: 1"; echo "streams:"
  for i in $(seq 1 20); do
    printf '  s%02d:\n    paths: [src/mod%03d/**, docs/s%02d/**, tests/s%02d/**, "s%02d/*.md", bench/s%02d/**]\n' "$i" "$i" "$i" "$i" "$i" "$i"
  done
  echo "settings:"; echo "  base_branch: main"; echo "  path_overlap: ignore"; echo "  undeclared_paths: allow"
} > .boulder/streams.yaml
printf '# PRD\n\n### [ ] US-001: x\n' > .agents/tasks/prd.md
git add -A && git commit -q -m plan
git-boulder stream init s01 >/dev/null
wt="$WORK/r/.boulder/worktrees/s01"

# The 10,000-file commit starts git's automatic gc in the background; let it finish (a minute at
# most) so that it does not run during the measurements.
for i in $(seq 300); do [ -e .git/gc.pid ] || break; sleep 0.2; done

git-boulder hooks install >/dev/null
# Commits without hooks and with the hooks for comparison go through core.hooksPath, so the
# four kinds can take turns in one loop.
mkdir -p "$WORK/no-hooks" "$WORK/shell-hooks"
# A shell-only hook doing the same job: a note per commit with `git notes add`.
cat > "$WORK/shell-hooks/post-commit" <<'SH'
#!/bin/sh
b=$(git rev-parse --abbrev-ref HEAD)
git notes --ref=shellbench add -f -m "{\"stream\":\"$b\"}" HEAD
SH
chmod +x "$WORK/shell-hooks/post-commit"
# And a post-commit that does nothing (the system's `true`): what git's running of any hook costs.
mkdir -p "$WORK/true-hooks"
ln -s "$(type -P true)" "$WORK/true-hooks/post-commit"

# cpu_ms CMD…: run once; print "WALL CPU" in milliseconds, CPU being user + sys of the command and
# every process it starts (git, the hook, what the hook runs), from the kernel's accounting: under
# load the wall clock mostly measures waiting for a core.
cpu_ms() {
  python3 - "$@" <<'PY'
import resource, subprocess, sys, time
r0 = resource.getrusage(resource.RUSAGE_CHILDREN); t0 = time.perf_counter()
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
t1 = time.perf_counter(); r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
print(round((t1 - t0) * 1000, 1), round(cpu * 1000, 1))
PY
}

commit_ms() {  # $1: label, $2: round, $3: hooks dir (none: the installed git-boulder hooks); prints "WALL CPU" ms
  echo "$2 $1" >> "$wt/src/mod001/bench-$1.txt"
  git -C "$wt" add -A
  if [ -n "${3:-}" ]; then
    cpu_ms git -C "$wt" -c core.hooksPath="$3" commit -q -m "$1 $2"
  else
    cpu_ms git -C "$wt" commit -q -m "$1 $2"
  fi
}
# Interleaved — one commit of each kind per round — so that machine noise (±30% here) hits the
# four alike. Three rounds of warm-up first.
for i in 1 2 3; do
  commit_ms plain "w$i" "$WORK/no-hooks" >/dev/null; commit_ms hooked "w$i" >/dev/null
  commit_ms shell "w$i" "$WORK/shell-hooks" >/dev/null
done
pt=(); ht=(); st=(); tt=(); pc=(); hc=(); sc=()
for i in $(seq 1 "$RUNS"); do
  read -r w c < <(commit_ms plain "$i" "$WORK/no-hooks"); pt+=("$w"); pc+=("$c")
  read -r w c < <(commit_ms hooked "$i"); ht+=("$w"); hc+=("$c")
  read -r w c < <(commit_ms shell "$i" "$WORK/shell-hooks"); st+=("$w"); sc+=("$c")
  read -r w c < <(commit_ms true "$i" "$WORK/true-hooks"); tt+=("$w")
done
ratio() { python3 -c "print(round($1/$2, 2))"; }
plain=$(median "${pt[@]}"); hooked=$(median "${ht[@]}"); shell=$(median "${st[@]}")
plainc=$(median "${pc[@]}"); hookedc=$(median "${hc[@]}"); shellc=$(median "${sc[@]}")
echo "git commit, 10000 files: without hooks ${plain} ms, with git-boulder hooks ${hooked} ms, ratio $(ratio "$hooked" "$plain")"
echo "  CPU (user + sys of every process): without hooks ${plainc} ms, with git-boulder hooks ${hookedc} ms, ratio $(ratio "$hookedc" "$plainc")"
notes=$(git notes --ref=boulder list | wc -l)
echo "  (notes written by the hooked commits: $notes, of $((RUNS + 3)))"
nothing=$(median "${tt[@]}")
echo "  a post-commit hook that does nothing (true): ${nothing} ms, ratio $(ratio "$nothing" "$plain") (git starting any hook)"
echo "  same job as a shell hook with git notes add: ${shell} ms, ratio $(ratio "$shell" "$plain"); CPU ${shellc} ms, ratio $(ratio "$shellc" "$plainc")"
echo "post-commit, git-boulder's hooks vs the shell hook: commit ${hooked} vs ${shell} ms, ratio $(ratio "$hooked" "$shell"); the hook alone (commit minus a commit without hooks) $(python3 -c "print(round($hooked-$plain, 1))") vs $(python3 -c "print(round($shell-$plain, 1))") ms"
echo "  CPU: ${hookedc} vs ${shellc} ms, ratio $(ratio "$hookedc" "$shellc"); the hook alone $(python3 -c "print(round($hookedc-$plainc, 1))") vs $(python3 -c "print(round($shellc-$plainc, 1))") ms"

# The hook alone, the way git runs it (the installed post-commit file, with the commit above as
# HEAD), against the shell hook file: one process each, taking turns, PAIRS pairs; medians of
# wall and CPU, and the median of the pair-by-pair wall ratios. A commit's time varies more than
# a hook's, so this is the sharper figure for "the hook costs no more than a shell hook".
PAIRS=${PAIRS:-200}
python3 - "$wt" "$WORK/r/.git/hooks/post-commit" "$WORK/shell-hooks/post-commit" "$PAIRS" <<'PY'
import resource, statistics, subprocess, sys, time
wt, ours, shell, pairs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def one(cmd):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN); t0 = time.perf_counter()
    subprocess.run([cmd], cwd=wt, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t1 = time.perf_counter(); r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (t1 - t0) * 1000, ((r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)) * 1000
o, s = [], []
for _ in range(pairs):
    o.append(one(ours)); s.append(one(shell))
m = lambda xs: round(statistics.median(xs), 2)
kind = "direct" if open(ours, "rb").readline().rstrip().endswith(b" hook-file") else "shell shim"
print(f"post-commit hook alone ({kind}) vs the shell hook, {pairs} pairs: wall {m([x[0] for x in o])} vs {m([x[0] for x in s])} ms, "
      f"ratio {m([a[0] / b[0] for a, b in zip(o, s)])}; CPU {m([x[1] for x in o])} vs {m([x[1] for x in s])} ms, "
      f"ratio {round(m([x[1] for x in o]) / m([x[1] for x in s]), 2)}")
PY

# pre-push over 1000 commits.
git -C "$wt" checkout -q -b boulder/s02 main 2>/dev/null || true
git -C "$wt" checkout -q boulder/s01
python3 - "$wt" <<'PY'
import subprocess, sys, os
wt = sys.argv[1]
# 1000 commits made with fast-import: each touches two files of the stream.
head = subprocess.check_output(["git", "-C", wt, "rev-parse", "HEAD"], text=True).strip()
lines = []
for i in range(1000):
    lines.append(f"commit refs/heads/boulder/s01\nmark :{i+1}\ncommitter B <b@e> {1700000000+i} +0000\ndata 4\nc{i:03d}\n")
    if i == 0:
        lines.append(f"from {head}\n")
    for f in (f"src/mod001/p{i}.txt", f"docs/s01/p{i % 50}.md"):
        body = f"{i}\n"
        lines.append(f"M 100644 inline {f}\ndata {len(body)}\n{body}\n")
subprocess.run(["git", "-C", wt, "fast-import", "--quiet", "--force"], input="".join(lines), text=True, check=True)
PY
git -C "$wt" reset -q --hard boulder/s01
tip=$(git -C "$wt" rev-parse HEAD)
zero=0000000000000000000000000000000000000000
line="refs/heads/boulder/s01 $tip refs/heads/boulder/s01 $zero"
pp=() ; gl=()
for i in $(seq 1 5); do
  s=$(date +%s%N); echo "$line" | (cd "$wt" && git-boulder hook pre-push origin /dev/null) >/dev/null 2>&1; e=$(date +%s%N)
  pp+=($(( (e - s) / 1000000 )))
  gl+=($(time_ms git -C "$wt" log --name-only --format=%H main..boulder/s01))
done
mp=$(median "${pp[@]}"); mg=$(median "${gl[@]}")
echo "pre-push, 1000 commits, 20 streams x 5 globs: git-boulder ${mp} ms, git log --name-only ${mg} ms, ratio $(python3 -c "print(round($mp/$mg, 2))")"
