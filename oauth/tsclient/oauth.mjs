// oauth.mjs is a hosted agent on the official MCP TypeScript SDK: its client
// OAuth support (auth() with an OAuthClientProvider) discovers Switchboard's
// authorization server from /mcp, registers, sends the operator to consent,
// exchanges the code, drains a todo with the token, refreshes it, and is
// refused once its grant is revoked.
//
// Usage: node oauth.mjs MCP_URL REDIRECT_URL [CLIENT_METADATA_URL]: with the
// third, the client is named by its metadata document's URL rather than
// registering. It talks to the test by lines:
// it prints "authorize <url>" and reads the callback URL the consent sent the
// browser to; it prints "revoke" once refreshed and reads a line when the
// grant is revoked; then it prints one JSON line with what it saw and exits 0.
import { createInterface } from "node:readline";
import { auth, UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mcpUrl, redirectUrl, clientMetadataUrl] = process.argv.slice(2);
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const next = async () => (await lines.next()).value;

class Provider {
  saved = {};
  clientMetadataUrl = clientMetadataUrl;
  get redirectUrl() { return redirectUrl; }
  get clientMetadata() {
    return { client_name: "TS SDK agent", redirect_uris: [redirectUrl], grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"], token_endpoint_auth_method: "none" };
  }
  state() { return "ts-state"; }
  clientInformation() { return this.saved.client; }
  saveClientInformation(c) { this.saved.client = c; }
  tokens() { return this.saved.tokens; }
  saveTokens(t) { this.saved.tokens = t; }
  saveCodeVerifier(v) { this.saved.verifier = v; }
  codeVerifier() { return this.saved.verifier; }
  redirectToAuthorization(url) { this.saved.authorizeUrl = url; }
}

const provider = new Provider();
const seen = {};
if ((await auth(provider, { serverUrl: mcpUrl })) !== "REDIRECT") throw new Error("auth() did not ask for consent");
seen.clientId = provider.saved.client.client_id;
console.log(`authorize ${provider.saved.authorizeUrl}`);
const callback = new URL(await next());
if (callback.searchParams.get("state") !== "ts-state") throw new Error("the callback lost the state");
seen.iss = callback.searchParams.get("iss");
if ((await auth(provider, { serverUrl: mcpUrl, authorizationCode: callback.searchParams.get("code") })) !== "AUTHORIZED") {
  throw new Error("the code was not exchanged");
}

async function connect() {
  const client = new Client({ name: "ts-oauth-agent", version: "0.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider }));
  return client;
}
let client = await connect();
const claimed = await client.callTool({ name: "claim_next", arguments: {} });
const todo = claimed.structuredContent.todo;
if (!todo) throw new Error(`nothing claimed: ${JSON.stringify(claimed.structuredContent)}`);
const done = await client.callTool({ name: "complete", arguments: { todo_id: todo.id, lease_seq: todo.lease_seq } });
seen.drained = done.isError ? null : todo.id;
await client.close();

const before = provider.saved.tokens.access_token;
if ((await auth(provider, { serverUrl: mcpUrl })) !== "AUTHORIZED") throw new Error("the refresh did not authorize");
seen.refreshed = provider.saved.tokens.access_token !== before;
client = await connect();
seen.afterRefresh = (await client.listTools()).tools.length > 0;
await client.close();

console.log("revoke");
await next();
try {
  client = await connect();
  await client.listTools();
  seen.afterRevoke = "served";
} catch (e) {
  seen.afterRevoke = e instanceof UnauthorizedError ? "unauthorized" : `error: ${e.message}`;
}
console.log(JSON.stringify(seen));
process.exit(0);
