#!/usr/bin/env bash
# How the cost of reading the plan and the PRD grows: `prd show`, `prd next`, `status`,
# `stream validate` and `stream suggest` on a PRD of N stories and a plan of M streams, at N and
# 10×N (M and 10×M). Linear cost means a ratio near 10; the goal is at most 12.
# For scale, the same run times `git status` of the repository (what every command pays anyway).
#
# Then `stream init` of a plan of I streams and of 10×I (one run each, in a repository of 20 files:
# the checkout of each worktree costs the same at both sizes): the time per stream and the ratio
# of the two totals (linear: 10; the goal is at most about 10). Then, one at a time: the worktree
# of the first stream removed (`git worktree remove`), `stream init` of that stream alone, beside
# the I - 1 (10×I - 1) others.
#
# usage: bash bench/scale.sh [RUNS] [STORIES] [STREAMS] [INIT_STREAMS]
#        (defaults 3, 10000, 100, 100; STORIES 0 skips the plan and PRD commands, INIT_STREAMS 0
#        skips `stream init`)
source "$(dirname "$0")/common.sh"
RUNS=${1:-3}
N=${2:-10000}
M=${3:-100}
I=${4:-100}

# make_plan DIR STORIES STREAMS: a repository with a Ralph PRD of STORIES stories and a plan of
# STREAMS streams sharing them out, each owning its own folder, which holds a file.
make_plan() {
  local dir=$1 n=$2 m=$3
  mkdir -p "$dir/.boulder" "$dir/.agents/tasks"
  git -C "$dir" init -q -b main
  python3 - "$dir" "$n" "$m" <<'PY'
import os, sys
root, n, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(f"{root}/.agents/tasks/prd.md", "w") as f:
    f.write("# PRD: scale\n\n## Stories\n\n")
    for i in range(n):
        mark = "x" if i % 3 == 0 else " "
        f.write(f"### [{mark}] US-{i:06d}: Story number {i}\nChange `src/s{i % m:04d}/f{i}.rs` and test it.\n\n")
with open(f"{root}/.boulder/streams.yaml", "w") as f:
    f.write("version: 1\nprd: .agents/tasks/prd.md\nstreams:\n")
    per = n // m
    for s in range(m):
        ids = ", ".join(f"US-{i:06d}" for i in range(s * per, (s + 1) * per))
        f.write(f"  s{s:04d}:\n    stories: [{ids}]\n    paths: ['src/s{s:04d}/**']\n")
        os.makedirs(f"{root}/src/s{s:04d}", exist_ok=True)
        open(f"{root}/src/s{s:04d}/mod.rs", "w").close()
    f.write("settings:\n  base_branch: main\n")
PY
  git -C "$dir" add -A
  git -C "$dir" commit -q -m "plan: $n stories, $m streams"
}

echo "machine: $(machine)"
if [ "$N" -gt 0 ]; then
small=$WORK/small
large=$WORK/large
make_plan "$small" "$N" "$M"
make_plan "$large" "$((N * 10))" "$((M * 10))"

echo "sizes: $N stories / $M streams vs $((N * 10)) stories / $((M * 10)) streams; median of $RUNS runs"
echo "CPU: user + sys in ms, best of $RUNS (wall times follow the machine's load; CPU much less)"
printf '%-22s %10s %10s %8s %10s %10s %8s\n' "command" "small ms" "large ms" "growth" "small CPU" "large CPU" "growth"
# cpu_ms CMD…: run once, print user + sys milliseconds of it.
cpu_ms() {
  local TIMEFORMAT='%U %S' t
  t=$({ time "$@" >/dev/null 2>&1; } 2>&1)
  awk -v t="$t" 'BEGIN { split(t, p, " "); printf "%d", (p[1] + p[2]) * 1000 }'
}
measure() {
  local label=$1
  shift
  local a=() b=() c=() d=() i
  for ((i = 0; i < RUNS; i++)); do
    a+=("$(cd "$small" && time_ms "$@")")
    b+=("$(cd "$large" && time_ms "$@")")
    c+=("$(cd "$small" && cpu_ms "$@")")
    d+=("$(cd "$large" && cpu_ms "$@")")
  done
  local ma mb mc md
  ma=$(median "${a[@]}")
  mb=$(median "${b[@]}")
  mc=$(printf '%s\n' "${c[@]}" | sort -n | head -1)
  md=$(printf '%s\n' "${d[@]}" | sort -n | head -1)
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (a > 0 ? b / a : 0) }'; }
  printf '%-22s %10s %10s %8s %10s %10s %8s\n' "$label" "$ma" "$mb" "$(ratio "$ma" "$mb")" "$mc" "$md" "$(ratio "$mc" "$md")"
}
measure "git status" git status --porcelain
measure "prd show" git-boulder prd show
measure "prd next" git-boulder prd next
measure "prd show --json" git-boulder prd show --json
measure "status" git-boulder status
measure "status --json" git-boulder status --json
measure "stream validate" git-boulder stream validate
measure "stream suggest" git-boulder stream suggest
fi

# make_streams DIR STREAMS: 20 files and a plan of STREAMS one-story streams.
make_streams() {
  local dir=$1 m=$2
  mkdir -p "$dir"
  git -C "$dir" init -q -b main
  python3 - "$dir" "$m" <<'PY'
import os, sys
root, m = sys.argv[1], int(sys.argv[2])
os.makedirs(f"{root}/.boulder", exist_ok=True)
os.makedirs(f"{root}/.agents/tasks", exist_ok=True)
with open(f"{root}/.agents/tasks/prd.md", "w") as f:
    f.write("# PRD: streams\n\n## Stories\n\n")
    for i in range(m):
        f.write(f"### [ ] US-{i:06d}: Story {i}\nChange `src/s{i:04d}/mod.rs`.\n\n")
with open(f"{root}/.boulder/streams.yaml", "w") as f:
    f.write("version: 1\nprd: .agents/tasks/prd.md\nstreams:\n")
    for s in range(m):
        f.write(f"  s{s:04d}:\n    stories: [US-{s:06d}]\n    paths: ['src/s{s:04d}/**']\n")
    f.write("settings:\n  base_branch: main\n")
for i in range(20):
    os.makedirs(f"{root}/src/f{i:02d}", exist_ok=True)
    with open(f"{root}/src/f{i:02d}/mod.rs", "w") as f:
        f.write(f"// file {i}\n")
PY
  git -C "$dir" add -A
  git -C "$dir" commit -q -m "plan: $m streams"
}

# init_all DIR STREAMS: `stream init` of the first STREAMS streams in one run (wall ms).
init_all() {
  local names
  names=$(seq -f 's%04g' 0 $(($2 - 1)) | tr '\n' ' ')
  # shellcheck disable=SC2086
  (cd "$1" && time_ms git-boulder stream init --no-hooks $names)
}

if [ "$I" -gt 0 ]; then
  make_streams "$WORK/init-small" "$I"
  make_streams "$WORK/init-large" "$((I * 10))"
  a=$(init_all "$WORK/init-small" "$I")
  b=$(init_all "$WORK/init-large" "$((I * 10))")
  again() {
    git -C "$1" worktree remove --force .boulder/worktrees/s0000
    (cd "$1" && time_ms git-boulder stream init --no-hooks s0000)
  }
  c=$(again "$WORK/init-small")
  d=$(again "$WORK/init-large")
  per() { awk -v t="$1" -v n="$2" 'BEGIN { printf "%.1f", t / n }'; }
  echo
  echo "stream init, all in one run (wall): $I streams ${a} ms ($(per "$a" "$I") ms per stream)," \
    "$((I * 10)) streams ${b} ms ($(per "$b" "$((I * 10))") ms per stream)," \
    "ratio $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", (a > 0 ? b / a : 0) }') (linear: 10)"
  echo "stream init of one stream whose worktree was removed (wall): beside $((I - 1)) ${c} ms," \
    "beside $((I * 10 - 1)) ${d} ms"
fi
