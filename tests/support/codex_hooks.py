#!/usr/bin/env python3
"""Ask the real Codex about hooks through `codex app-server` (JSON-RPC over stdio), as its TUI does.

    codex_hooks.py CODEX list CWD...            print hooks/list's `data` as JSON
    codex_hooks.py CODEX trust-project DIR      trust the project DIR
    codex_hooks.py CODEX trust CWD COMMAND      trust every hook listed for CWD that runs COMMAND

Trusting writes, with `config/batchWrite`, exactly what Codex 0.171's TUI writes into
$CODEX_HOME/config.toml when the user chooses "Trust and continue" for a folder
(`[projects."DIR"] trust_level = "trusted"`) and "Trust all and continue" at "Hooks need review"
(`[hooks.state."KEY"] trusted_hash = CURRENT_HASH`). Codex's environment (HOME, CODEX_HOME) is
this process's.
"""
import json
import subprocess
import sys


class AppServer:
    def __init__(self, codex):
        self.p = subprocess.Popen(
            [codex, "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        self.next_id = 1
        self.call("initialize", {"clientInfo": {"name": "git-boulder-tests", "version": "1"}})
        self.send({"method": "initialized"})

    def send(self, msg):
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()

    def call(self, method, params):
        rid = self.next_id
        self.next_id += 1
        self.send({"id": rid, "method": method, "params": params})
        for line in self.p.stdout:
            msg = json.loads(line)
            if msg.get("id") == rid:
                if "error" in msg:
                    sys.exit(f"{method}: {msg['error']}")
                return msg["result"]
        sys.exit(f"{method}: codex app-server ended without answering")

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def main():
    codex, what, *args = sys.argv[1:]
    server = AppServer(codex)
    if what == "list":
        print(json.dumps(server.call("hooks/list", {"cwds": args})["data"]))
    elif what == "trust-project":
        edit = {"keyPath": f'projects."{args[0]}".trust_level', "mergeStrategy": "upsert", "value": "trusted"}
        server.call("config/batchWrite", {"edits": [edit]})
    elif what == "trust":
        cwd, command = args
        hooks = server.call("hooks/list", {"cwds": [cwd]})["data"][0]["hooks"]
        edits = [
            {"keyPath": f'hooks.state."{h["key"]}".trusted_hash', "mergeStrategy": "upsert", "value": h["currentHash"]}
            for h in hooks
            if h.get("command") == command
        ]
        if not edits:
            sys.exit(f"no hook running {command!r} is listed for {cwd}")
        server.call("config/batchWrite", {"edits": edits})
        print(len(edits))
    else:
        sys.exit(f"unknown command {what}")
    server.close()


if __name__ == "__main__":
    main()
