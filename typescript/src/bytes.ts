/** Bytes, base64 and hex helpers that run everywhere (no Node `Buffer`). */

const STD = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

function encode(raw: Uint8Array, alphabet: string, pad: boolean): string {
  let out = "";
  let i = 0;
  for (; i + 2 < raw.length; i += 3) {
    const n = ((raw[i] as number) << 16) | ((raw[i + 1] as number) << 8) | (raw[i + 2] as number);
    out +=
      alphabet[(n >> 18) & 63] +
      (alphabet[(n >> 12) & 63] as string) +
      (alphabet[(n >> 6) & 63] as string) +
      (alphabet[n & 63] as string);
  }
  const left = raw.length - i;
  if (left === 1) {
    const n = (raw[i] as number) << 16;
    out += `${alphabet[(n >> 18) & 63]}${alphabet[(n >> 12) & 63]}${pad ? "==" : ""}`;
  } else if (left === 2) {
    const n = ((raw[i] as number) << 16) | ((raw[i + 1] as number) << 8);
    out += `${alphabet[(n >> 18) & 63]}${alphabet[(n >> 12) & 63]}${alphabet[(n >> 6) & 63]}${pad ? "=" : ""}`;
  }
  return out;
}

/** Standard base64 with padding (what lev writes). */
export function encodeBase64(raw: Uint8Array): string {
  return encode(raw, STD, true);
}

/** Base64url without padding: public keys and nonces. */
export function encodeBase64url(raw: Uint8Array): string {
  return encode(raw, URL, false);
}

/**
 * Decode standard or URL-safe base64, padded or not; anything else throws
 * (`Error`). Like the Rust decoder: canonical only (no stray bits after the
 * last byte), one alphabet per text.
 */
export function decodeBase64(text: string): Uint8Array {
  if (typeof text !== "string") throw new Error("not a string");
  const body = text.replace(/=+$/, "");
  const pad = text.length - body.length;
  if (pad > 0 && (pad > 2 || text.length % 4 !== 0)) throw new Error("bad padding");
  if (body.length % 4 === 1) throw new Error("bad length");
  let alphabet: string;
  if (/^[A-Za-z0-9+/]*$/.test(body)) alphabet = STD;
  else if (/^[A-Za-z0-9\-_]*$/.test(body)) alphabet = URL;
  else throw new Error("not base64");
  const out = new Uint8Array(Math.floor((body.length * 3) / 4));
  let bits = 0;
  let acc = 0;
  let o = 0;
  for (const c of body) {
    acc = (acc << 6) | alphabet.indexOf(c);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (acc >> bits) & 0xff;
    }
  }
  if (bits > 0 && (acc & ((1 << bits) - 1)) !== 0) throw new Error("non-canonical base64");
  return out.subarray(0, o);
}

export function utf8(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

export function hex(raw: Uint8Array): string {
  let out = "";
  for (const b of raw) out += b.toString(16).padStart(2, "0");
  return out;
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= (a[i] as number) ^ (b[i] as number);
  return diff === 0;
}

export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** Little-endian bytes to a bigint. */
export function leToBigInt(raw: Uint8Array): bigint {
  let n = 0n;
  for (let i = raw.length - 1; i >= 0; i--) n = (n << 8n) | BigInt(raw[i] as number);
  return n;
}
