#!/usr/bin/env python3
"""Write a `git fast-import` stream of a valid op-log to stdout.

usage: python3 bench/oplog.py N [REF] [FIRST] [PARENT] | git fast-import --quiet --done

The op-log is the completion records (`refs/boulder/prd` by default): ops number FIRST (default 1)
to FIRST+N-1, each a `done` op by actor `bench` recording story US-(i mod 50), one second apart.
Every commit holds `op.json` and `state.json` as git-boulder checks them (the state after op i is
op i applied to the state after op i-1). With PARENT (the commit of op FIRST-1), the ops continue
that history. Blobs are written inline, one commit per op.
"""
import json
import sys
import time


def main():
    n = int(sys.argv[1])
    ref = sys.argv[2] if len(sys.argv) > 2 else "refs/boulder/prd"
    first = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    parent = sys.argv[4] if len(sys.argv) > 4 else None
    w = sys.stdout.buffer.write
    done = sorted({f"US-{k % 50:03d}" for k in range(1, min(first, 51))})
    for i in range(first, first + n):
        t = 1_700_000_000 + i
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
        story = f"US-{i % 50:03d}"
        if story not in done:
            done.append(story)
            done.sort()
        op = {"v": 1, "kind": "done", "lamport": i, "at": at, "actor": "bench", "data": {"ids": [story]}}
        state = {"done": done, "updated_at": at, "lamport": i}
        op_b = (json.dumps(op, indent=2) + "\n").encode()
        st_b = (json.dumps(state, indent=2) + "\n").encode()
        msg = f"boulder: done\n\n{json.dumps(op['data'], separators=(',', ':'))}\n".encode()
        w(f"commit {ref}\n".encode())
        w(f"committer git-boulder <git-boulder@localhost> {t} +0000\n".encode())
        w(f"data {len(msg)}\n".encode() + msg)
        if i == first and parent:
            w(f"from {parent}\n".encode())
        w(b"deleteall\n")
        w(f"M 100644 inline op.json\ndata {len(op_b)}\n".encode() + op_b + b"\n")
        w(f"M 100644 inline state.json\ndata {len(st_b)}\n".encode() + st_b + b"\n")
    w(b"done\n")


if __name__ == "__main__":
    main()
