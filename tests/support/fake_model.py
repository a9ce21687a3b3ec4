#!/usr/bin/env python3
"""A fake model server on 127.0.0.1 for driving the real harnesses (Claude Code, Codex, OpenCode)
in tests. It answers each harness's API with turns scripted by the test and logs every request.

    python3 fake_model.py SCRIPT.json LOG.jsonl

It binds a free port on 127.0.0.1 and prints it as the first line of stdout. SCRIPT.json is
{"turns": [TURN, ...]}; each model request that asks for a turn takes the next one, in order, and
once they are used up the answer is a plain "Nothing more to do." text. What a TURN holds is read
by the module of the API that serves it: fake_anthropic.py (Claude Code: /v1/messages, /v1/messages/count_tokens),
fake_openai_responses.py (Codex: /v1/responses), fake_openai_chat.py (/v1/chat/completions).
LOG.jsonl gets one line per request: {"path": ..., "body": ...}.
"""
import http.server
import importlib
import json
import sys
import threading

# The module answering each API path; a path matches when it ends with the key.
ROUTES = {
    "/messages": "fake_anthropic",
    "/messages/count_tokens": "fake_anthropic",
    "/responses": "fake_openai_responses",
    "/chat/completions": "fake_openai_chat",
}


class Script:
    """The scripted turns, taken in order by whichever request asks for one."""

    def __init__(self, path):
        with open(path) as f:
            self.turns = json.load(f)["turns"]
        self.lock = threading.Lock()
        self.taken = 0

    def take(self):
        with self.lock:
            if self.taken < len(self.turns):
                turn = self.turns[self.taken]
                self.taken += 1
                return turn
            return {"text": "Nothing more to do."}


def send_json(req, obj, status=200):
    body = json.dumps(obj).encode()
    req.send_response(status)
    req.send_header("Content-Type", "application/json")
    req.send_header("Content-Length", str(len(body)))
    req.end_headers()
    req.wfile.write(body)
    req.wfile.flush()


def send_sse(req, events):
    """Server-sent events: each event is (name or None, data); data dicts are sent as JSON."""
    req.send_response(200)
    req.send_header("Content-Type", "text/event-stream")
    req.send_header("Cache-Control", "no-cache")
    req.send_header("Connection", "close")
    req.end_headers()
    for name, data in events:
        chunk = ""
        if name is not None:
            chunk += f"event: {name}\n"
        chunk += "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n"
        req.wfile.write(chunk.encode())
    req.wfile.flush()
    req.close_connection = True


def main():
    script = Script(sys.argv[1])
    log_path = sys.argv[2]
    log_lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def record(self, body):
            with log_lock, open(log_path, "a") as f:
                f.write(json.dumps({"method": self.command, "path": self.path, "body": body}) + "\n")

        def do_GET(self):
            self.record(None)
            path = self.path.split("?")[0]
            if path.endswith("/models"):
                send_json(self, {"object": "list", "data": [], "models": []})
            else:
                send_json(self, {"error": {"message": f"no such path: {path}"}}, 404)

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = {"unparsed": raw.decode("utf-8", "replace")}
            self.record(body)
            path = self.path.split("?")[0]
            for suffix, module in ROUTES.items():
                if path.endswith(suffix):
                    importlib.import_module(module).handle(self, body, script)
                    return
            send_json(self, {"error": {"message": f"no such path: {path}"}}, 404)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
