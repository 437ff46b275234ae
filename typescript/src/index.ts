/**
 * lev's TypeScript SDK: ask people (or a supervising AI), gate tool calls,
 * and verify the signed approvals offline.
 *
 *     import { Client } from "lev-sdk";
 *     const answer = await new Client("http://127.0.0.1:7420", token).ask("Deploy now?", { sessionId: "s-1" });
 */

export { decodeBase64, encodeBase64, encodeBase64url } from "./bytes.js";
export { type VerifyOptions, verify } from "./check.js";
export * from "./errors.js";
export { JsonError, strictParse } from "./json.js";
export type * from "./types.js";
export {
  APPROVAL_PAYLOAD_TYPE,
  APPROVAL_PAYLOAD_TYPE_V2,
  type CallContext,
  type Clock,
  type EnvelopeInput,
  type KeysInput,
  keyId,
  type PayloadVote,
  pae,
  parseTimestamp,
  TrustedKeys,
  VerifiedResponse,
  verifyEnvelope,
} from "./verify.js";
export {
  checkVoteBinding,
  checkVotes,
  PeopleKeys,
  PersonKey,
  requireSignedVotes,
  sha256Hex,
  signedVoters,
  type VerifiedVote,
  VOTE_PAYLOAD_TYPE,
  type VoteCheck,
  type VotePayload,
  verifyVote,
} from "./votes.js";
