#!/usr/bin/env bash
# Landing check benchmark: what finding the commits recorded for a stream costs a merge when
# refs/notes/boulder holds NOTES notes (default 100,000, for 50 streams, made with fast-import).
# Times `git boulder stream merge docs --dry-run` (a stream with none of them) with no notes ref,
# then the first run with the notes (this machine's notes index is made: every note read once),
# then warm runs (the index is current), then a run after one more note (the index brought up to
# date from the notes trees that changed).
# Usage: bench/landing.sh [RUNS] [NOTES]   (default 5 100000; prints medians in ms)
source "$(dirname "$0")/common.sh"
RUNS=${1:-5}
NOTES=${2:-100000}
echo "machine: $(machine)"

repo="$WORK/repo"
git init -q -b main "$repo"
mkdir -p "$repo/.boulder" "$repo/.agents/tasks" "$repo/docs"
printf 'version: 1\nprd: .agents/tasks/prd.md\nstreams:\n  docs:\n    paths: [docs/**]\nsettings:\n  base_branch: main\n' \
  > "$repo/.boulder/streams.yaml"
printf '# PRD\n\n### [x] US-001: x\n' > "$repo/.agents/tasks/prd.md"
echo x > "$repo/docs/a.md"
git -C "$repo" add -A && git -C "$repo" commit -q -m init
python3 - "$repo" "$NOTES" <<'PY'
import hashlib, subprocess, sys
root, n = sys.argv[1], int(sys.argv[2])
out = ["commit refs/notes/boulder\ncommitter Bench <bench@example.com> 1700000000 +0000\ndata 5\nnotes\n"]
for i in range(n):
    h = hashlib.sha1(str(i).encode()).hexdigest()
    body = ('{"actor":"m%d","at":"2026-11-01T00:00:00Z","boulder":"s%d","host":"h","iteration":%d,'
            '"story":null,"stream":"s%d"}\n' % (i % 3, i % 50, i, i % 50))
    out.append("M 100644 inline %s/%s/%s\ndata %d\n%s\n" % (h[:2], h[2:4], h[4:], len(body), body))
subprocess.run(["git", "-C", root, "fast-import", "--quiet"], input="".join(out), text=True, check=True)
PY
(cd "$repo" && git-boulder stream init docs >/dev/null 2>&1)
run() { (cd "$repo" && time_ms git-boulder stream merge docs --dry-run); }

git -C "$repo" update-ref refs/bench/notes refs/notes/boulder
git -C "$repo" update-ref -d refs/notes/boulder
none=(); for _ in $(seq "$RUNS"); do none+=("$(run)"); done
git -C "$repo" update-ref refs/notes/boulder refs/bench/notes
cold=(); warm=(); one=()
for _ in $(seq "$RUNS"); do
  rm -f "$repo/.git/boulder/notes-index"
  cold+=("$(run)")
  warm+=("$(run)")
  git -C "$repo" notes --ref=boulder add -f -m '{"stream":"s1"}' HEAD 2>/dev/null
  one+=("$(run)")
done
echo "no notes ref:                 $(median "${none[@]}") ms"
echo "$NOTES notes, index made:     $(median "${cold[@]}") ms"
echo "$NOTES notes, index current:  $(median "${warm[@]}") ms"
echo "$NOTES notes, one note new:   $(median "${one[@]}") ms"
