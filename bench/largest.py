#!/usr/bin/env python3
"""The largest source files and functions of src/, by lines (tests and `mod tests` left out).

    python3 bench/largest.py [N]

A function is counted from its `fn` line to its closing brace (found by brace depth, skipping
strings, chars and comments well enough for this code base)."""
import os
import re
import sys

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+([A-Za-z_][A-Za-z0-9_]*)")


def strip(line):
    """The line without string/char literal contents and // comments (for brace counting)."""
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])'", "''", line)
    return line.split("//", 1)[0]


files, funcs = [], []
for dirpath, _, names in os.walk(ROOT):
    for name in names:
        if not name.endswith(".rs") or name == "tests.rs":
            continue
        path = os.path.join(dirpath, name)
        rel = os.path.relpath(path, os.path.join(ROOT, ".."))
        lines = open(path, encoding="utf-8").read().split("\n")
        end = len(lines)
        for i, l in enumerate(lines):
            if re.match(r"^#\[cfg\(test\)\]", l) and i + 1 < len(lines) and lines[i + 1].startswith("mod tests"):
                end = i
                break
        files.append((end, rel))
        i = 0
        while i < end:
            m = FN.match(lines[i])
            if not m:
                i += 1
                continue
            depth, started, j = 0, False, i
            while j < end:
                s = strip(lines[j])
                if not started and ";" in s and "{" not in s:
                    break
                depth += s.count("{") - s.count("}")
                started = started or "{" in s
                if started and depth <= 0:
                    break
                j += 1
            if started:
                funcs.append((j - i + 1, f"{rel}:{i + 1} {m.group(6)}"))
            i += 1

print(f"largest files (lines, without unit tests), of {len(files)}:")
for n, rel in sorted(files, reverse=True)[:N]:
    print(f"  {n:5}  {rel}")
print(f"largest functions (lines), of {len(funcs)}:")
for n, where in sorted(funcs, reverse=True)[:N]:
    print(f"  {n:5}  {where}")
