"""The OpenAI Responses API (POST /v1/responses, streamed) as Codex CLI 0.171 calls it, for
fake_model.py. Each answer is the server-sent events of one response: `response.created`, for
each output item `response.output_item.added`, its deltas and `response.output_item.done`, then
`response.completed` with `usage`.

A TURN of the script is one of:
    {"text": "..."}                    an assistant message
    {"apply_patch": "*** Begin Patch\n...*** End Patch\n"}
                                       a call of Codex's apply_patch tool with that patch
    {"shell": ["git", "commit", ...]}  a shell command (argv, joined with shell quoting)
A turn may also carry "text" beside a tool call (sent first, as a message), and "usage":
{"input_tokens": N, "cached_tokens": N, "output_tokens": N, "reasoning_tokens": N}, the usage
`response.completed` reports (any field left out is the default: 100 input of which 0 cached, 10
output of which 0 reasoning). As the API does, `input_tokens` counts the cached tokens too
(`input_tokens_details.cached_tokens` says how many of them were), and `output_tokens` the
reasoning ones. Response ids are unique to this server (resp_PID_N), as the API's are.

Tool calls take the form the request's own `tools` declare: apply_patch is a freeform
`custom` tool for the models Codex 0.171 knows (`custom_tool_call` with `input`; a `function`
tool gets a `function_call` with {"input": PATCH}); the shell is `exec_command` ({"cmd": ...}),
else `shell_command` ({"command": ...}), else `shell` ({"command": [argv]}).

Only requests of a turn (`request_kind` "turn" in Codex's `x-codex-turn-metadata`, or none given)
take a scripted turn; a side request (a title, a summary, a review) is answered with a short text
and leaves the script alone.
"""
import itertools
import json
import os
import shlex

from fake_model import send_sse

_ids = itertools.count(1)


def _id(prefix):
    return f"{prefix}_{next(_ids)}"


def is_turn(body):
    """A request of the agent's turn (not a side request of Codex's own)."""
    meta = (body or {}).get("client_metadata") or {}
    raw = meta.get("x-codex-turn-metadata")
    if not raw:
        return True
    try:
        kind = json.loads(raw).get("request_kind")
    except ValueError:
        return True
    return kind in (None, "turn")


def _tools(body):
    out = {}
    for tool in (body or {}).get("tools") or []:
        if "name" in tool:
            out[tool["name"]] = tool.get("type")
    return out


def _message(text):
    mid = _id("msg")
    done = {
        "type": "message",
        "id": mid,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    added = dict(done, status="in_progress", content=[])
    deltas = [
        (
            "response.output_text.delta",
            {"type": "response.output_text.delta", "item_id": mid, "content_index": 0, "delta": text},
        )
    ]
    return added, deltas, done


def _apply_patch(patch, tools):
    call = _id("call")
    if tools.get("apply_patch") == "function":
        done = {
            "type": "function_call",
            "id": _id("fc"),
            "call_id": call,
            "name": "apply_patch",
            "arguments": json.dumps({"input": patch}),
            "status": "completed",
        }
        return dict(done, status="in_progress", arguments=""), [], done
    done = {
        "type": "custom_tool_call",
        "id": _id("ctc"),
        "call_id": call,
        "name": "apply_patch",
        "input": patch,
        "status": "completed",
    }
    deltas = [
        (
            "response.custom_tool_call_input.delta",
            {"type": "response.custom_tool_call_input.delta", "item_id": done["id"], "delta": patch},
        )
    ]
    return dict(done, status="in_progress", input=""), deltas, done


def _shell(argv, tools):
    if "exec_command" in tools:
        name, args = "exec_command", {"cmd": shlex.join(argv)}
    elif "shell_command" in tools:
        name, args = "shell_command", {"command": shlex.join(argv)}
    else:
        name, args = "shell", {"command": argv}
    done = {
        "type": "function_call",
        "id": _id("fc"),
        "call_id": _id("call"),
        "name": name,
        "arguments": json.dumps(args),
        "status": "completed",
    }
    return dict(done, status="in_progress", arguments=""), [], done


def handle(req, body, script):
    turn = script.take() if is_turn(body) else {"text": "ok"}
    tools = _tools(body)
    items = []
    if "text" in turn:
        items.append(_message(turn["text"]))
    if "apply_patch" in turn:
        items.append(_apply_patch(turn["apply_patch"], tools))
    if "shell" in turn:
        items.append(_shell(turn["shell"], tools))
    rid = f"resp_{os.getpid()}_{next(_ids)}"
    events = [("response.created", {"type": "response.created", "response": {"id": rid, "status": "in_progress"}})]
    for index, (added, deltas, done) in enumerate(items):
        events.append(("response.output_item.added", {"type": "response.output_item.added", "output_index": index, "item": added}))
        for name, data in deltas:
            events.append((name, dict(data, output_index=index)))
        events.append(("response.output_item.done", {"type": "response.output_item.done", "output_index": index, "item": done}))
    want = dict(input_tokens=100, cached_tokens=0, output_tokens=10, reasoning_tokens=0)
    if isinstance(turn.get("usage"), dict):
        want.update({k: v for k, v in turn["usage"].items() if k in want})
    usage = {
        "input_tokens": want["input_tokens"],
        "input_tokens_details": {"cached_tokens": want["cached_tokens"]},
        "output_tokens": want["output_tokens"],
        "output_tokens_details": {"reasoning_tokens": want["reasoning_tokens"]},
        "total_tokens": want["input_tokens"] + want["output_tokens"],
    }
    events.append(
        (
            "response.completed",
            {
                "type": "response.completed",
                "response": {"id": rid, "status": "completed", "output": [i[2] for i in items], "usage": usage},
            },
        )
    )
    send_sse(req, events)
