#!/usr/bin/env bash
# Op-logs of any length: `git boulder log` against `git log` of the same ref, a fresh clone's
# `git boulder pull` of the whole history against `git fetch` of the same ref, a pull of a few
# new ops on top of it, and `git boulder gc` — on an op-log of N ops (completion records, made
# with `git fast-import` by bench/oplog.py). Prints medians, ratios and peak memory. The log rows
# are run twice: on the repacked repository, then with a commit-graph as `git gc` writes it.
#
# usage: bash bench/oplog.sh [RUNS] [OPS]   (defaults 3, 100001; GC_OPS=20000 for the gc row)
source "$(dirname "$0")/common.sh"
RUNS=${1:-3}
N=${2:-100001}

far=$WORK/far
git init -q -b main "$far"
git -C "$far" commit -q --allow-empty -m init
t0=$(now_ms)
python3 "$ROOT/bench/oplog.py" "$N" | git -C "$far" fast-import --quiet --done
echo "made $N ops in $(( $(now_ms) - t0 )) ms"
# The layout a long-lived repository has after git's own gc.
git -C "$far" repack -adq
git clone -q --bare "$far" "$WORK/remote.git"
git -C "$far" remote add origin "$WORK/remote.git"
git -C "$far" push -q origin refs/boulder/prd:refs/boulder/prd

echo "machine: $(machine)"
echo "op-log of $N ops; median of $RUNS runs"
printf '%-44s %10s %10s %7s %9s\n' "job" "boulder ms" "git ms" "ratio" "peak MiB"

# peak_kib CMD…: run once, print the peak resident memory in KiB (GNU time if present, else -).
peak_kib() {
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f '%M' "$@" 2>&1 >/dev/null | tail -1
  else
    "$@" >/dev/null 2>&1
    echo -
  fi
}

row() {
  local label=$1 a=$2 b=$3 mem=$4
  printf '%-44s %10s %10s %7s %9s\n' "$label" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')" "$mem"
}

# cpu_ms CMD…: run once, print the CPU time (user + sys, children included) in milliseconds.
cpu_ms() {
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f '%U %S' "$@" 2>&1 >/dev/null | tail -1 | awk '{ printf "%d\n", ($1 + $2) * 1000 }'
  else
    "$@" >/dev/null 2>&1
    echo 0
  fi
}

# log_rows LABEL: log, whole and first line, against git log; the CPU time of the whole log too
# (the ratio that load on the machine does not skew).
log_rows() {
  local a=() b=() f=() g=() c=() d=()
  for ((i = 0; i < RUNS; i++)); do
    a+=("$(cd "$far" && time_ms git-boulder log prd)")
    b+=("$(cd "$far" && time_ms git log refs/boulder/prd)")
    f+=("$(cd "$far" && time_ms sh -c 'git-boulder log prd | head -1')")
    g+=("$(cd "$far" && time_ms sh -c 'git log refs/boulder/prd | head -1')")
    c+=("$(cd "$far" && cpu_ms git-boulder log prd)")
    d+=("$(cd "$far" && cpu_ms git log refs/boulder/prd)")
  done
  mem=$(cd "$far" && peak_kib git-boulder log prd)
  row "log (every op) vs git log$1" "$(median "${a[@]}")" "$(median "${b[@]}")" "$((mem / 1024))"
  row "  the same, CPU (user + sys)" "$(median "${c[@]}")" "$(median "${d[@]}")" "-"
  row "log | head -1 vs git log | head -1$1" "$(median "${f[@]}")" "$(median "${g[@]}")" "-"
}
log_rows ""
lines=$(cd "$far" && git-boulder log prd | wc -l)
echo "log printed $lines lines for $N ops"
# As git's own gc leaves it: a commit-graph of every ref (`gc.writeCommitGraph`), which
# `git boulder gc` also writes for the op-logs.
git -C "$far" commit-graph write --reachable --no-progress
log_rows ", commit-graph"

# pull of the whole history into a fresh clone, vs git fetch of the same ref (wall, then CPU;
# which side goes first alternates)
a=() b=() ca=() cb=()
for ((i = 0; i < RUNS; i++)); do
  for side in near plain nearc plainc; do
    rm -rf "$WORK/$side"
    git clone -q "$WORK/remote.git" "$WORK/$side"
  done
  if (( i % 2 )); then
    b+=("$(cd "$WORK/plain" && time_ms git fetch -q origin refs/boulder/prd:refs/boulder/prd)")
    a+=("$(cd "$WORK/near" && time_ms git-boulder pull)")
  else
    a+=("$(cd "$WORK/near" && time_ms git-boulder pull)")
    b+=("$(cd "$WORK/plain" && time_ms git fetch -q origin refs/boulder/prd:refs/boulder/prd)")
  fi
  ca+=("$(cd "$WORK/nearc" && cpu_ms git-boulder pull)")
  cb+=("$(cd "$WORK/plainc" && cpu_ms git fetch -q origin refs/boulder/prd:refs/boulder/prd)")
  rm -rf "$WORK/nearc" "$WORK/plainc"
done
[ "$(git -C "$WORK/near" rev-parse refs/boulder/prd)" = "$(git -C "$far" rev-parse refs/boulder/prd)" ] || { echo "pull did not take the history" >&2; exit 1; }
rm -rf "$WORK/near2" && git clone -q "$WORK/remote.git" "$WORK/near2"
mem=$(cd "$WORK/near2" && peak_kib git-boulder pull)
row "pull of $N ops (fresh clone) vs git fetch" "$(median "${a[@]}")" "$(median "${b[@]}")" "$((mem / 1024))"
row "  the same, CPU (user + sys)" "$(median "${ca[@]}")" "$(median "${cb[@]}")" "-"

# a pull of 10 new ops on top of the history: only they are checked
a=() b=()
for ((i = 0; i < RUNS; i++)); do
  tip=$(git -C "$far" rev-parse refs/boulder/prd)
  python3 "$ROOT/bench/oplog.py" 10 refs/boulder/prd $((N + i * 10 + 1)) "$tip" | git -C "$far" fast-import --quiet --done
  git -C "$far" push -q origin refs/boulder/prd:refs/boulder/prd
  a+=("$(cd "$WORK/near" && time_ms git-boulder pull)")
  b+=("$(cd "$WORK/plain" && time_ms git fetch -q origin refs/boulder/prd:refs/boulder/prd)")
done
[ "$(git -C "$WORK/near" rev-parse refs/boulder/prd)" = "$(git -C "$far" rev-parse refs/boulder/prd)" ] || { echo "pull did not take the new ops" >&2; exit 1; }
row "pull of 10 new ops on top vs git fetch" "$(median "${a[@]}")" "$(median "${b[@]}")" "-"

# gc of a history whose objects are all loose (as appends leave them): GC_OPS ops (default
# 20,000: 80,000 loose files), against `git gc` of a second repository holding the same objects.
GC_OPS=${GC_OPS:-20000}
loose=$WORK/loose
for side in loose loose-git; do
  git init -q -b main "$WORK/$side"
  git -C "$WORK/$side" commit -q --allow-empty -m init
  python3 "$ROOT/bench/oplog.py" "$GC_OPS" | git -C "$WORK/$side" fast-import --quiet --done
  for p in "$WORK/$side"/.git/objects/pack/pack-*.pack; do
    mv "$p" "$WORK/unpack.pack"
    rm -f "${p%.pack}.idx" "${p%.pack}.rev"
    git -C "$WORK/$side" unpack-objects -q <"$WORK/unpack.pack"
    rm -f "$WORK/unpack.pack"
  done
done
before=$(git -C "$loose" count-objects | cut -d' ' -f1)
sync
a=$(cd "$loose" && time_ms git-boulder gc)
sync
b=$(cd "$WORK/loose-git" && time_ms git gc -q)
after=$(git -C "$loose" count-objects | cut -d' ' -f1)
row "gc of $before loose objects vs git gc (one run)" "$a" "$b" "-"
echo "loose objects: $before before, $after after git boulder gc; pack: $(du -sk "$loose/.git/objects/pack" | cut -f1) KiB"
