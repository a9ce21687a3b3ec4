"""OpenAI's Chat Completions API (POST /v1/chat/completions), streamed, for fake_model.py: what
OpenCode's bundled `@ai-sdk/openai-compatible` provider calls.

A TURN is {"text": "..."} and/or {"tool_calls": [{"name": TOOL, "arguments": {...}}, ...]}: the
text is streamed as content deltas, then each tool call as one `tool_calls` delta, and the
stream ends with finish_reason `tool_calls` (when there are any) or `stop`, a usage chunk and
`data: [DONE]`. A request without `tools` (OpenCode's session title) is answered with a short
text without taking a turn, so scripted turns go to the agent's own requests only.
"""
import json
import time

from fake_model import send_json, send_sse


def chunk(ident, delta, finish=None):
    return {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def handle(req, body, script):
    body = body or {}
    turn = script.take() if body.get("tools") else {"text": "Fake session"}
    ident = f"chatcmpl-{script.taken}"
    if not body.get("stream"):
        message = {"role": "assistant", "content": turn.get("text", "")}
        send_json(req, {"id": ident, "object": "chat.completion", "model": "fake",
                        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})
        return
    events = [(None, chunk(ident, {"role": "assistant", "content": ""}))]
    if turn.get("text"):
        events.append((None, chunk(ident, {"content": turn["text"]})))
    calls = turn.get("tool_calls") or []
    for i, call in enumerate(calls):
        delta = {"tool_calls": [{
            "index": i,
            "id": f"call_{script.taken}_{i}",
            "type": "function",
            "function": {"name": call["name"], "arguments": json.dumps(call.get("arguments", {}))},
        }]}
        events.append((None, chunk(ident, delta)))
    events.append((None, chunk(ident, {}, "tool_calls" if calls else "stop")))
    usage = chunk(ident, {})
    usage["choices"] = []
    usage["usage"] = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    events.append((None, usage))
    events.append((None, "[DONE]"))
    send_sse(req, events)
