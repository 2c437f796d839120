// Loaded with `node --import ./hooks.mjs`, before the MCP conformance suite.
//
// The suite's scenarios send their requests with no credential (they are written
// for servers without authentication), and Switchboard answers every request
// without one 401. With SWITCHBOARD_CONFORMANCE_AUTH set, the suite's HTTP
// requests (undici's and fetch's) carry it as their Authorization header; Host
// and Origin stay the suite's own, which is what dns-rebinding-protection tests.
//
// Node.js 20 (Debian's) lacks fs.globSync, which the suite imports at start-up
// and uses only in its tier-check command: the suite is given an fs that has one.
import { register } from 'node:module';
import { isMainThread } from 'node:worker_threads';

if (isMainThread) {
  register(import.meta.url);
  // The suite's MCP clients (the official TypeScript SDK) send with fetch: each
  // request carries the credential too, unless it names one itself.
  const auth = process.env.SWITCHBOARD_CONFORMANCE_AUTH;
  const realFetch = globalThis.fetch;
  if (auth && realFetch) {
    globalThis.fetch = (input, init = {}) => {
      const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
      if (!headers.has('authorization')) headers.set('authorization', auth);
      return realFetch(input, { ...init, headers });
    };
  }
}

const suite = '/@modelcontextprotocol/conformance/';
const fsShim = 'switchboard-hooks:fs';
const undiciShim = 'switchboard-hooks:undici?';
const httpShim = 'switchboard-hooks:http';

export async function resolve(specifier, context, next) {
  if (!context.parentURL?.includes(suite)) {
    return next(specifier, context);
  }
  if (specifier === 'fs' || specifier === 'node:fs') {
    return { url: fsShim, shortCircuit: true };
  }
  if (specifier === 'http' || specifier === 'node:http') {
    return { url: httpShim, shortCircuit: true };
  }
  if (specifier === 'undici') {
    const real = await next(specifier, context);
    return { url: undiciShim + encodeURIComponent(real.url), shortCircuit: true };
  }
  return next(specifier, context);
}

export async function load(url, context, next) {
  if (url === fsShim) {
    return {
      format: 'module', shortCircuit: true,
      source: "import fs from 'node:fs'; export * from 'node:fs'; export default fs;\n" +
        "export const globSync = fs.globSync ?? (() => { throw new Error('fs.globSync needs Node.js 22'); });",
    };
  }
  if (url === httpShim) {
    // The stateless revision's header scenarios send with http.request.
    return {
      format: 'module', shortCircuit: true,
      source: `import http from 'node:http'; export * from 'node:http';
export function request(options, ...rest) {
  const auth = process.env.SWITCHBOARD_CONFORMANCE_AUTH;
  if (auth && options && typeof options === 'object' && !(options instanceof URL) &&
      !Object.keys(options.headers ?? {}).some((k) => k.toLowerCase() === 'authorization')) {
    options = { ...options, headers: { ...options.headers, authorization: auth } };
  }
  return http.request(options, ...rest);
}
export default { ...http, request };`,
    };
  }
  if (url.startsWith(undiciShim)) {
    const real = JSON.stringify(decodeURIComponent(url.slice(undiciShim.length)));
    return {
      format: 'module', shortCircuit: true,
      source: `import * as undici from ${real}; export * from ${real};
export function request(url, opts = {}) {
  const auth = process.env.SWITCHBOARD_CONFORMANCE_AUTH;
  return undici.request(url, auth ? { ...opts, headers: { ...opts.headers, authorization: auth } } : opts);
}`,
    };
  }
  return next(url, context);
}
