/**
 * `verify`: an envelope checked against a call, as `lev verify` and
 * python's `lev.verify` do.
 */

import { KeyRefused } from "./errors.js";
import {
  type Clock,
  type KeysInput,
  trustedKeysOf,
  type VerifiedResponse,
  verifyEnvelope,
} from "./verify.js";
import { type PeopleKeysInput, peopleKeysOf, requireSignedVotes } from "./votes.js";

export interface VerifyOptions {
  requestId: string;
  toolName: string;
  /** The args text of the call about to run, compared byte for byte. */
  argsJson: string | Uint8Array;
  conversationId?: string | undefined;
  caller?: string | undefined;
  sandboxMode?: string | undefined;
  /** The clock to check against (default: now). */
  now?: Clock | undefined;
  /** People's keys (the JWKS of `GET /v1/people/keys`): read only with `requireVotes`. */
  peopleKeys?: PeopleKeysInput | undefined;
  /** Require this many distinct people's signed votes binding the call (SPEC section 13). */
  requireVotes?: number | undefined;
}

/**
 * Verify `envelope` and check that it authorizes exactly this call in this
 * context. Returns the verified response (`effectiveArgsJson` holds the args
 * to run); throws `VerificationError` when it is not genuine or not valid now,
 * `NotAuthorizedError` when it is genuine but does not authorize the call (a
 * denial, another call, another conversation, caller or sandbox mode;
 * `NotEnoughVotes` for too few signed votes), and `KeyRefused` for unusable
 * keys. A context field left undefined is not checked.
 */
export function verify(envelope: unknown, keys: KeysInput, opts: VerifyOptions): VerifiedResponse {
  if (
    opts.requireVotes !== undefined &&
    (!Number.isInteger(opts.requireVotes) || opts.requireVotes < 0)
  ) {
    throw new TypeError(
      `requireVotes must be a count of people (an integer, 0 or more), not ${opts.requireVotes}`,
    );
  }
  const verified = verifyEnvelope(envelope, trustedKeysOf(keys), opts.now);
  verified.checkCall(opts.requestId, opts.toolName, opts.argsJson, {
    conversationId: opts.conversationId,
    caller: opts.caller,
    sandboxMode: opts.sandboxMode,
  });
  if (opts.requireVotes !== undefined) {
    if (opts.peopleKeys === undefined || opts.peopleKeys === null) {
      throw new KeyRefused(
        "malformed_key",
        "requireVotes needs peopleKeys: the JWKS of GET /v1/people/keys",
      );
    }
    requireSignedVotes(verified, peopleKeysOf(opts.peopleKeys), opts.requireVotes);
  }
  return verified;
}
