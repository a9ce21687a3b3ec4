"""The Anthropic Messages API as Claude Code (2.1.x) calls it, for fake_model.py.

    handle(req, body, script)

answers one POST whose path ends with /v1/messages or /v1/messages/count_tokens:

* /v1/messages/count_tokens: {"input_tokens": N}, N a rough count of the body; no turn is taken.
* /v1/messages asking for a turn: the next scripted turn (script.take()). A request asks for a turn
  when it offers the model tools (a non-empty "tools" list): the agent loop always does, the main
  agent's and every subagent's (Task/Agent tool), in -p mode as interactively.
* Any other /v1/messages request is a side request of Claude Code's own (a quota check with
  max_tokens 1, a session title or topic asked of the small fast model, a summary): it offers no
  tools, and gets a short text answer without taking a turn, so the script holds only what the
  agent loop sees.
* A request whose system prompt and messages are those of an earlier turn request (a retry after
  a dropped connection or a 5xx) gets that request's turn again, not the next one.

A TURN is a dict:

    {"text": "I am done."}                                        a text answer (stop_reason end_turn)
    {"tool_use": {"name": "Write", "input": {...}}}               one tool call (stop_reason tool_use)
    {"tool_use": [{"name": ..., "input": ...}, ...]}              several tool calls in one answer
    {"tool_use": {"name": "Write", "input_json": "{...}"}}        the input as JSON text, sent as is
    {"text": "...", "tool_use": ...}                              text first, then the tool calls
    {..., "usage": {"input_tokens": 1000, "output_tokens": 50,    the usage the answer reports (any
                    "cache_creation_input_tokens": 200,           field left out is the default)
                    "cache_read_input_tokens": 3000}}

Each tool call gets a fresh id (toolu_fake_N); each answer a message id unique to this server
(msg_fake_PID_N: no two servers of one test give the same id, as the real API never does).
Usage is reported as the API reports it: by default `input_tokens` is a quarter of the request's
JSON length, `output_tokens` a quarter of the answer's, and `cache_creation_input_tokens` and
`cache_read_input_tokens` 0. Streamed, `message_start` carries the input side with
`output_tokens` 1, and `message_delta` the final figures (input, cache and output: cumulative).

The answer is streamed as server-sent events, as the API sends them (message_start, per block
content_block_start, text_delta or input_json_delta chunks, content_block_stop, then
message_delta with stop_reason and message_stop), when the request has "stream": true, and is one
JSON message otherwise. The model named is the request's.
"""
import hashlib
import itertools
import json
import os
import threading

from fake_model import send_json, send_sse

_ids = itertools.count(1)
_lock = threading.Lock()
# The turn given to each turn request, keyed by its system prompt and messages (retries).
_answered = {}

SIDE_ANSWER = "OK"


def _blocks(turn):
    """The content blocks of a turn's answer, and its stop_reason."""
    if not isinstance(turn, dict):
        turn = {"text": str(turn)}
    blocks = []
    if turn.get("text") is not None:
        blocks.append({"type": "text", "text": str(turn["text"])})
    uses = turn.get("tool_use") or []
    if isinstance(uses, dict):
        uses = [uses]
    for use in uses:
        block = {"type": "tool_use", "id": f"toolu_fake_{next(_ids)}", "name": use["name"]}
        if "input_json" in use:
            # The input as JSON text, sent as it is written (escapes the test's own JSON library
            # cannot hold, such as a lone surrogate \ud800).
            block["input"] = json.loads(use["input_json"])
            block["raw"] = use["input_json"]
        else:
            block["input"] = use.get("input", {})
        blocks.append(block)
    if not blocks:
        blocks.append({"type": "text", "text": ""})
    return blocks, ("tool_use" if uses else "end_turn")


def _chunks(text, size=40):
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def _answer(req, body, blocks, stop_reason, scripted=None):
    model = body.get("model") or "claude-fake"
    msg_id = f"msg_fake_{os.getpid()}_{next(_ids)}"
    usage = {
        "input_tokens": max(1, len(json.dumps(body)) // 4),
        "output_tokens": max(1, sum(len(json.dumps(b)) for b in blocks) // 4),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    if isinstance(scripted, dict):
        usage.update({k: v for k, v in scripted.items() if k in USAGE_FIELDS})
    if not body.get("stream"):
        blocks = [{k: v for k, v in b.items() if k != "raw"} for b in blocks]
        send_json(
            req,
            {
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": blocks,
                "stop_reason": stop_reason,
                "stop_sequence": None,
                "usage": usage,
            },
        )
        return
    events = [
        {
            "type": "message_start",
            "message": {
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": dict(usage, output_tokens=1),
            },
        },
        {"type": "ping"},
    ]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            events.append({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
            for part in _chunks(block["text"]):
                events.append(
                    {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": part}}
                )
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            events.append({"type": "content_block_start", "index": index, "content_block": start})
            for part in _chunks(block.get("raw") or json.dumps(block["input"])):
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": part},
                    }
                )
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": dict(usage),
        }
    )
    events.append({"type": "message_stop"})
    send_sse(req, [(e["type"], e) for e in events])


def wants_turn(body):
    """A request of the agent loop: it offers the model tools."""
    return isinstance(body, dict) and isinstance(body.get("tools"), list) and len(body["tools"]) > 0


def handle(req, body, script):
    path = req.path.split("?")[0]
    if not isinstance(body, dict):
        send_json(req, {"type": "error", "error": {"type": "invalid_request_error", "message": "no JSON body"}}, 400)
        return
    if path.endswith("/count_tokens"):
        send_json(req, {"input_tokens": max(1, len(json.dumps(body)) // 4)})
        return
    if not wants_turn(body):
        _answer(req, body, [{"type": "text", "text": SIDE_ANSWER}], "end_turn")
        return
    key = hashlib.sha256(
        json.dumps([body.get("system"), body.get("messages")], sort_keys=True).encode()
    ).hexdigest()
    with _lock:
        if key not in _answered:
            _answered[key] = script.take()
        turn = _answered[key]
    blocks, stop_reason = _blocks(turn)
    _answer(req, body, blocks, stop_reason, turn.get("usage") if isinstance(turn, dict) else None)
