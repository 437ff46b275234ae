/**
 * Receiving lev's webhooks (SPEC section 14): check a delivery's Standard
 * Webhooks signature, as python's `lev.webhooks`.
 *
 *     import { verifyWebhook } from "lev-sdk";
 *     const event = verifyWebhook(secret, request.headers, bodyBytes);
 *     if (event.type === "interaction.created") { ... }
 *
 * `secret` is the `whsec_...` that `lev webhook add` printed. The signature is
 * `v1,` and base64 of HMAC-SHA256 over `{webhook-id}.{webhook-timestamp}.{body}`
 * keyed by the secret's decoded bytes; the timestamp must be within
 * `toleranceS` of now, which bounds replays (keep the `webhook-id`s you have
 * handled to refuse them for good: lev retries with the same id).
 */

import { hmac } from "@noble/hashes/hmac.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesEqual, concat, decodeBase64, encodeBase64, utf8 } from "./bytes.js";
import { LevError } from "./errors.js";

export const SECRET_PREFIX = "whsec_";

/** The delivery is not genuine or not fresh: `secret`, `missing_header`, `timestamp`, `signature`, `body`. */
export class WebhookError extends LevError {}

/** Headers as a `Headers` object (fetch, Request) or a plain record (Node's IncomingHttpHeaders). */
export type HeadersLike = Headers | Record<string, string | string[] | undefined>;

function header(headers: HeadersLike, name: string): string {
  let value: string | string[] | null | undefined;
  if (typeof (headers as Headers).get === "function") value = (headers as Headers).get(name);
  else {
    for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() === name) value = v;
  }
  if (Array.isArray(value)) value = value.join(" ");
  if (value === null || value === undefined)
    throw new WebhookError("missing_header", `no ${name} header`);
  return value;
}

/** The HMAC key of a `whsec_` secret. */
export function secretKey(secret: string): Uint8Array {
  const body = secret.trim();
  if (!body.startsWith(SECRET_PREFIX))
    throw new WebhookError("secret", "expected whsec_ followed by base64");
  let key: Uint8Array;
  try {
    key = decodeBase64(body.slice(SECRET_PREFIX.length));
  } catch (e) {
    throw new WebhookError("secret", `not base64: ${(e as Error).message}`);
  }
  if (key.length < 24 || key.length > 64) {
    throw new WebhookError("secret", `expected 24 to 64 bytes, found ${key.length}`);
  }
  return key;
}

function mac(secret: string, id: string, timestamp: string, body: Uint8Array): Uint8Array {
  return hmac(sha256, secretKey(secret), concat(utf8(`${id}.${timestamp}.`), body));
}

/** The `webhook-signature` value lev sends (for tests of receivers). */
export function signWebhook(
  secret: string,
  id: string,
  timestamp: number,
  body: Uint8Array | string,
): string {
  const raw = typeof body === "string" ? utf8(body) : body;
  return `v1,${encodeBase64(mac(secret, id, String(timestamp), raw))}`;
}

/**
 * Check a delivery and return its parsed body (`type`, `timestamp`, `data`).
 * Throws `WebhookError` when it does not verify. Pass the body's exact bytes
 * (or text) as received, before any JSON parsing.
 */
export function verifyWebhook(
  secret: string,
  headers: HeadersLike,
  body: Uint8Array | string,
  opts: { toleranceS?: number; now?: number } = {},
): { type: string; timestamp: string; data: unknown } & Record<string, unknown> {
  const raw = typeof body === "string" ? utf8(body) : body;
  secretKey(secret);
  const id = header(headers, "webhook-id");
  const timestamp = header(headers, "webhook-timestamp");
  const signatures = header(headers, "webhook-signature");
  if (!/^[0-9]+$/.test(timestamp))
    throw new WebhookError("timestamp", `not a number: ${JSON.stringify(timestamp)}`);
  const now = opts.now ?? Date.now() / 1000;
  const age = now - Number(timestamp);
  if (Math.abs(age) > (opts.toleranceS ?? 300))
    throw new WebhookError("timestamp", `${Math.trunc(age)} s from now`);
  const expected = mac(secret, id, timestamp, raw);
  const ok = signatures.split(" ").some((candidate) => {
    const comma = candidate.indexOf(",");
    if (comma < 0 || candidate.slice(0, comma) !== "v1") return false;
    try {
      return bytesEqual(decodeBase64(candidate.slice(comma + 1)), expected);
    } catch {
      return false;
    }
  });
  if (!ok) throw new WebhookError("signature", "no v1 signature matches");
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder().decode(raw));
  } catch (e) {
    throw new WebhookError("body", `not JSON: ${(e as Error).message}`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new WebhookError("body", "not a JSON object");
  }
  return parsed as { type: string; timestamp: string; data: unknown };
}
