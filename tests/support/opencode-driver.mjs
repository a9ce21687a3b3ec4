// Loads an OpenCode plugin file the way OpenCode does (import, call each exported plugin function
// with { client, directory, worktree, $ }), hands it a client that records the calls a plugin
// makes, fires the events given, and prints what was recorded as JSON on stdout.
//
//   node opencode-driver.mjs PLUGIN_FILE CONFIG_JSON
//
// CONFIG_JSON: { directory, tui: bool, sessions: { id: { parentID?, directory?, messages? } },
//                events: [ { type, properties } ], tools?: [ { tool, args } ] (each handed to
//                `tool.execute.before` in order, what it throws recorded), argv?: [ … ] (the
//                command line OpenCode was started with, e.g. ["run", "task"]) }
import { pathToFileURL } from "node:url";

const [pluginFile, configText] = process.argv.slice(2);
const config = JSON.parse(configText);
const calls = [];

const client = {
  session: {
    get: async ({ path }) => {
      const s = config.sessions[path.id];
      if (!s) throw new Error(`no session ${path.id}`);
      return { data: { id: path.id, ...s } };
    },
    messages: async ({ path }) => ({ data: (config.sessions[path.id] || {}).messages || [] }),
    promptAsync: async (args) => {
      calls.push({ call: "session.promptAsync", args });
      // As OpenCode does: the prompt becomes the session's newest (user) message.
      const s = config.sessions[args.path.id];
      if (s) (s.messages = s.messages || []).push({ info: { role: "user" }, parts: args.body.parts });
      return { data: undefined };
    },
  },
};
if (config.tui) {
  client.tui = {
    showToast: async (args) => {
      calls.push({ call: "tui.showToast", args });
      return { data: true };
    },
  };
}

if (Array.isArray(config.argv)) process.argv = [process.argv[0], "opencode", ...config.argv];

const mod = await import(pathToFileURL(pluginFile).href);
const plugins = Object.values(mod).filter((f) => typeof f === "function");
const hooks = [];
for (const plugin of plugins) {
  hooks.push(await plugin({ client, directory: config.directory, worktree: config.directory, $: undefined }));
}
const thrown = [];
for (const event of config.events) {
  for (const h of hooks) {
    if (typeof h.event !== "function") continue;
    try {
      await h.event({ event });
    } catch (e) {
      thrown.push(String(e));
    }
  }
}
const tools = [];
for (const [i, t] of (config.tools || []).entries()) {
  let error = null;
  for (const h of hooks) {
    if (typeof h["tool.execute.before"] !== "function") continue;
    try {
      await h["tool.execute.before"]({ tool: t.tool, sessionID: "ses_main", callID: `call_${i}` }, { args: t.args });
    } catch (e) {
      error = e instanceof Error ? e.message : String(e);
    }
  }
  tools.push({ tool: t.tool, error });
}
process.stdout.write(JSON.stringify({ plugins: plugins.length, calls, thrown, tools }) + "\n");
