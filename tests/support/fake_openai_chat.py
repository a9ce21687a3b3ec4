"""OpenAI's Chat Completions API (POST /v1/chat/completions), streamed, for fake_model.py: what
OpenCode's bundled `@ai-sdk/openai-compatible` provider calls.

A TURN is {"text": "..."} and/or {"tool_calls": [{"name": TOOL, "arguments": {...}}, ...]}: the
text is streamed as content deltas, then each tool call as one `tool_calls` delta, and the
stream ends with finish_reason `tool_calls` (when there are any) or `stop`, a usage chunk and
`data: [DONE]`. The usage chunk reports what the turn's "usage" says ({"prompt_tokens": N,
"cached_tokens": N, "completion_tokens": N, "reasoning_tokens": N}; any field left out is the
default: 10 prompt of which 0 cached, 5 completion of which 0 reasoning), as OpenAI reports it:
`prompt_tokens_details.cached_tokens` and `completion_tokens_details.reasoning_tokens` count parts
of `prompt_tokens` and `completion_tokens`. A request without `tools` (OpenCode's session title) is answered with a short
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
    want = dict(prompt_tokens=10, cached_tokens=0, completion_tokens=5, reasoning_tokens=0)
    if isinstance(turn.get("usage"), dict):
        want.update({k: v for k, v in turn["usage"].items() if k in want})
    usage["usage"] = {
        "prompt_tokens": want["prompt_tokens"],
        "prompt_tokens_details": {"cached_tokens": want["cached_tokens"]},
        "completion_tokens": want["completion_tokens"],
        "completion_tokens_details": {"reasoning_tokens": want["reasoning_tokens"]},
        "total_tokens": want["prompt_tokens"] + want["completion_tokens"],
    }
    events.append((None, usage))
    events.append((None, "[DONE]"))
    send_sse(req, events)
