// Loads an OpenCode plugin file and hands it events the way a current OpenCode's bus does: every
// event to every plugin's `event` hook without waiting for it, each idle announced twice
// (`session.status` idle, then the deprecated `session.idle`), and `promptAsync` answered before
// the prompt is stored as the session's newest message (its route replies 204 and stores it
// after). Prints the recorded client calls as JSON.
//
//   node opencode-bus.mjs PLUGIN_FILE CONFIG_JSON
//
// CONFIG_JSON: { directory, sessions: { id: { parentID?, directory?, messages? } },
//                idles: [ sessionID ], legacy: bool (an older OpenCode: `session.idle` only) }
import { pathToFileURL } from "node:url";

const [pluginFile, configText] = process.argv.slice(2);
const config = JSON.parse(configText);
const calls = [];
const stored = [];

const client = {
  session: {
    get: async ({ path }) => {
      const s = config.sessions[path.id];
      return s ? { data: { id: path.id, ...s } } : { error: { name: "NotFoundError" }, data: undefined };
    },
    messages: async ({ path }) => ({ data: (config.sessions[path.id] || {}).messages || [] }),
    promptAsync: async (args) => {
      calls.push({ call: "session.promptAsync", args });
      const s = config.sessions[args.path.id];
      stored.push(
        new Promise((resolve) =>
          setTimeout(() => {
            if (s) (s.messages = s.messages || []).push({ info: { role: "user" }, parts: args.body.parts });
            resolve();
          }, 20),
        ),
      );
      return { data: undefined };
    },
  },
  tui: {
    showToast: async (args) => {
      calls.push({ call: "tui.showToast", args });
      return { data: true };
    },
  },
};

const mod = await import(pathToFileURL(pluginFile).href);
const hooks = [];
for (const plugin of Object.values(mod).filter((f) => typeof f === "function")) {
  hooks.push(await plugin({ client, directory: config.directory, worktree: config.directory, $: undefined }));
}
const running = [];
const publish = (event) => {
  for (const h of hooks) if (typeof h.event === "function") running.push(h.event({ event }));
};
for (const id of config.idles) {
  if (!config.legacy) {
    publish({ type: "session.status", properties: { sessionID: id, status: { type: "busy" } } });
    publish({ type: "session.status", properties: { sessionID: id, status: { type: "idle" } } });
  }
  publish({ type: "session.idle", properties: { sessionID: id } });
}
await Promise.allSettled(running);
await Promise.all(stored);
process.stdout.write(JSON.stringify({ calls }) + "\n");
