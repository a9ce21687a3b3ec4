#!/usr/bin/env python3
"""The shape of the code, as counts anyone can reproduce (docs/architecture.md, "Measuring").

    python3 bench/shape.py [ROOT]      # ROOT: a checkout (default: this one)

Prints, for src/: files over 800 lines and functions over 120 lines (unit tests left out, counted
by brace depth), sites that fold an error into a message with `{e}`,
`Result<_, String>`, commit ids kept as strings in the records (ops, the merge journal) and the
places that parse them back; for tests/: tests whose only checks of output are `contains`.
Text-level counts: good for before/after on one tree, not a proof of anything."""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+([A-Za-z_][A-Za-z0-9_]*)")


def strip(line):
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])'", "''", line)
    return line.split("//", 1)[0]


def sources(folder):
    for dirpath, _, names in os.walk(os.path.join(ROOT, folder)):
        for name in sorted(names):
            if name.endswith(".rs"):
                path = os.path.join(dirpath, name)
                yield os.path.relpath(path, ROOT), open(path, encoding="utf-8").read().split("\n")


def without_unit_tests(rel, lines):
    if rel.endswith("/tests.rs"):
        return []
    for i, l in enumerate(lines):
        if l.startswith("#[cfg(test)]") and i + 1 < len(lines) and re.match(r"^(pub(\(crate\))? )?mod tests", lines[i + 1]):
            return lines[:i]
    return lines


def functions(lines):
    """(length, line number, name) of each fn with a body, counted by brace depth."""
    out, i = [], 0
    while i < len(lines):
        m = FN.match(lines[i])
        if not m:
            i += 1
            continue
        depth, started, j = 0, False, i
        while j < len(lines):
            s = strip(lines[j])
            if not started and ";" in s and "{" not in s:
                break
            depth += s.count("{") - s.count("}")
            started = started or "{" in s
            if started and depth <= 0:
                break
            j += 1
        if started:
            out.append((j - i + 1, i + 1, m.group(6)))
        i += 1
    return out


files, funcs, folds, string_results = [], [], 0, 0
for rel, lines in sources("src"):
    code = without_unit_tests(rel, lines)
    files.append((len(code), rel))
    funcs += [(n, f"{rel}:{at} {name}") for n, at, name in functions(code)]
    text = "\n".join(code)
    folds += len(re.findall(r"format!\([^;]*\{e(:\?)?\}", text))
    string_results += len(re.findall(r"Result<[^<>;]*(<[^<>]*>)?[^<>;]*,\s*String>", text))

# Commit ids kept as strings in records: fields named for a commit, typed String-ish, in the op
# and journal types; and the places outside git/ that parse hex back into an id.
ID_FIELD = re.compile(
    r"^\s*(pub\s+)?(commit|commits|tip|stream_tip|landed|base_before|stream_before|from|to|backup|reverted|parents|"
    r"stream_old|stream_new|base_old|base_new|prd_from|prd_to|stream_seen|local_base|head|old|new)\s*:\s*"
    r"(String|Option<String>|Opt<String>|\[String;\s*\d+\]|Vec<String>)"
)
record_files = [r for r in (rel for _, rel in files) if r.startswith(("src/state/op", "src/merge/journal"))]
string_ids = 0
for rel, lines in sources("src"):
    if rel in record_files:
        string_ids += sum(1 for l in without_unit_tests(rel, lines) if ID_FIELD.match(l))
parse_backs = 0
for rel, lines in sources("src"):
    if not rel.startswith("src/git/"):
        text = "\n".join(without_unit_tests(rel, lines))
        parse_backs += len(re.findall(r"ObjectId::from_hex|journal::id\(|\bid\(&j\.|parse_oid\(", text))

# Tests: a #[test] fn whose checks of output are `contains` only (no snapshot, no assert_eq on
# the output). Helpers that a test calls are not followed.
tests, contains_only = 0, 0
for rel, lines in sources("tests"):
    if "/common/" in rel or "/support/" in rel:
        continue
    for i, l in enumerate(lines):
        if l.strip() != "#[test]":
            continue
        j = i + 1
        while j < len(lines) and not FN.match(lines[j]):
            j += 1
        body = functions(lines[j:])
        if not body:
            continue
        n = body[0][0]
        text = "\n".join(lines[j : j + n])
        tests += 1
        if ".contains(" in text and not re.search(r"assert_shown!|assert_snapshot!|assert_json_snapshot!", text):
            contains_only += 1

big_files = sorted((n, r) for n, r in files if n > 800)
long_funcs = sorted((n, w) for n, w in funcs if n > 120)
print(f"src files: {len(files)}; largest: {max(files)[0]} lines ({max(files)[1]})")
print(f"files over 800 lines: {len(big_files)}" + "".join(f"\n  {n:5}  {r}" for n, r in reversed(big_files)))
print(f"longest function: {max(funcs)[0]} lines ({max(funcs)[1]})")
print(f"functions over 120 lines: {len(long_funcs)}" + "".join(f"\n  {n:5}  {w}" for n, w in reversed(long_funcs)))
print(f"errors folded into a message with {{e}}: {folds}")
print(f"Result<_, String>: {string_results}")
print(f"commit ids kept as strings in ops and the merge journal: {string_ids} fields; parsed back outside git/: {parse_backs}")
print(f"tests: {tests}; checking output only with contains: {contains_only} ({100 * contains_only // max(tests, 1)}%)")
