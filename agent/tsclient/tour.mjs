// tour.mjs drives Switchboard's /mcp with the official MCP TypeScript SDK, the way
// an agent written with it would: it connects, lists the tools (the SDK then checks
// every result against the tool's outputSchema, refusals included, and throws on a
// mismatch), waits for a doorbell on its GET stream, works the todo it was rung
// for, and meets a refusal of each common kind.
//
// Usage: node tour.mjs URL CREDENTIAL. It prints "session <id>" once connected (the
// test then adds a todo to the queue "inbox"), then one JSON line with what it
// saw, and exits 0; anything unexpected is an exception, exit 1.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, credential] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${credential}` } },
});
const client = new Client({ name: "switchboard-tour", version: "0.0.0" });
let rang;
const ring = new Promise((resolve) => (rang = resolve));
client.fallbackNotificationHandler = async (n) => {
  if (n.method === "notifications/claude/channel") rang(n.params);
};
await client.connect(transport);
const { tools } = await client.listTools();

const seen = { tools: tools.map((t) => t.name).sort(), with_output_schema: 0, calls: [] };
seen.with_output_schema = tools.filter((t) => t.outputSchema).length;
async function call(name, args = {}) {
  const res = await client.callTool({ name, arguments: args });
  seen.calls.push({ name, error: res.isError ? res.structuredContent.code : null });
  return res;
}

const empty = await call("claim_next");
if (empty.structuredContent.claimed) throw new Error("claimed from an empty queue");
console.log(`session ${transport.sessionId}`);
const note = await Promise.race([
  ring,
  new Promise((_, reject) => setTimeout(() => reject(new Error("no doorbell within 20 s")), 20000)),
]);
seen.rang_for = note.meta.todo_id;

const claimed = await call("claim_next");
const todo = claimed.structuredContent.todo;
if (String(todo.id) !== note.meta.todo_id) throw new Error(`rung for ${note.meta.todo_id}, claimed ${todo.id}`);
seen.payload = todo.payload;
const lease = claimed.structuredContent.lease_seq;
await call("heartbeat", { todo_id: todo.id, lease_seq: lease });
await call("complete", { todo_id: todo.id, lease_seq: lease, result: "toured" });
await call("complete", { todo_id: todo.id, lease_seq: lease }); // conflict: done already
await call("claim", { todo_id: 999999 }); // not_found
await call("list_todos", { state: "done", limit: 1 });
await call("get_default_lease");
await call("set_default_lease", { default_lease_ttl_seconds: 0 });
const hook = await call("create_webhook", { source_type: "github", queue: "inbox" });
await call("list_webhooks");
await call("list_webhook_events", { webhook_id: hook.structuredContent.webhook_id });
await call("get_webhook_event", { event_id: 999999 }); // not_found
await call("delete_webhook", { webhook_id: hook.structuredContent.webhook_id });
console.log(JSON.stringify(seen));
await client.close();
