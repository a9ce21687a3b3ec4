#!/bin/sh
# git-boulder @HOOK@ hook shim (pass-through): git-boulder runs nothing here; it runs the @HOOK@
# hook of the folder core.hooksPath named before `git boulder hooks install`.
@CHAIN@[ -x "$orig" ] && exec "$orig" "$@"
exit 0
