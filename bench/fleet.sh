#!/usr/bin/env bash
# Fleet benchmark: N trivial streams landed by `git boulder work --remote origin` on 1, 3 and 6
# machines (clones) against one bare remote served by `git daemon` on 127.0.0.1.
# Each stream has one story; its agent writes one file in the stream's own folder, marks the story
# done and commits — so what is measured is the fleet's own cost: claims, pulls and pushes of
# state, progress pushes, the merge queue's rounds and the races lost in it.
# Printed per fleet size: wall time, landings per minute, lost rounds (merges that found the
# remote's base moved and went round again), and the ratio to the serial floor: N × the time one
# worker takes to land one stream alone (measured first, median of 3).
# After each run every stream must be MERGED on the remote, the base linear, each story's commit
# on it exactly once, and no claim left.
# Usage: bench/fleet.sh [N] [WORKERS…]   (default 12 streams; workers 1 3 6)
source "$(dirname "$0")/common.sh"
N=${1:-12}
shift || true
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(1 3 6)
echo "machine: $(machine)"
echo "streams: $N, one story each; workers: ${SIZES[*]}"

fail() { echo "FAIL: $*" >&2; exit 1; }

# The agent: one file in the stream's folder, the story marked done, one commit.
cat > "$WORK/agent.sh" <<'SH'
#!/bin/sh
set -e
mkdir -p "src/$BOULDER_STREAM"
echo "$BOULDER_STORY" > "src/$BOULDER_STREAM/$BOULDER_STORY.txt"
sed -i "s/### \[ \] $BOULDER_STORY:/### [x] $BOULDER_STORY:/" "$BOULDER_PRD"
git add -A
git commit -q -m "$BOULDER_STREAM: $BOULDER_STORY"
SH

# make_seed DIR COUNT: a repository with COUNT independent one-story streams.
make_seed() {
  local dir=$1 n=$2
  make_repo "$dir" 200
  mkdir -p "$dir/.boulder" "$dir/.agents/tasks"
  {
    printf 'version: 1\nprd: .agents/tasks/prd.md\nstreams:\n'
    for i in $(seq 1 "$n"); do
      printf '  s%03d:\n    stories: [US-%03d]\n    paths: [src/s%03d/**]\n' "$i" "$i" "$i"
    done
    printf 'settings:\n  base_branch: main\n  merge_strategy: rebase\n  boulder:\n    cooldown: 10ms\n    max_failures: 2\n'
  } > "$dir/.boulder/streams.yaml"
  {
    printf '# PRD: fleet bench\n\n## Stories\n\n'
    for i in $(seq 1 "$n"); do printf '### [ ] US-%03d: part %d\nIn `src/s%03d/`.\n\n' "$i" "$i" "$i"; done
  } > "$dir/.agents/tasks/prd.md"
  git -C "$dir" add -A
  git -C "$dir" commit -q -m "plan: $n streams"
}

# A free port for git daemon.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$WORK/served"
git daemon --reuseaddr --listen=127.0.0.1 --port="$port" --base-path="$WORK/served" --export-all \
  --enable=receive-pack "$WORK/served" >"$WORK/daemon.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null; rm -rf "$WORK"' EXIT
python3 - "$port" <<'PY' || fail "git daemon did not listen on port $port"
import socket, sys, time
for _ in range(400):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1]))).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.025)
sys.exit(1)
PY

# fleet NAME COUNT WORKERS: land COUNT streams with WORKERS machines; prints "ms lost".
fleet() {
  local name=$1 n=$2 w=$3 seed="$WORK/seed-$1"
  rm -rf "$seed" "$WORK/served/$name.git" "$WORK/m-$name"
  make_seed "$seed" "$n"
  git clone -q --bare "$seed" "$WORK/served/$name.git"
  local url="git://127.0.0.1:$port/$name.git"
  mkdir -p "$WORK/m-$name"
  for i in $(seq 1 "$w"); do
    local m="$WORK/m-$name/m$i"
    git clone -q "$url" "$m"
    git -C "$m" config boulder.actor "m$i"
    (cd "$m" && git-boulder trust >/dev/null 2>&1 || true)
  done
  local s e pids=()
  s=$(date +%s%N)
  for i in $(seq 1 "$w"); do
    local m="$WORK/m-$name/m$i"
    (cd "$m" && exec git-boulder work --remote origin --poll 100ms --parallel 1 -- sh "$WORK/agent.sh") \
      >"$m.out" 2>"$m.err" &
    pids+=($!)
  done
  local bad=0
  for p in "${pids[@]}"; do wait "$p" || bad=1; done
  e=$(date +%s%N)
  if [ $bad = 1 ]; then
    for i in $(seq 1 "$w"); do tail -20 "$WORK/m-$name/m$i.out" "$WORK/m-$name/m$i.err" >&2; done
    fail "$name: a worker exited non-zero"
  fi
  # Check with plain git: every story landed once, linear, no claim left.
  local check="$WORK/m-$name/check"
  git clone -q "$url" "$check"
  local log; log=$(git -C "$check" log --format=%s main)
  for i in $(seq 1 "$n"); do
    local c; c=$(grep -c "^s$(printf %03d "$i"): US-$(printf %03d "$i")\$" <<<"$log" || true)
    [ "$c" = 1 ] || fail "$name: stream s$(printf %03d "$i") landed $c times"
  done
  [ -z "$(git -C "$check" rev-list --merges main)" ] || fail "$name: merge commits on main"
  [ -z "$(git ls-remote "$url" 'refs/boulder/claims/*')" ] || fail "$name: claims left on the remote"
  local lost; lost=$(cat "$WORK"/m-"$name"/m*.err | grep -c 'moved while this merge ran' || true)
  echo "$(( (e - s) / 1000000 )) $lost"
}

one=()
for r in 1 2 3; do
  read -r ms _ < <(fleet "floor$r" 1 1)
  one+=("$ms")
done
floor_one=$(median "${one[@]}")
echo "one uncontended landing (1 stream, 1 worker): median ${floor_one} ms (${one[*]})"
floor=$(( floor_one * N ))
echo "serial floor for $N streams: ${floor} ms"
printf '%-8s %10s %14s %12s %16s\n' workers wall_ms landings/min lost_rounds "ratio to floor"
for w in "${SIZES[@]}"; do
  read -r ms lost < <(fleet "w$w" "$N" "$w")
  awk -v w="$w" -v ms="$ms" -v n="$N" -v lost="$lost" -v floor="$floor" \
    'BEGIN { printf "%-8s %10d %14.1f %12d %16.2f\n", w, ms, n * 60000 / ms, lost, ms / floor }'
done
