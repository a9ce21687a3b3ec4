// git-boulder OpenCode plugin: written by `git boulder agent install opencode`, removed by
// `git boulder agent uninstall opencode`. Edits here are kept by uninstall, and reported by
// `git boulder agent status` and `git boulder doctor`.
//
// When a main session goes idle, ask `git boulder check --json` (the boulder gates: idle time,
// cooldown, max failures, completion detection); when it says enforce, show a toast and send the
// enforcement message to that session. The plugin keeps no state: the gates, cooldowns and
// counters are git-boulder's, in its op-log. ESM, no dependencies; runs under Bun and Node >= 20.

import { execFile } from "node:child_process";

const CHECK_TIMEOUT_MS = 30_000;
// The end of the agent's last message is enough for completion detection.
const MESSAGE_LIMIT = 8_000;

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

// The text of the session's last message when the assistant wrote it (for completion detection).
async function lastAssistantText(client, id) {
  try {
    if (typeof client.session.messages !== "function") return null;
    const list = dataOf(await client.session.messages({ path: { id } }));
    if (!Array.isArray(list) || list.length === 0) return null;
    const entry = list[list.length - 1] || {};
    const info = entry.info || entry;
    if (info.role !== "assistant") return null;
    const parts = Array.isArray(entry.parts) ? entry.parts : [];
    const text = parts
      .filter((p) => p && p.type === "text" && typeof p.text === "string" && !p.synthetic)
      .map((p) => p.text)
      .join("\n")
      .trim();
    return text ? text.slice(-MESSAGE_LIMIT) : null;
  } catch {
    // No message text: check runs without completion detection.
    return null;
  }
}

// `git boulder check --json [--message TEXT]` in `cwd`, without a shell. Null when it did not
// answer with JSON (not a git-boulder repository, git-boulder missing, a refusal).
function check(cwd, message) {
  const args = ["boulder", "check", "--json"];
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
  // A child session (a subagent) is never held; a session we cannot read is left alone too.
  if (!info || info.parentID) return;
  const cwd = typeof info.directory === "string" && info.directory ? info.directory : fallbackDir;
  const answer = await check(cwd, await lastAssistantText(client, id));
  if (!answer || answer.enforce !== true || typeof answer.message !== "string" || !answer.message) return;
  const message = answer.message;
  const variant = typeof answer.variant === "string" ? answer.variant : "warning";
  try {
    await client.tui.showToast({ body: { title: "git-boulder", message: message.split("\n")[0], variant } });
  } catch {
    // No TUI (a server or a headless run): the prompt below still goes.
  }
  try {
    await client.session.promptAsync({ path: { id }, body: { parts: [{ type: "text", text: message }] } });
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
  return {
    event: async ({ event } = {}) => {
      try {
        const id = idleSessionID(event, seen);
        if (!id || !client || !client.session) return;
        const run = queue.then(() => onIdle(client, fallbackDir, id)).catch(() => {});
        queue = run;
        await run;
      } catch {
        // Never throw into OpenCode.
      }
    },
  };
};
