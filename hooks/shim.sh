#!/bin/sh
# git-boulder @HOOK@ hook shim. Written by `git boulder hooks install`;
# `git boulder hooks uninstall` puts back what was here before (kept as @HOOK@.boulder-orig).
# The previous hook runs first, with the same arguments and the same stdin; its failure fails
# the git command. BOULDER_SKIP_HOOKS=1 skips git-boulder's part for one command.
# The folder of this script, without starting a process (git runs hooks by their path).
case $0 in */*) here=${0%/*} ;; *) here=. ;; esac
orig="$here/@HOOK@.boulder-orig"
@CHAIN@input=""
if [ -x "$orig" ]; then
  if [ @STDIN@ = 1 ]; then
    # Both hooks read the same stdin: keep it in a file and give each a copy.
    input=$(mktemp "${TMPDIR:-/tmp}/git-boulder-hook.XXXXXX") || exit 1
    trap 'rm -f "$input"' EXIT
    cat > "$input"
    "$orig" "$@" < "$input" || exit $?
  else
    "$orig" "$@" || exit $?
  fi
fi
[ "${BOULDER_SKIP_HOOKS:-}" = 1 ] && exit 0
if ! command -v git-boulder >/dev/null 2>&1; then
  echo "git-boulder: not found on PATH; its @HOOK@ hook did nothing" >&2
  exit 0
fi
if [ -n "$input" ]; then
  git-boulder hook @HOOK@ "$@" < "$input"
else
  exec git-boulder hook @HOOK@ "$@"
fi
