# Shared helpers for the benchmark scripts: a fixed git environment, timing, medians.
# Source it; needs bash, git, python3 and a release build of git-boulder.

set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${BOULDER_BIN:-$ROOT/target/release/git-boulder}
if [ ! -x "$BIN" ]; then
  (cd "$ROOT" && cargo build --release --quiet)
fi
export PATH="$(dirname "$BIN"):$PATH"
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null TZ=UTC
export GIT_AUTHOR_NAME=Bench GIT_AUTHOR_EMAIL=bench@example.com
export GIT_COMMITTER_NAME=Bench GIT_COMMITTER_EMAIL=bench@example.com
WORK=$(mktemp -d "${TMPDIR:-/tmp}/boulder-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# now_ms: wall clock in milliseconds.
now_ms() { python3 -c 'import time; print(int(time.monotonic()*1000))'; }

# median of the numbers given as arguments.
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

# time_ms CMD…: run once, print elapsed milliseconds (using nanosecond date).
time_ms() {
  local s e
  s=$(date +%s%N)
  "$@" >/dev/null 2>&1
  e=$(date +%s%N)
  echo $(( (e - s) / 1000000 ))
}

# make_repo DIR NFILES: a repository with NFILES small files spread over 100 directories.
make_repo() {
  local dir=$1 n=$2
  mkdir -p "$dir"
  git -C "$dir" init -q -b main
  python3 - "$dir" "$n" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, "src", f"mod{i % 100:03d}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i:05d}.txt"), "w") as f:
        f.write(f"file {i}\n" * 4)
PY
  git -C "$dir" add -A
  git -C "$dir" commit -q -m "initial: $n files"
}

machine() { echo "$(nproc) cores, $(uname -m), $(git --version), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"; }
