/**
 * Offline verification of lev's signed approvals (SPEC sections 5 and 13).
 *
 * The same checks, in the same order, as the Rust verifier
 * (`crates/lev-approval/src/verify.rs`) and the Python one
 * (`python/lev/_verify.py`): exact payload type (version 1, or version 2 for
 * a decision carrying its votes), at most 16 signatures, a strict Ed25519
 * signature by a trusted key over DSSE's pre-authentication encoding, a strict
 * payload parse (`./json.ts`: unknown field, duplicate key, wrong type
 * refused; big integers never lose precision), the version its payload type
 * names, and the clock within `issued_at` and `expires_at` give or take 60 s.
 */

import { sha256 } from "@noble/hashes/sha2.js";
import { bytesEqual, decodeBase64, encodeBase64url, hex, leToBigInt, utf8 } from "./bytes.js";
import { type Affine, decompress, isSmallOrder, verifyStrict } from "./ed25519.js";
import { KeyRefused, NotAuthorizedError, VerificationError } from "./errors.js";
import * as J from "./json.js";
import type { Envelope } from "./types.js";

export const APPROVAL_PAYLOAD_TYPE = "application/vnd.lev.approval+json; version=1";
export const APPROVAL_PAYLOAD_TYPE_V2 = "application/vnd.lev.approval+json; version=2";
export const MAX_SIGNATURES = 16;
export const CLOCK_SKEW_NS = 60n * 1_000_000_000n;

/** The first 16 lowercase hex digits of the SHA-256 of the raw public key. */
export function keyId(raw: Uint8Array): string {
  return hex(sha256(raw)).slice(0, 16);
}

/** DSSE's pre-authentication encoding. */
export function pae(payloadType: string, payload: Uint8Array): Uint8Array {
  const t = utf8(payloadType);
  const head = utf8(`DSSEv1 ${t.length} `);
  const mid = utf8(` ${payload.length} `);
  const out = new Uint8Array(head.length + t.length + mid.length + payload.length);
  out.set(head, 0);
  out.set(t, head.length);
  out.set(mid, head.length + t.length);
  out.set(payload, head.length + t.length + mid.length);
  return out;
}

/** `text` cut to `n` characters (an ellipsis marks the cut), control characters escaped. */
export function shorten(text: string, n: number): string {
  const chars = [...text];
  const out = chars
    .slice(0, n)
    .map((c) => {
      const code = c.codePointAt(0) as number;
      return code < 0x20 || (code >= 0x7f && code < 0xa0)
        ? `\\u${code.toString(16).padStart(4, "0")}`
        : c;
    })
    .join("");
  return out + (chars.length > n ? "…" : "");
}

// ---- trusted keys ------------------------------------------------------------

interface Key {
  kid: string;
  raw: Uint8Array;
  point: Affine;
}

const P = 2n ** 255n - 19n;

/** A public Ed25519 key checked as lev checks one: a curve point, canonical, not small-order. */
export function loadEd25519Key(raw: Uint8Array, name?: string): Affine {
  if (raw.length !== 32) {
    throw new KeyRefused(
      "invalid_key",
      `expected a 32-byte Ed25519 public key, found ${raw.length} bytes`,
    );
  }
  const point = decompress(raw);
  if (point === null) {
    throw new KeyRefused(
      "invalid_key",
      "expected a 32-byte Ed25519 public key, found bytes that are not a curve point",
    );
  }
  if (isSmallOrder(point)) {
    throw new KeyRefused(
      "weak_key",
      `weak (small-order) public key ${name ?? keyId(raw)} refused: signatures under it can be forged`,
    );
  }
  if ((leToBigInt(raw) & ((1n << 255n) - 1n)) >= P) {
    throw new KeyRefused(
      "invalid_key",
      "expected a canonically encoded Ed25519 public key (y below the field prime)",
    );
  }
  return point;
}

export type KeyInput = Uint8Array | string;

/** The public keys a verifier trusts. Weak (small-order) keys never get in. */
export class TrustedKeys {
  private readonly keys: Key[] = [];

  constructor(keys: Iterable<KeyInput> = []) {
    for (const k of keys) this.add(k);
  }

  /** Trust a raw 32-byte key (or its base64 / base64url); refuse weak or invalid ones. */
  add(key: KeyInput): void {
    let raw: Uint8Array;
    if (typeof key === "string") {
      try {
        raw = decodeBase64(key);
      } catch {
        throw new KeyRefused("malformed_key", "expected a base64url Ed25519 public key");
      }
    } else {
      raw = new Uint8Array(key);
    }
    const point = loadEd25519Key(raw);
    const kid = keyId(raw);
    if (this.keys.some((k) => k.kid === kid)) return;
    this.keys.push({ kid, raw, point });
  }

  /** A JWKS (`{"keys": [...]}`, as `GET /v1/keys` serves it), one JWK, or its JSON text. */
  static fromJwks(jwks: unknown): TrustedKeys {
    let value: unknown = jwks;
    if (typeof jwks === "string") {
      const text = jwks.trim();
      if (!text.startsWith("{")) return new TrustedKeys([text]);
      try {
        value = J.toPlain(J.parse(text));
      } catch (e) {
        throw new KeyRefused("malformed_key", `expected a JWKS or a JWK, ${(e as Error).message}`);
      }
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      throw new KeyRefused("malformed_key", "expected a JWKS or a JWK");
    }
    const obj = value as Record<string, unknown>;
    const entries = "keys" in obj ? obj.keys : [obj];
    if (!Array.isArray(entries)) {
      throw new KeyRefused("malformed_key", "expected a JWKS: keys is not a list");
    }
    const out = new TrustedKeys();
    for (const jwk of entries) {
      const j = jwk as Record<string, unknown> | null;
      if (
        typeof j !== "object" ||
        j === null ||
        j.kty !== "OKP" ||
        j.crv !== "Ed25519" ||
        typeof j.x !== "string"
      ) {
        throw new KeyRefused("malformed_key", "expected kty OKP and crv Ed25519 with x");
      }
      out.add(j.x);
    }
    if (out.size === 0) throw new KeyRefused("malformed_key", "the key set holds no key");
    return out;
  }

  get size(): number {
    return this.keys.length;
  }

  get kids(): string[] {
    return this.keys.map((k) => k.kid);
  }

  containsKid(kid: string): boolean {
    return this.keys.some((k) => k.kid === kid);
  }

  /** Every key, the one with id `kid` first: a hint, never a restriction. */
  candidates(kid: string): Key[] {
    return [...this.keys.filter((k) => k.kid === kid), ...this.keys.filter((k) => k.kid !== kid)];
  }
}

/** Strict Ed25519 by a raw key already checked with `loadEd25519Key`. */
export function ed25519VerifyStrict(
  raw: Uint8Array,
  point: Affine,
  message: Uint8Array,
  sig: Uint8Array,
): boolean {
  return verifyStrict(raw, point, message, sig);
}

// ---- timestamps --------------------------------------------------------------

const TS = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})$/;

function daysFromCivil(y0: number, m: number, d: number): number {
  const y = m <= 2 ? y0 - 1 : y0;
  const era = Math.floor((y >= 0 ? y : y - 399) / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

/** Strict RFC 3339 (upper-case T and Z) to nanoseconds since the epoch. */
export function parseTimestamp(text: string): bigint {
  const m = typeof text === "string" ? TS.exec(text) : null;
  if (!m) {
    throw new Error(
      `expected an RFC 3339 time such as 2026-01-01T12:00:00Z, found ${JSON.stringify(text)}`,
    );
  }
  const [y, mo, d, hh, mi, ss] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i]));
  const leap = (y as number) % 4 === 0 && ((y as number) % 100 !== 0 || (y as number) % 400 === 0);
  const monthDays = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
  if (
    !(
      (mo as number) >= 1 &&
      (mo as number) <= 12 &&
      (d as number) >= 1 &&
      (d as number) <= (monthDays[(mo as number) - 1] as number) &&
      (hh as number) < 24 &&
      (mi as number) < 60 &&
      (ss as number) < 60
    )
  ) {
    throw new Error(`a date or time that does not exist: ${JSON.stringify(text)}`);
  }
  const frac = m[7] ?? "";
  const ns = BigInt(`${frac}000000000`.slice(0, 9));
  const zone = m[8] as string;
  let offset = 0;
  if (zone !== "Z") {
    const oh = Number(zone.slice(1, 3));
    const om = Number(zone.slice(4, 6));
    if (oh > 23 || om > 59)
      throw new Error(`a zone offset that does not exist: ${JSON.stringify(text)}`);
    offset = (oh * 3600 + om * 60) * (zone[0] === "+" ? 1 : -1);
  }
  const secs =
    BigInt(daysFromCivil(y as number, mo as number, d as number)) * 86400n +
    BigInt((hh as number) * 3600 + (mi as number) * 60 + (ss as number) - offset);
  return secs * 1_000_000_000n + ns;
}

/** A clock: a Date, an RFC 3339 text, or milliseconds since the epoch. */
export type Clock = Date | string | number;

export function nowNs(now?: Clock): bigint {
  if (now === undefined) return BigInt(Date.now()) * 1_000_000n;
  if (typeof now === "string") return parseTimestamp(now);
  const ms = typeof now === "number" ? now : now.getTime();
  if (!Number.isFinite(ms)) throw new Error("now: not a valid time");
  return BigInt(Math.trunc(ms)) * 1_000_000n;
}

// ---- the payload ---------------------------------------------------------------

/** A strict RFC 3339 time, kept as its text. */
export const time: J.Reader<string> = (v) => {
  const t = J.text(v);
  try {
    parseTimestamp(t);
  } catch (e) {
    throw new J.JsonError((e as Error).message);
  }
  return t;
};

const F = J.field;
const OPT_TEXT = J.optional(J.text);

// A vote envelope inside a signed payload: read strictly, as everything there.
const VOTE_SIGNATURE = J.struct(
  "VoteSignature",
  [
    F("keyid", J.text),
    F("sig", J.text),
    F("authenticator_data", OPT_TEXT, true),
    F("client_data_json", OPT_TEXT, true),
  ],
  { strict: true },
);
const VOTE_ENVELOPE = J.struct(
  "VoteEnvelope",
  [F("payloadType", J.text), F("payload", J.text), F("signatures", J.seq(VOTE_SIGNATURE))],
  { strict: true },
);
// `envelope` must be present; null is an unsigned vote.
const PAYLOAD_VOTE = J.struct(
  "PayloadVote",
  [
    F("voter", J.text),
    F("approved", J.boolean),
    F("at", time),
    F("envelope", J.optional(VOTE_ENVELOPE)),
  ],
  { strict: true },
);
// In declaration order: serde reads a struct from an array of its fields too.
const APPROVAL_PAYLOAD = J.struct(
  "ApprovalPayload",
  [
    F("v", J.u32),
    F("turn_id", J.text),
    F("request_id", J.text),
    F("tool_name", J.text),
    F("args_json", J.text),
    F("modified_args_json", J.text),
    F("approved", J.boolean),
    F("approved_for_session", J.boolean),
    F("covered_capabilities", J.seq(J.text)),
    F("caller", J.text),
    F("approver", J.text),
    F("sandbox_mode", J.text),
    F("reason", J.text),
    F("injected_context", J.text),
    F("conversation_id", J.text),
    F("nonce", J.text),
    F("issued_at", time),
    F("expires_at", time),
    // Version 2 only, and there required (absent and null are the same).
    F("votes", J.optional(J.seq(PAYLOAD_VOTE)), true),
  ],
  { strict: true },
);
// The envelope itself is read leniently (unknown fields ignored), as lev_protocol's `Envelope`.
const ENVELOPE_SIGNATURE = J.struct(
  "EnvelopeSignature",
  [
    F("keyid", J.text, true, ""),
    F("sig", J.text),
    F("authenticator_data", OPT_TEXT, true),
    F("client_data_json", OPT_TEXT, true),
  ],
  { strict: false },
);
const ENVELOPE = J.struct(
  "Envelope",
  [F("payloadType", J.text), F("payload", J.text), F("signatures", J.seq(ENVELOPE_SIGNATURE))],
  { strict: false },
);

/** An envelope as read: its signatures with the passkey fields null when absent. */
export interface ReadSignature {
  keyid: string;
  sig: string;
  authenticator_data: string | null;
  client_data_json: string | null;
}
export interface ReadEnvelope {
  payloadType: string;
  payload: string;
  signatures: ReadSignature[];
}

/** What an envelope may be given as: its object, its JSON text, or its UTF-8 bytes. */
export type EnvelopeInput = Envelope | Record<string, unknown> | string | Uint8Array;

/** The envelope as lev_protocol reads it (throws `JsonError`). */
export function readEnvelope(envelope: EnvelopeInput | unknown): ReadEnvelope {
  const v =
    typeof envelope === "string" || envelope instanceof Uint8Array
      ? J.parse(envelope)
      : J.fromPlain(envelope);
  return ENVELOPE(v) as unknown as ReadEnvelope;
}

function asEnvelope(envelope: unknown): ReadEnvelope {
  try {
    return readEnvelope(envelope);
  } catch (e) {
    if (e instanceof J.JsonError) {
      throw new VerificationError("malformed", `malformed envelope: ${e.message}`);
    }
    throw e;
  }
}

/** A read envelope as JSON: the passkey fields only when set. */
function envelopeJson(raw: ReadEnvelope): Envelope {
  return {
    payloadType: raw.payloadType,
    payload: raw.payload,
    signatures: raw.signatures.map((s) => {
      const out: Record<string, string> = { keyid: s.keyid, sig: s.sig };
      if (s.authenticator_data !== null) out.authenticator_data = s.authenticator_data;
      if (s.client_data_json !== null) out.client_data_json = s.client_data_json;
      return out as unknown as Envelope["signatures"][number];
    }),
  };
}

/**
 * One vote of a version 2 decision (SPEC section 13): the voter's token name,
 * their approve or deny, when the server recorded it, and their own signed
 * vote envelope (null for an unsigned vote). Only what `requireSignedVotes`
 * checks is the person's word; the rest is the server's.
 */
export interface PayloadVote {
  voter: string;
  approved: boolean;
  at: string;
  envelope: Envelope | null;
}

/** The fields of a verified approval payload. */
export interface VerifiedFields {
  turnId: string;
  requestId: string;
  toolName: string;
  argsJson: string;
  modifiedArgsJson: string;
  approved: boolean;
  approvedForSession: boolean;
  coveredCapabilities: string[];
  caller: string;
  approver: string;
  sandboxMode: string;
  reason: string;
  injectedContext: string;
  conversationId: string;
  nonce: string;
  signerPublicKey: Uint8Array;
  issuedAt: string;
  expiresAt: string;
  votes: PayloadVote[] | null;
}

/** The context a verifier runs a call in; a field left undefined is not checked. */
export interface CallContext {
  conversationId?: string | undefined;
  caller?: string | undefined;
  sandboxMode?: string | undefined;
}

/**
 * A decoded approval payload after signature verification (the seed's
 * `VerifiedResponse`). `votes` is null for a payload of version 1, and the
 * decision's votes for version 2.
 */
export class VerifiedResponse implements VerifiedFields {
  readonly turnId!: string;
  readonly requestId!: string;
  readonly toolName!: string;
  readonly argsJson!: string;
  readonly modifiedArgsJson!: string;
  readonly approved!: boolean;
  readonly approvedForSession!: boolean;
  readonly coveredCapabilities!: string[];
  readonly caller!: string;
  readonly approver!: string;
  readonly sandboxMode!: string;
  readonly reason!: string;
  readonly injectedContext!: string;
  readonly conversationId!: string;
  readonly nonce!: string;
  readonly signerPublicKey!: Uint8Array;
  readonly issuedAt!: string;
  readonly expiresAt!: string;
  readonly votes!: PayloadVote[] | null;

  constructor(fields: VerifiedFields) {
    Object.assign(this, fields);
    Object.freeze(this.coveredCapabilities);
    Object.freeze(this);
  }

  /** The payload version: 2 when it carries votes, else 1. */
  get version(): number {
    return this.votes === null ? 1 : 2;
  }

  /** The args to execute: the edit when there is one, else the proposed args. */
  get effectiveArgsJson(): string {
    return this.resolveApprovedCall();
  }

  resolveApprovedCall(): string {
    return this.modifiedArgsJson || this.argsJson;
  }

  get signerKid(): string {
    return keyId(this.signerPublicKey);
  }

  /** The signer's public key in base64url, as `lev verify` prints it. */
  get signerPublicKeyBase64url(): string {
    return encodeBase64url(this.signerPublicKey);
  }

  /** The exact call (args byte for byte); never true for a denial. */
  authorizesCall(requestId: string, toolName: string, argsJson: string | Uint8Array): boolean {
    const args = typeof argsJson === "string" ? utf8(argsJson) : argsJson;
    return (
      this.approved &&
      this.requestId === requestId &&
      this.toolName === toolName &&
      bytesEqual(utf8(this.argsJson), args)
    );
  }

  /** Throw `NotAuthorizedError` naming the first field that differs, or `denied`. */
  checkCall(
    requestId: string,
    toolName: string,
    argsJson: string | Uint8Array,
    context: CallContext = {},
  ): void {
    const args = typeof argsJson === "string" ? utf8(argsJson) : argsJson;
    for (const [name, signed, actual] of [
      ["request_id", this.requestId, requestId],
      ["tool_name", this.toolName, toolName],
    ] as const) {
      if (signed !== actual) {
        throw new NotAuthorizedError(
          name,
          `approval is for ${name} ${JSON.stringify(signed)}, not ${JSON.stringify(actual)}`,
        );
      }
    }
    if (!bytesEqual(utf8(this.argsJson), args)) {
      throw new NotAuthorizedError(
        "args_json",
        `approval is for args_json ${JSON.stringify(shorten(this.argsJson, 300))}, not ${JSON.stringify(
          shorten(new TextDecoder().decode(args), 300),
        )}`,
      );
    }
    for (const [name, signed, ctx] of [
      ["conversation_id", this.conversationId, context.conversationId],
      ["caller", this.caller, context.caller],
      ["sandbox_mode", this.sandboxMode, context.sandboxMode],
    ] as const) {
      if (ctx !== undefined && signed !== ctx) {
        throw new NotAuthorizedError(
          name,
          `approval is for ${name} ${JSON.stringify(signed)}, not ${JSON.stringify(ctx)}`,
        );
      }
    }
    if (!this.approved) {
      const msg = "the call was denied";
      throw new NotAuthorizedError("denied", this.reason ? `${msg}: ${this.reason}` : msg);
    }
  }

  /** A plain JSON view, as `lev verify` prints it (`signer_public_key` in base64url). */
  toJSON(): Record<string, unknown> {
    return {
      turn_id: this.turnId,
      request_id: this.requestId,
      tool_name: this.toolName,
      args_json: this.argsJson,
      modified_args_json: this.modifiedArgsJson,
      approved: this.approved,
      approved_for_session: this.approvedForSession,
      covered_capabilities: [...this.coveredCapabilities],
      caller: this.caller,
      approver: this.approver,
      sandbox_mode: this.sandboxMode,
      reason: this.reason,
      injected_context: this.injectedContext,
      conversation_id: this.conversationId,
      nonce: this.nonce,
      signer_public_key: this.signerPublicKeyBase64url,
      issued_at: this.issuedAt,
      expires_at: this.expiresAt,
      effective_args_json: this.effectiveArgsJson,
      ...(this.votes === null ? {} : { votes: this.votes }),
    };
  }
}

const PAYLOAD_VERSIONS = new Map([
  [APPROVAL_PAYLOAD_TYPE, 1],
  [APPROVAL_PAYLOAD_TYPE_V2, 2],
]);

function parsePayload(raw: Uint8Array): Record<string, unknown> {
  try {
    return APPROVAL_PAYLOAD(J.parse(raw));
  } catch (e) {
    if (e instanceof J.JsonError)
      throw new VerificationError("payload", `invalid payload: ${e.message}`);
    throw e;
  }
}

/**
 * Verify an envelope's signature, payload and lifetime; see the module docs.
 *
 * Throws `VerificationError` whose `code` names the first check that failed:
 * `malformed`, `payload_type`, `untrusted_key`, `bad_signature`, `payload`,
 * `version`, `expired` or `not_yet_valid`.
 */
export function verifyEnvelope(
  envelope: unknown,
  keys: TrustedKeys,
  now?: Clock,
): VerifiedResponse {
  const env = asEnvelope(envelope);
  const version = PAYLOAD_VERSIONS.get(env.payloadType);
  if (version === undefined) {
    throw new VerificationError(
      "payload_type",
      `expected payload type ${JSON.stringify(APPROVAL_PAYLOAD_TYPE)} (or version=2), found ${JSON.stringify(
        shorten(env.payloadType, 100),
      )}`,
    );
  }
  const sigs = env.signatures;
  if (sigs.length === 0)
    throw new VerificationError("malformed", "malformed envelope: no signatures");
  if (sigs.length > MAX_SIGNATURES) {
    throw new VerificationError(
      "malformed",
      `malformed envelope: ${sigs.length} signatures, more than the ${MAX_SIGNATURES} a verifier examines`,
    );
  }
  let payload: Uint8Array;
  try {
    payload = decodeBase64(env.payload);
  } catch (e) {
    throw new VerificationError(
      "malformed",
      `malformed envelope: payload: ${(e as Error).message}`,
    );
  }
  const message = pae(env.payloadType, payload);
  let signer: Uint8Array | null = null;
  let triedTrusted: string | null = null;
  let undecodable: string | null = null;
  search: for (const [index, s] of sigs.entries()) {
    let sig: Uint8Array;
    try {
      sig = decodeBase64(s.sig);
      if (sig.length !== 64) throw new Error(`not 64 bytes (found ${sig.length} bytes)`);
    } catch (e) {
      if (undecodable === null && keys.containsKid(s.keyid)) {
        undecodable = `signature ${index} by key ${shorten(s.keyid, 32)}: ${(e as Error).message}`;
      }
      continue;
    }
    for (const key of keys.candidates(s.keyid)) {
      if (verifyStrict(key.raw, key.point, message, sig)) {
        signer = key.raw;
        break search;
      }
    }
    if (triedTrusted === null && keys.containsKid(s.keyid)) triedTrusted = s.keyid;
  }
  if (signer === null) {
    if (triedTrusted !== null) {
      throw new VerificationError(
        "bad_signature",
        `bad signature: the envelope was altered or not signed by key ${triedTrusted}`,
      );
    }
    if (undecodable !== null)
      throw new VerificationError("malformed", `malformed envelope: ${undecodable}`);
    const listed = sigs.slice(0, 5).map((s) => shorten(s.keyid, 32));
    if (sigs.length > 5) listed.push(`and ${sigs.length - 5} more`);
    throw new VerificationError(
      "untrusted_key",
      `no signature by a trusted key (key ids ${listed.join(", ")})`,
    );
  }
  const p = parsePayload(payload);
  const issued = parseTimestamp(p.issued_at as string);
  const expires = parseTimestamp(p.expires_at as string);
  const votes = p.votes as Record<string, unknown>[] | null;
  if (p.v !== version || (votes !== null) !== (version === 2)) {
    throw new VerificationError(
      "version",
      `expected payload version 1 (no votes) or 2 (votes), as its payload type says; found ${p.v}`,
    );
  }
  const caps = p.covered_capabilities as string[];
  for (let i = 1; i < caps.length; i++) {
    if (!((caps[i - 1] as string) < (caps[i] as string))) {
      throw new VerificationError(
        "payload",
        "invalid payload: covered_capabilities is not sorted without duplicates",
      );
    }
  }
  if (expires < issued) {
    throw new VerificationError("payload", "invalid payload: expires_at is before issued_at");
  }
  const t = nowNs(now);
  if (t < issued - CLOCK_SKEW_NS) {
    throw new VerificationError(
      "not_yet_valid",
      `issued in the future at ${p.issued_at} (now ${t / 1_000_000_000n} s)`,
    );
  }
  if (t > expires + CLOCK_SKEW_NS)
    throw new VerificationError("expired", `expired at ${p.expires_at}`);
  return new VerifiedResponse({
    turnId: p.turn_id as string,
    requestId: p.request_id as string,
    toolName: p.tool_name as string,
    argsJson: p.args_json as string,
    modifiedArgsJson: p.modified_args_json as string,
    approved: p.approved as boolean,
    approvedForSession: p.approved_for_session as boolean,
    coveredCapabilities: [...caps],
    caller: p.caller as string,
    approver: p.approver as string,
    sandboxMode: p.sandbox_mode as string,
    reason: p.reason as string,
    injectedContext: p.injected_context as string,
    conversationId: p.conversation_id as string,
    nonce: p.nonce as string,
    signerPublicKey: signer,
    issuedAt: p.issued_at as string,
    expiresAt: p.expires_at as string,
    votes:
      votes === null
        ? null
        : votes.map((v) => ({
            voter: v.voter as string,
            approved: v.approved as boolean,
            at: v.at as string,
            envelope:
              v.envelope === null ? null : envelopeJson(v.envelope as unknown as ReadEnvelope),
          })),
  });
}

/** Keys as `verify` takes them: a `TrustedKeys`, a JWKS (object or text), or raw keys. */
export type KeysInput = TrustedKeys | Record<string, unknown> | string | Iterable<KeyInput>;

export function trustedKeysOf(keys: KeysInput): TrustedKeys {
  if (keys instanceof TrustedKeys) return keys;
  if (typeof keys === "string") return TrustedKeys.fromJwks(keys);
  if (Symbol.iterator in Object(keys)) return new TrustedKeys(keys as Iterable<KeyInput>);
  return TrustedKeys.fromJwks(keys);
}
