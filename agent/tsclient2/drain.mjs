// An agent on the official MCP TypeScript SDK v2 client (@modelcontextprotocol/client),
// run by tsclient2_test.go: node drain.mjs URL CREDENTIAL.
//
// It connects with version negotiation on (the SDK's opt-in: it probes
// server/discover and settles on 2026-07-28, no session),
// declares the experimental claude/channel capability, opens subscriptions/listen
// and prints "listening"; the test then adds a todo. On its doorbell it claims
// and completes the todo, passing lease_seq, and prints one JSON line of what it
// saw.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [url, credential] = process.argv.slice(2);
let rang;
const rung = new Promise((resolve) => { rang = resolve; });
const client = new Client({ name: 'ts-v2-worker', version: '1' }, {
  capabilities: { experimental: { 'claude/channel': {} } },
  versionNegotiation: { mode: 'auto' },
});
client.fallbackNotificationHandler = async (n) => {
  if (n.method === 'notifications/claude/channel') rang(n.params);
};
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${credential}` } },
});
await client.connect(transport);
const protocol = client.getNegotiatedProtocolVersion();
const instructions = client.getInstructions() ?? '';
const subscription = await client.listen({ toolsListChanged: true });
console.log('listening');

const ring = await rung;
const call = async (name, args) => {
  const res = await client.callTool({ name, arguments: args });
  if (res.isError) throw new Error(`${name}: ${JSON.stringify(res.structuredContent)}`);
  return res.structuredContent;
};
const claim = await call('claim_next', {});
const done = await call('complete', { todo_id: claim.todo.id, lease_seq: claim.lease_seq, result: 'done by the v2 SDK' });
await subscription.close();
await client.close();
console.log(JSON.stringify({
  protocol, leaseContract: instructions.includes('Lease contract'), ring: ring.meta,
  claimed: claim.todo.id, state: done.todo.state,
}));
