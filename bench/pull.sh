#!/usr/bin/env bash
# Pull benchmark (issue: fast at any size): `git boulder pull` of a remote's state vs `git fetch`
# of the same refs into the same place, same run.
# The remote holds the op-logs of 20 streams and of BOULDERS boulders (each a few ops) and the notes
# of 20 commits. Each run starts both sides from fresh copies of one clone that has none of the
# state, so every ref is new: git-boulder fetches (git fetch) and checks and takes in every op-log;
# git only fetches. Then a second case: the remote adds one op to every boulder and both sides,
# already up to date before, pull again (fast-forwards). Which side goes first alternates.
# Usage: bench/pull.sh [RUNS] [BOULDERS]   (default 5 runs, 100 boulders)
source "$(dirname "$0")/common.sh"
RUNS=${1:-5}
NB=${2:-100}
echo "machine: $(machine)"

fail() { echo "FAIL: $*" >&2; exit 1; }

origin="$WORK/origin"
make_repo "$origin" 200
mkdir -p "$origin/.boulder" "$origin/.agents/tasks"
{
  echo "version: 1"; echo "streams:"
  for i in $(seq 1 20); do printf '  s%02d:\n    paths: [src/mod%03d/**]\n' "$i" "$i"; done
  echo "settings:"; echo "  base_branch: main"; echo "  path_overlap: ignore"
} > "$origin/.boulder/streams.yaml"
printf '# PRD\n\n### [ ] US-001: x\n' > "$origin/.agents/tasks/prd.md"
git -C "$origin" add -A && git -C "$origin" commit -q -m plan
# The clone both sides start from: the branches, none of the state.
git clone -q "$origin" "$WORK/clone"
(cd "$origin" && git-boulder stream init s01 >/dev/null 2>&1) || fail "stream init"
(cd "$origin" && git-boulder hooks install >/dev/null 2>&1) || fail "hooks install"
wt="$origin/.boulder/worktrees/s01"
for i in $(seq 1 20); do echo "$i" > "$wt/src/mod001/n$i.txt"; git -C "$wt" add -A; git -C "$wt" commit -q -m "n$i"; done
for i in $(seq 1 "$NB"); do
  (cd "$origin" && git-boulder create "b$i" --stream "s$(printf %02d $(( (i % 20) + 1 )))" >/dev/null 2>&1) || fail "create b$i"
  (cd "$origin" && git-boulder checkpoint -m "start $i" --boulder "b$i" >/dev/null 2>&1) || fail "checkpoint b$i"
done
nrefs=$(git -C "$origin" for-each-ref refs/boulder refs/notes | wc -l)
echo "remote state: $nrefs refs ($NB boulders, their streams, the notes)"

specs=("+refs/boulder/*:refs/boulder-remotes/origin/*" "+refs/notes/boulder*:refs/boulder-remotes/origin/notes/boulder*")
boulder_pull() { (cd "$1" && git-boulder pull origin); }
git_fetch() { git -C "$1" fetch -q origin "${specs[@]}"; }
timed() {
  local name=$1 s e; shift
  s=$(date +%s%N)
  "$@" >"$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log" >&2; fail "$name exited non-zero: $*"; }
  e=$(date +%s%N)
  echo $(( (e - s) / 1000000 ))
}
check() {  # both sides hold the remote's op-logs
  local n
  n=$(git -C "$WORK/a" for-each-ref refs/boulder/boulders | wc -l)
  [ "$n" -ge "$NB" ] || fail "git-boulder side has $n boulder op-logs, not $NB"
  [ "$(git -C "$WORK/a" rev-parse refs/boulder/boulders/b1)" = "$(git -C "$origin" rev-parse refs/boulder/boulders/b1)" ] || fail "b1 differs"
  [ "$(git -C "$WORK/b" rev-parse -q --verify refs/boulder-remotes/origin/boulders/b1)" = "$(git -C "$origin" rev-parse refs/boulder/boulders/b1)" ] || fail "git side lacks b1"
}

fb=(); fg=(); ub=(); ug=()
for r in $(seq 1 "$RUNS"); do
  rm -rf "$WORK/a" "$WORK/b"
  cp -a "$WORK/clone" "$WORK/a"; cp -a "$WORK/clone" "$WORK/b"
  sync
  if (( r % 2 )); then
    tb=$(timed pull boulder_pull "$WORK/a"); tg=$(timed fetch git_fetch "$WORK/b")
  else
    tg=$(timed fetch git_fetch "$WORK/b"); tb=$(timed pull boulder_pull "$WORK/a")
  fi
  fb+=("$tb"); fg+=("$tg")
  check
  # The remote moves on by one op per boulder; both pull again.
  for i in $(seq 1 "$NB"); do
    (cd "$origin" && git-boulder checkpoint -m "run $r" --boulder "b$i" >/dev/null 2>&1) || fail "checkpoint b$i"
  done
  sync
  if (( r % 2 )); then
    tb=$(timed pull boulder_pull "$WORK/a"); tg=$(timed fetch git_fetch "$WORK/b")
  else
    tg=$(timed fetch git_fetch "$WORK/b"); tb=$(timed pull boulder_pull "$WORK/a")
  fi
  ub+=("$tb"); ug+=("$tg")
  # (A git-boulder that misread git's report of fast-forwarded refs left them for the next pull.)
  [ "$(git -C "$WORK/a" rev-parse refs/boulder/boulders/b1)" = "$(git -C "$origin" rev-parse refs/boulder/boulders/b1)" ] ||
    echo "WARNING: run $r: git-boulder did not take the fast-forwarded op-logs in (b1 differs)"
done
echo "  runs (ms): first pull git-boulder ${fb[*]}; git ${fg[*]}; next pull git-boulder ${ub[*]}; git ${ug[*]}"
mb=$(median "${fb[@]}"); mg=$(median "${fg[@]}")
echo "pull of $nrefs new refs: git-boulder ${mb} ms, git fetch ${mg} ms, ratio $(python3 -c "print(round($mb/$mg, 2))")"
mb=$(median "${ub[@]}"); mg=$(median "${ug[@]}")
echo "pull of one new op on each of $NB boulders: git-boulder ${mb} ms, git fetch ${mg} ms, ratio $(python3 -c "print(round($mb/$mg, 2))")"
