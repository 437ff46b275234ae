/**
 * Votes people sign with their own keys (SPEC section 13), checked as the
 * Rust verifier (`crates/lev-approval/src/votes.rs`) and python/lev/_votes.py
 * check them.
 *
 * A vote is a DSSE envelope of type `application/vnd.lev.vote+json; version=1`
 * signed either by an Ed25519 key of `lev key init` (strict Ed25519 over the
 * PAE), or by a passkey: a WebAuthn assertion whose challenge is the SHA-256
 * of the PAE (ES256 in DER, or EdDSA, over `authenticator_data ||
 * SHA-256(client_data_json)`). A vote verifies only under a key registered to
 * the voter it names.
 */

import { p256 } from "@noble/curves/nist.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesEqual, concat, decodeBase64, hex, utf8 } from "./bytes.js";
import type { Affine } from "./ed25519.js";
import { KeyRefused, NotEnoughVotes, VoteError } from "./errors.js";
import * as J from "./json.js";
import {
  type EnvelopeInput,
  ed25519VerifyStrict,
  loadEd25519Key,
  pae,
  parseTimestamp,
  type ReadEnvelope,
  readEnvelope,
  shorten,
  time,
  type VerifiedResponse,
} from "./verify.js";

export const VOTE_PAYLOAD_TYPE = "application/vnd.lev.vote+json; version=1";
export const MAX_VOTE_SIGNATURES = 4;
export const MAX_KEYS_PER_PERSON = 16;
const CLOCK_SKEW_NS = 60n * 1_000_000_000n;
const SCOPES = ["once", "session", "always"];

/** Lowercase hex SHA-256. */
export function sha256Hex(data: Uint8Array | string): string {
  return hex(sha256(typeof data === "string" ? utf8(data) : data));
}

// ---- people's keys -----------------------------------------------------------

const F = J.field;
const OPT_TEXT = J.optional(J.text);
const PERSON_JWK = J.struct(
  "PersonJwk",
  [
    F("kty", J.text),
    F("crv", J.text),
    F("x", J.text),
    F("y", OPT_TEXT, true),
    F("kid", J.text, true, ""),
    F("alg", OPT_TEXT, true),
    F("use", OPT_TEXT, true),
    F("rp_id", OPT_TEXT, true),
    F("credential_id", OPT_TEXT, true),
  ],
  { strict: false },
);
const PEOPLE_JWKS = J.struct("PeopleJwks", [F("keys", J.seq(PERSON_JWK))], { strict: false });

const ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The person a key id `person:NAME:N` names, and N (1 or more, written
 * without a sign or leading zeros); null for any other key id.
 */
export function parsePersonKid(kid: string): [string, number] | null {
  if (!kid.startsWith("person:")) return null;
  const rest = kid.slice("person:".length);
  const at = rest.lastIndexOf(":");
  if (at < 0) return null;
  const name = rest.slice(0, at);
  const n = rest.slice(at + 1);
  if (!/^[0-9]{1,10}$/.test(n) || n !== String(Number(n))) return null;
  const number = Number(n);
  if (number < 1 || number > 0xffffffff || !ID.test(name)) return null;
  return [name, number];
}

/**
 * One registered key of one person. `publicKey` is the raw Ed25519 key (32
 * bytes) or the uncompressed P-256 point (65 bytes); `rpId` is a passkey's
 * relying party (null for a `lev key init` key).
 */
export class PersonKey {
  constructor(
    readonly kid: string,
    readonly person: string,
    readonly kty: string,
    readonly publicKey: Uint8Array,
    readonly rpId: string | null,
    readonly credentialId: string | null,
    private readonly ed25519Point: Affine | null,
  ) {}

  /** Whether its votes are WebAuthn assertions. */
  get isPasskey(): boolean {
    return this.rpId !== null;
  }

  /** A signature by this key over `message`: strict Ed25519, or ES256 in DER. */
  verifyPlain(message: Uint8Array, sig: Uint8Array): boolean {
    if (this.ed25519Point !== null) {
      return ed25519VerifyStrict(this.publicKey, this.ed25519Point, message, sig);
    }
    try {
      // As the RustCrypto p256 verifier: DER, high S accepted, SHA-256 of the message.
      return p256.verify(sig, message, this.publicKey, {
        format: "der",
        lowS: false,
        prehash: true,
      });
    } catch {
      // A point off the curve, or a signature that is not DER: never verifies.
      return false;
    }
  }
}

function personKey(jwk: Record<string, unknown>): PersonKey {
  const kid = jwk.kid as string;
  const parsed = parsePersonKid(kid);
  if (parsed === null) {
    throw new KeyRefused(
      "malformed_key",
      `kid: expected person:NAME:N, found ${JSON.stringify(kid.slice(0, 140))}`,
    );
  }
  const fieldBytes = (name: string, text: string): Uint8Array => {
    try {
      return decodeBase64(text);
    } catch (e) {
      throw new KeyRefused("malformed_key", `${kid}: ${name}: ${(e as Error).message}`);
    }
  };
  const kty = jwk.kty as string;
  const crv = jwk.crv as string;
  const alg = jwk.alg as string | null;
  const rpId = jwk.rp_id as string | null;
  const credentialId = jwk.credential_id as string | null;
  if (kty === "OKP" && crv === "Ed25519") {
    if (alg !== null && alg !== "EdDSA")
      throw new KeyRefused("malformed_key", `${kid}: alg: an Ed25519 key is EdDSA`);
    const raw = fieldBytes("x", jwk.x as string);
    if (raw.length !== 32) throw new KeyRefused("invalid_key", `${kid}: x: not 32 bytes`);
    const point = loadEd25519Key(raw, kid);
    return new PersonKey(kid, parsed[0], kty, raw, rpId, credentialId, point);
  }
  if (kty === "EC" && crv === "P-256") {
    if (alg !== null && alg !== "ES256")
      throw new KeyRefused("malformed_key", `${kid}: alg: a P-256 key is ES256`);
    const x = fieldBytes("x", jwk.x as string);
    const y = fieldBytes("y", (jwk.y as string | null) ?? "");
    if (x.length !== 32 || y.length !== 32) {
      throw new KeyRefused("invalid_key", `${kid}: x and y of a P-256 key are 32 bytes each`);
    }
    return new PersonKey(
      kid,
      parsed[0],
      kty,
      concat(new Uint8Array([4]), x, y),
      rpId,
      credentialId,
      null,
    );
  }
  throw new KeyRefused(
    "malformed_key",
    `${kid}: expected an Ed25519 (OKP) or P-256 (EC) key, found kty ${JSON.stringify(
      shorten(kty, 20),
    )} and crv ${JSON.stringify(shorten(crv, 20))}`,
  );
}

/**
 * People's registered public keys, as `GET /v1/people/keys` serves them: a
 * JWKS object, or its JSON text. Throws `KeyRefused` for a key set that is not
 * such a JWKS, a kid that is not `person:NAME:N`, a key that is not a valid
 * Ed25519 (`weak_key` for a small-order one) or P-256 key, or a person with
 * more than 16 keys. A P-256 point off the curve is kept, and never verifies.
 */
export class PeopleKeys {
  private readonly list: PersonKey[] = [];

  constructor(jwks?: unknown) {
    if (jwks === undefined || jwks === null) return;
    let value: J.JVal;
    try {
      if (typeof jwks === "string" || jwks instanceof Uint8Array) {
        const text = typeof jwks === "string" ? jwks : J.decodeUtf8Lossless(jwks);
        value = J.parse(text.trim());
      } else {
        value = J.fromPlain(jwks);
      }
    } catch (e) {
      throw new KeyRefused(
        "malformed_key",
        `expected the people keys JWKS of GET /v1/people/keys, ${(e as Error).message}`,
      );
    }
    let entries: Record<string, unknown>[];
    try {
      entries = PEOPLE_JWKS(value).keys as Record<string, unknown>[];
    } catch (e) {
      throw new KeyRefused(
        "malformed_key",
        `expected the people keys JWKS of GET /v1/people/keys, ${(e as Error).message}`,
      );
    }
    for (const jwk of entries) {
      const key = personKey(jwk);
      if (this.of(key.person).length >= MAX_KEYS_PER_PERSON) {
        throw new KeyRefused(
          "malformed_key",
          `${key.person} has more than ${MAX_KEYS_PER_PERSON} keys`,
        );
      }
      if (!this.list.some((k) => k.kid === key.kid)) this.list.push(key);
    }
  }

  /** The keys registered to `person`. */
  of(person: string): PersonKey[] {
    return this.list.filter((k) => k.person === person);
  }

  get keys(): PersonKey[] {
    return [...this.list];
  }

  get kids(): string[] {
    return this.list.map((k) => k.kid);
  }

  get size(): number {
    return this.list.length;
  }
}

export type PeopleKeysInput = PeopleKeys | Record<string, unknown> | string | Uint8Array;

export function peopleKeysOf(people: PeopleKeysInput): PeopleKeys {
  return people instanceof PeopleKeys ? people : new PeopleKeys(people);
}

// ---- votes -------------------------------------------------------------------

const VOTE_PAYLOAD = J.struct(
  "VotePayload",
  [
    F("v", J.u32),
    ...[
      "request_id",
      "tool_name",
      "args_sha256",
      "effective_args_sha256",
      "conversation_id",
      "caller",
      "sandbox_mode",
    ].map((n) => F(n, J.text)),
    F("approved", J.boolean),
    F("scope", J.text),
    F("voter", J.text),
    F("issued_at", time),
  ],
  { strict: true },
);
// What a passkey's client data must say; other fields are ignored.
const CLIENT_DATA = J.struct(
  "ClientData",
  [F("type", J.text), F("challenge", J.text), F("origin", J.text, true, "")],
  { strict: false },
);

/** What a voter signs. */
export interface VotePayload {
  v: number;
  request_id: string;
  tool_name: string;
  args_sha256: string;
  effective_args_sha256: string;
  conversation_id: string;
  caller: string;
  sandbox_mode: string;
  approved: boolean;
  scope: string;
  voter: string;
  issued_at: string;
}

/** A vote whose signature verified: what the voter signed, and the key. */
export interface VerifiedVote {
  payload: VotePayload;
  kid: string;
}

/** Whether `origin` (`scheme://host[:port]`) is on `rpId` or a subdomain of it. */
function originOn(origin: string, rpId: string): boolean {
  const at = origin.indexOf("://");
  if (at < 0) return false;
  const rest = origin.slice(at + 3);
  const colon = rest.lastIndexOf(":");
  let host = rest;
  if (colon >= 0) {
    const port = rest.slice(colon + 1);
    if (port !== "" && /^[0-9]+$/.test(port)) host = rest.slice(0, colon);
  }
  return (
    host === rpId || (host.endsWith(rpId) && host.slice(0, host.length - rpId.length).endsWith("."))
  );
}

/**
 * A passkey's assertion over `message` (the vote's PAE) by `key`: false when
 * only the signature fails, VoteError `assertion` when the rest does.
 */
function checkAssertion(
  key: PersonKey,
  message: Uint8Array,
  sig: Uint8Array,
  authenticatorData: string,
  clientDataJson: string,
): boolean {
  const bad = (why: string) =>
    new VoteError("assertion", `the passkey assertion does not hold: ${why}`);
  const rpId = key.rpId ?? "";
  let auth: Uint8Array;
  let client: Uint8Array;
  try {
    auth = decodeBase64(authenticatorData);
  } catch {
    throw bad("authenticator_data is not base64");
  }
  try {
    client = decodeBase64(clientDataJson);
  } catch {
    throw bad("client_data_json is not base64");
  }
  if (auth.length < 37) throw bad("authenticator_data is shorter than 37 bytes");
  if (!bytesEqual(auth.subarray(0, 32), sha256(utf8(rpId)))) {
    throw bad(`authenticator_data is for another relying party than ${JSON.stringify(rpId)}`);
  }
  if (((auth[32] as number) & 0x01) === 0) {
    throw bad("the authenticator did not see the user present (UP flag)");
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(client);
  } catch {
    throw bad("client_data_json is not UTF-8");
  }
  let data: Record<string, unknown>;
  try {
    const value = J.parse(text);
    J.checkStrict(value);
    data = CLIENT_DATA(value);
  } catch (e) {
    if (e instanceof J.JsonError) throw bad(`client_data_json: ${e.message}`);
    throw e;
  }
  if (data.type !== "webauthn.get") {
    throw bad(
      `client_data_json type is ${JSON.stringify((data.type as string).slice(0, 40))}, not "webauthn.get"`,
    );
  }
  let challenge: Uint8Array;
  try {
    challenge = decodeBase64(data.challenge as string);
  } catch {
    throw bad("the challenge is not base64url");
  }
  if (!bytesEqual(challenge, sha256(message))) {
    throw bad("the challenge is not this vote's (the SHA-256 of its PAE)");
  }
  if (!originOn(data.origin as string, rpId)) {
    throw bad(
      `origin ${JSON.stringify((data.origin as string).slice(0, 100))} is not on ${JSON.stringify(rpId)}`,
    );
  }
  return key.verifyPlain(concat(auth, sha256(client)), sig);
}

function verifyReadVote(env: ReadEnvelope, people: PeopleKeys): VerifiedVote {
  if (env.payloadType !== VOTE_PAYLOAD_TYPE) {
    throw new VoteError(
      "malformed",
      `malformed vote: expected payload type ${JSON.stringify(VOTE_PAYLOAD_TYPE)}, found ${JSON.stringify(
        env.payloadType.slice(0, 100),
      )}`,
    );
  }
  const sigs = env.signatures;
  if (sigs.length < 1 || sigs.length > MAX_VOTE_SIGNATURES) {
    throw new VoteError(
      "malformed",
      `malformed vote: expected 1 to ${MAX_VOTE_SIGNATURES} signatures, found ${sigs.length}`,
    );
  }
  let raw: Uint8Array;
  try {
    raw = decodeBase64(env.payload);
  } catch (e) {
    throw new VoteError("malformed", `malformed vote: payload: ${(e as Error).message}`);
  }
  let p: VotePayload;
  try {
    p = VOTE_PAYLOAD(J.parse(raw)) as unknown as VotePayload;
  } catch (e) {
    if (e instanceof J.JsonError)
      throw new VoteError("payload", `invalid vote payload: ${e.message}`);
    throw e;
  }
  if (p.v !== 1)
    throw new VoteError("payload", `invalid vote payload: expected vote version 1, found ${p.v}`);
  if (!SCOPES.includes(p.scope)) {
    throw new VoteError(
      "payload",
      `invalid vote payload: scope: expected once, session or always, found ${JSON.stringify(p.scope.slice(0, 20))}`,
    );
  }
  const message = pae(VOTE_PAYLOAD_TYPE, raw);
  const keys = people.of(p.voter);
  let assertionError: VoteError | null = null;
  for (const s of sigs) {
    let sig: Uint8Array;
    try {
      sig = decodeBase64(s.sig);
    } catch {
      continue;
    }
    const hinted = keys.filter((k) => k.kid === s.keyid);
    const others = keys.filter((k) => k.kid !== s.keyid);
    const auth = s.authenticator_data;
    const client = s.client_data_json;
    for (const key of [...hinted, ...others]) {
      let ok = false;
      if (auth !== null && client !== null && key.isPasskey) {
        try {
          ok = checkAssertion(key, message, sig, auth, client);
        } catch (e) {
          if (!(e instanceof VoteError)) throw e;
          assertionError = assertionError ?? e;
        }
      } else if (auth === null && client === null && !key.isPasskey) {
        ok = key.verifyPlain(message, sig);
      }
      // Otherwise: a passkey signs only through WebAuthn, a CLI key never does.
      if (ok) return { payload: { ...p }, kid: key.kid };
    }
  }
  if (assertionError !== null) throw assertionError;
  const registered =
    keys.length > 0 ? ` (${keys.length} registered)` : " (they have registered none)";
  throw new VoteError(
    "not_signed",
    `the vote is not signed by a key registered to ${JSON.stringify(p.voter.slice(0, 128))}${registered}`,
  );
}

/**
 * Verify a vote envelope's signature under the keys of the voter it names (a
 * strict payload parse, version 1, a known scope). Whether it binds a given
 * decision is `checkVoteBinding`'s. Throws `VoteError`.
 */
export function verifyVote(envelope: EnvelopeInput, peopleKeys: PeopleKeysInput): VerifiedVote {
  const people = peopleKeysOf(peopleKeys);
  let env: ReadEnvelope;
  try {
    env = readEnvelope(envelope);
  } catch (e) {
    if (e instanceof J.JsonError) throw new VoteError("malformed", `malformed vote: ${e.message}`);
    throw e;
  }
  return verifyReadVote(env, people);
}

function mismatch(field: string, signed: string, expected: string): VoteError {
  return new VoteError(
    "mismatch",
    `the vote is for ${field} ${JSON.stringify(signed)}, not ${JSON.stringify(expected)}`,
    field,
  );
}

/**
 * Check that `vote` binds the decision `approval`: the same call, the same
 * args to run, the same context, the same decision, a scope that covers it,
 * made no later than the decision (give or take 60 s). Throws VoteError
 * `mismatch` naming the first field that differs.
 */
export function checkVoteBinding(vote: VotePayload, approval: VerifiedResponse): void {
  const args = sha256Hex(approval.argsJson);
  const effective = sha256Hex(approval.resolveApprovedCall());
  for (const [name, signed, expected] of [
    ["request_id", vote.request_id, approval.requestId],
    ["tool_name", vote.tool_name, approval.toolName],
    ["args_sha256", vote.args_sha256, args],
    ["conversation_id", vote.conversation_id, approval.conversationId],
    ["caller", vote.caller, approval.caller],
    ["sandbox_mode", vote.sandbox_mode, approval.sandboxMode],
    ["approved", String(vote.approved), String(approval.approved)],
  ] as const) {
    if (signed !== expected) throw mismatch(name, signed.slice(0, 200), expected);
  }
  if (approval.approved && vote.effective_args_sha256 !== effective) {
    throw mismatch("effective_args_sha256", vote.effective_args_sha256.slice(0, 80), effective);
  }
  if (
    approval.approved &&
    approval.approvedForSession &&
    vote.scope !== "session" &&
    vote.scope !== "always"
  ) {
    throw mismatch("scope", vote.scope, "session or always");
  }
  if (parseTimestamp(vote.issued_at) - CLOCK_SKEW_NS > parseTimestamp(approval.issuedAt)) {
    throw mismatch("issued_at", vote.issued_at, "no later than the decision");
  }
}

/**
 * One vote of a decision, checked: the voter the decision names, and the key
 * whose signature verified (`kid`) or why the vote does not count (`error`).
 */
export interface VoteCheck {
  voter: string;
  kid: string | null;
  error: VoteError | null;
}

function checkOne(
  voter: string,
  approved: boolean,
  env: unknown,
  verified: VerifiedResponse,
  people: PeopleKeys,
): string {
  if (env === null) {
    throw new VoteError(
      "not_signed",
      `the vote is not signed by a key registered to ${JSON.stringify(voter)} (it carries no signature)`,
    );
  }
  const vote = verifyReadVote(readEnvelope(env), people);
  if (vote.payload.voter !== voter) throw mismatch("voter", vote.payload.voter, voter);
  if (vote.payload.approved !== approved) {
    throw mismatch("approved", String(vote.payload.approved), String(approved));
  }
  checkVoteBinding(vote.payload, verified);
  return vote.kid;
}

/** Every vote `verified` carries, checked (none for a version 1 payload). */
export function checkVotes(verified: VerifiedResponse, peopleKeys: PeopleKeysInput): VoteCheck[] {
  const people = peopleKeysOf(peopleKeys);
  return (verified.votes ?? []).map((v) => {
    try {
      return {
        voter: v.voter,
        kid: checkOne(v.voter, v.approved, v.envelope, verified, people),
        error: null,
      };
    } catch (e) {
      if (e instanceof VoteError) return { voter: v.voter, kid: null, error: e };
      if (e instanceof J.JsonError) {
        return {
          voter: v.voter,
          kid: null,
          error: new VoteError("malformed", `malformed vote: ${e.message}`),
        };
      }
      throw e;
    }
  });
}

/** The distinct people whose signed votes verify and bind this decision. */
export function signedVoters(verified: VerifiedResponse, peopleKeys: PeopleKeysInput): Set<string> {
  return new Set(
    checkVotes(verified, peopleKeys)
      .filter((c) => c.error === null)
      .map((c) => c.voter),
  );
}

/**
 * At least `needed` distinct people's signed votes verify and bind
 * `verified`, an approval: those people. Throws `NotEnoughVotes` (code
 * `votes`) otherwise; a denial never passes.
 */
export function requireSignedVotes(
  verified: VerifiedResponse,
  peopleKeys: PeopleKeysInput,
  needed: number,
): Set<string> {
  if (!Number.isInteger(needed) || needed < 0) {
    throw new TypeError(`the count of votes must be an integer, 0 or more, not ${needed}`);
  }
  const voters = new Set<string>();
  const problems: string[] = [];
  for (const c of checkVotes(verified, peopleKeys)) {
    if (c.error !== null) problems.push(`${c.voter}: ${c.error.message}`);
    else if (verified.approved) voters.add(c.voter);
    else problems.push(`${c.voter}: the decision is a denial`);
  }
  if (verified.approved && voters.size >= needed) return voters;
  throw new NotEnoughVotes(verified.approved ? voters.size : 0, needed, problems);
}
