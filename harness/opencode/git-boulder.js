// git-boulder OpenCode plugin: written by `git boulder agent install opencode`, removed by
// `git boulder agent uninstall opencode`. Edits here are kept by uninstall, and reported by
// `git boulder agent status` and `git boulder doctor`.
//
// Before a tool writes a file (`tool.execute.before`), ask `git boulder agent hook opencode`
// whether this stream may change it, and throw git-boulder's reason when not: OpenCode then
// refuses the tool with that message. When any session goes idle (under `opencode run` too),
// hand its assistant messages' tokens and cost to `git boulder agent hook opencode` (a `Stop`),
// which records what is new on the stream; when it answers that the budget is spent, show why
// and push nothing. When a main session goes idle, ask `git boulder check
// --json` (the boulder gates: idle time, cooldown, max failures, completion detection); when it
// says enforce, show a toast and send the enforcement message to that session, with the agent and
// model of the session's last prompt. The plugin keeps no state: the gates, cooldowns and counters
// are git-boulder's, in its op-log. ESM, no dependencies; runs under Bun and Node >= 20.

import { execFile } from "node:child_process";

const CHECK_TIMEOUT_MS = 30_000;
// OpenCode's tools that write files; every other tool goes on unasked.
const EDIT_TOOLS = ["edit", "write", "multiedit", "patch", "apply_patch"];
// Every enforcement message of git-boulder starts so — `Boulder [Parent: 12] → [Child: 5]` for a
// child boulder, `Boulder auth (iteration 3)` for one of its own: a prompt of the plugin's own.
const ENFORCEMENT_HEAD = /^Boulder (\[|[^\n]* \(iteration \d+\)\n)/;
// The end of the agent's last message is enough for completion detection.
const MESSAGE_LIMIT = 8_000;
// The most messages whose spend one idle hands over (the newest): git-boulder records each once.
const SPEND_LIMIT = 2_000;

// The session id of an idle event: `session.status` with status idle, or the older `session.idle`
// from an OpenCode that sends no `session.status`. A current OpenCode announces every idle twice,
// `session.status` first and then `session.idle`, and answers `promptAsync` before it stores the
// prompt: a second check of the same idle would still find the agent's "I am done" as the last
// message and push it twice. So once `session.status` has been seen, `session.idle` is ignored.
function idleSessionID(event, seen) {
  if (!event || typeof event !== "object") return null;
  const props = event.properties && typeof event.properties === "object" ? event.properties : {};
  const id = typeof props.sessionID === "string" && props.sessionID ? props.sessionID : null;
  if (event.type === "session.status") {
    seen.status = true;
    return props.status && props.status.type === "idle" ? id : null;
  }
  if (event.type === "session.idle" && !seen.status) return id;
  return null;
}

// Sessions whose turn the user aborted (Esc), from `session.error` with a `MessageAbortedError`
// until the session is busy again. OpenCode 1.18 announces such a turn idle before it marks its
// message aborted (`session.error`, idle, then the message's error, then idle again), so the
// message alone cannot tell at the first idle.
function noteAbort(event, aborted) {
  if (!event || typeof event !== "object") return;
  const props = event.properties && typeof event.properties === "object" ? event.properties : {};
  const id = typeof props.sessionID === "string" ? props.sessionID : null;
  if (!id) return;
  if (event.type === "session.error" && props.error && props.error.name === "MessageAbortedError") aborted.add(id);
  if (event.type === "session.status" && props.status && props.status.type === "busy") aborted.delete(id);
}

// The SDK answers `{ data, error }`; a bare value is taken as it is.
function dataOf(response) {
  if (response && typeof response === "object" && "data" in response) return response.data;
  return response;
}

async function sessionInfo(client, id) {
  try {
    const info = dataOf(await client.session.get({ path: { id } }));
    return info && typeof info === "object" ? info : null;
  } catch {
    return null;
  }
}

function textOf(entry) {
  const parts = entry && Array.isArray(entry.parts) ? entry.parts : [];
  return parts
    .filter((p) => p && p.type === "text" && typeof p.text === "string" && !p.synthetic)
    .map((p) => p.text)
    .join("\n")
    .trim();
}

// The session's messages, oldest first; [] when they cannot be read.
async function messagesOf(client, id) {
  try {
    if (typeof client.session.messages !== "function") return [];
    const list = dataOf(await client.session.messages({ path: { id } }));
    return Array.isArray(list) ? list : [];
  } catch {
    return [];
  }
}

// What the assistant's messages spent, as OpenCode reports it (no text: ids, model, tokens, cost,
// and whether each is completed).
function spendOf(list) {
  const out = [];
  for (const entry of list) {
    const info = (entry && entry.info) || entry;
    if (!info || info.role !== "assistant") continue;
    const { id, modelID, providerID, tokens, cost, time } = info;
    out.push({ id, role: "assistant", modelID, providerID, tokens, cost, time });
  }
  return out.slice(-SPEND_LIMIT);
}

// What the session's messages say about its last turn: the text of the last message when the
// assistant wrote it (for completion detection), whether that turn was aborted by the user (a
// `MessageAbortedError`), and the last prompt — its agent and model, and whether it was the
// plugin's own push (the agent is then already going on because of an enforcement).
function lastTurn(list) {
  const turn = { text: null, aborted: false, agent: null, model: null, continued: false };
  try {
    if (list.length === 0) return turn;
    const last = list[list.length - 1] || {};
    const info = last.info || last;
    if (info.role === "assistant") {
      const error = info.error;
      turn.aborted = !!(error && typeof error === "object" && error.name === "MessageAbortedError");
      const text = textOf(last);
      turn.text = text ? text.slice(-MESSAGE_LIMIT) : null;
    }
    for (let i = list.length - 1; i >= 0; i--) {
      const entry = list[i] || {};
      const user = entry.info || entry;
      if (user.role !== "user") continue;
      if (typeof user.agent === "string" && user.agent) turn.agent = user.agent;
      const m = user.model;
      if (m && typeof m.providerID === "string" && typeof m.modelID === "string") {
        turn.model = { providerID: m.providerID, modelID: m.modelID };
      }
      turn.continued = ENFORCEMENT_HEAD.test(textOf(entry));
      break;
    }
  } catch {
    // No messages: check runs without completion detection.
  }
  return turn;
}

// `opencode run` ends at the first idle: a prompt sent then is never delivered, so nothing is
// checked (and nothing counted) there.
function underRun() {
  const args = (process.argv || []).slice(2);
  return args.find((a) => typeof a === "string" && !a.startsWith("-")) === "run";
}

// Run `git boulder ARGS` in `cwd` without a shell, `input` on stdin; the answer parsed as JSON,
// or null (not a git-boulder repository, git-boulder missing, an error).
function boulder(cwd, args, input) {
  return new Promise((resolve) => {
    try {
      const child = execFile(
        "git",
        ["boulder", ...args],
        { cwd, timeout: CHECK_TIMEOUT_MS, maxBuffer: 1 << 20, windowsHide: true },
        (error, stdout) => {
          try {
            const answer = JSON.parse(stdout);
            resolve(answer && typeof answer === "object" ? answer : null);
          } catch {
            resolve(null);
          }
          void error;
        },
      );
      if (child.stdin) {
        child.stdin.on("error", () => {});
        child.stdin.end(input === undefined ? "" : input);
      }
    } catch {
      resolve(null);
    }
  });
}

// `git boulder check --json [--message TEXT]` in `cwd`, without a shell. Null when it did not
// answer with JSON (not a git-boulder repository, git-boulder missing, a refusal).
function check(cwd, message, continued) {
  const args = ["boulder", "check", "--json"];
  if (continued) args.push("--continued");
  // One argument, so a message that starts with "-" is never read as a flag.
  if (message) args.push(`--message=${message}`);
  return new Promise((resolve) => {
    try {
      execFile(
        "git",
        args,
        { cwd, timeout: CHECK_TIMEOUT_MS, maxBuffer: 1 << 20, windowsHide: true },
        (error, stdout) => {
          if (error) return resolve(null);
          try {
            const answer = JSON.parse(stdout);
            resolve(answer && typeof answer === "object" ? answer : null);
          } catch {
            resolve(null);
          }
        },
      );
    } catch {
      resolve(null);
    }
  });
}

async function onIdle(client, fallbackDir, id) {
  const info = await sessionInfo(client, id);
  // A session we cannot read is left alone.
  if (!info) return;
  const cwd = typeof info.directory === "string" && info.directory ? info.directory : fallbackDir;
  const list = await messagesOf(client, id);
  // What the session spent, recorded at every idle (a child session's, and under `opencode run`,
  // too). A spent budget: the session is let be, and told why.
  const spend = JSON.stringify({ hook_event_name: "Stop", cwd, session_id: id, messages: spendOf(list) });
  const spent = await boulder(cwd, ["agent", "hook", "opencode"], spend);
  if (spent && spent.stop === true && typeof spent.reason === "string" && spent.reason) {
    try {
      await client.tui.showToast({ body: { title: "git-boulder", message: spent.reason, variant: "warning" } });
    } catch {
      // No TUI: nothing else to do, nothing is pushed.
    }
    return;
  }
  // A child session (a subagent) is never held; nor is anything under `opencode run`.
  if (underRun() || info.parentID) return;
  const turn = lastTurn(list);
  // The user stopped the turn (Esc): never pushed back to work.
  if (turn.aborted) return;
  const answer = await check(cwd, turn.text, turn.continued);
  if (!answer || answer.enforce !== true || typeof answer.message !== "string" || !answer.message) return;
  const message = answer.message;
  const variant = typeof answer.variant === "string" ? answer.variant : "warning";
  try {
    await client.tui.showToast({ body: { title: "git-boulder", message: message.split("\n")[0], variant } });
  } catch {
    // No TUI (a server or a headless run): the prompt below still goes.
  }
  try {
    // The session's own agent and model: a prompt without them would switch a session in the
    // read-only `plan` agent to the default one.
    const body = { parts: [{ type: "text", text: message }] };
    if (turn.agent) body.agent = turn.agent;
    if (turn.model) body.model = turn.model;
    await client.session.promptAsync({ path: { id }, body });
  } catch {
    // The session is gone or the server refused: nothing to do until the next idle.
  }
}

export const GitBoulder = async ({ client, directory, worktree } = {}) => {
  const fallbackDir = directory || worktree || process.cwd();
  // One check at a time, in the order the events came: a later check sees what an earlier one
  // recorded (its cooldown, its failure count).
  let queue = Promise.resolve();
  // Which idle events this OpenCode sends (not a gate: the gates are git-boulder's).
  const seen = { status: false };
  const aborted = new Set();
  // The folder OpenCode was started in decides the stream, never a folder the agent moved to.
  const sessionDir = directory || worktree || process.cwd();
  return {
    // Throwing here is how OpenCode refuses a tool: git-boulder's reason reaches the agent.
    "tool.execute.before": async (input, output) => {
      const tool = input && typeof input.tool === "string" ? input.tool : "";
      if (!EDIT_TOOLS.includes(tool)) return;
      const args = output && output.args !== undefined ? output.args : input && input.args;
      const payload = JSON.stringify({
        hook_event_name: "PreToolUse",
        cwd: sessionDir,
        session_id: input.sessionID,
        tool_name: tool,
        tool_input: args === undefined ? null : args,
      });
      const answer = await boulder(sessionDir, ["agent", "hook", "opencode"], payload);
      if (answer && answer.decision === "block" && typeof answer.reason === "string" && answer.reason) {
        throw new Error(`git-boulder: ${answer.reason}`);
      }
    },
    event: async ({ event } = {}) => {
      try {
        noteAbort(event, aborted);
        const id = idleSessionID(event, seen);
        // The user stopped the turn (Esc): never pushed back to work.
        if (!id || (seen.status && aborted.has(id)) || !client || !client.session) return;
        const run = queue.then(() => onIdle(client, fallbackDir, id)).catch(() => {});
        queue = run;
        await run;
      } catch {
        // Never throw into OpenCode.
      }
    },
  };
};
