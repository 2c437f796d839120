// sign.mjs signs webhook deliveries with the providers' OWN npm libraries, so
// Switchboard's Go verifiers (ingest.Verify) can be checked against the code
// that real producers run, not against a re-implementation of it.
//
// Contract (kept stable: Go tests and the end-to-end tests both rely on it)
//
//   stdin:  one JSON object, or a JSON array of them:
//           {
//             "scheme":    "github" | "stripe" | "standard",
//             "secret":    "<the webhook's signing secret, exactly as Switchboard minted it>",
//             "body":      "<the raw request body, a UTF-8 string, sent byte for byte>",
//             "timestamp": 1700000000,      // optional, Unix seconds; default: now
//             "id":        "<delivery id>", // optional; standard: default msg_<random>
//             "event":     "<event type>"   // optional; github only (X-GitHub-Event)
//           }
//   stdout: for an object, one JSON object of HTTP header name -> value to send
//           with the body; for an array, an array of such objects in order.
//             github   -> X-Hub-Signature-256 (octokit `sign`), plus X-GitHub-Delivery
//                         and X-GitHub-Event when id / event are given
//             stripe   -> Stripe-Signature (stripe `webhooks.generateTestHeaderString`);
//                         Stripe's delivery id lives in the body's "id"
//             standard -> webhook-id, webhook-timestamp, webhook-signature
//                         (standardwebhooks `Webhook.sign`)
//           Content-Type is the caller's business.
//   exit:   0 on success; 1 with a one-line reason on stderr for bad input.
//
// Setup: `npm ci --ignore-scripts` in this directory (node >= 20). Example:
//   echo '{"scheme":"github","secret":"s","body":"{}"}' | node sign.mjs
import { randomBytes } from "node:crypto";
import { sign as octokitSign } from "@octokit/webhooks-methods";
import Stripe from "stripe";
import { Webhook } from "standardwebhooks";

async function signOne(req) {
  if (req === null || typeof req !== "object") throw new Error("each request must be a JSON object");
  const { scheme, secret, body } = req;
  if (typeof secret !== "string" || secret === "") throw new Error("secret must be a non-empty string");
  if (typeof body !== "string") throw new Error("body must be a string");
  const timestamp = req.timestamp === undefined ? Math.floor(Date.now() / 1000) : req.timestamp;
  if (!Number.isInteger(timestamp) || timestamp <= 0) throw new Error("timestamp must be positive Unix seconds");

  switch (scheme) {
    case "github": {
      const headers = { "X-Hub-Signature-256": await octokitSign(secret, body) };
      if (req.id) headers["X-GitHub-Delivery"] = String(req.id);
      if (req.event) headers["X-GitHub-Event"] = String(req.event);
      return headers;
    }
    case "stripe":
      return {
        "Stripe-Signature": Stripe.webhooks.generateTestHeaderString({ payload: body, secret, timestamp }),
      };
    case "standard": {
      const id = req.id ? String(req.id) : `msg_${randomBytes(12).toString("hex")}`;
      const signature = new Webhook(secret).sign(id, new Date(timestamp * 1000), body);
      return { "webhook-id": id, "webhook-timestamp": String(timestamp), "webhook-signature": signature };
    }
    default:
      throw new Error(`scheme ${JSON.stringify(scheme)} has no npm signer here (github, stripe, standard)`);
  }
}

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const input = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  const output = Array.isArray(input) ? await Promise.all(input.map(signOne)) : await signOne(input);
  process.stdout.write(JSON.stringify(output) + "\n");
}

main().catch((err) => {
  process.stderr.write(`sign.mjs: ${err.message}\n`);
  process.exit(1);
});
