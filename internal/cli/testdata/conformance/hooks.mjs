// Loaded with `node --import ./hooks.mjs`, before the MCP conformance suite.
//
// The suite's dns-rebinding-protection scenario sends its initialize with no
// credential (it is written for servers without authentication), and Switchboard
// answers every request without one 401. With SWITCHBOARD_CONFORMANCE_AUTH set,
// the suite's HTTP requests carry it as their Authorization header; Host and
// Origin stay the suite's own, which is what the scenario tests.
//
// Node.js 20 (Debian's) lacks fs.globSync, which the suite imports at start-up
// and uses only in its tier-check command: the suite is given an fs that has one.
import { register } from 'node:module';
import { isMainThread } from 'node:worker_threads';

if (isMainThread) {
  register(import.meta.url);
}

const suite = '/@modelcontextprotocol/conformance/';
const fsShim = 'switchboard-hooks:fs';
const undiciShim = 'switchboard-hooks:undici?';

export async function resolve(specifier, context, next) {
  if (!context.parentURL?.includes(suite)) {
    return next(specifier, context);
  }
  if (specifier === 'fs' || specifier === 'node:fs') {
    return { url: fsShim, shortCircuit: true };
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
