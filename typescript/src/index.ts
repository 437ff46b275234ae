/**
 * lev's TypeScript SDK: ask people (or a supervising AI), gate tool calls,
 * and verify the signed approvals offline.
 *
 *     import { Client } from "lev-sdk";
 *     const answer = await new Client("http://127.0.0.1:7420", token).ask("Deploy now?", { sessionId: "s-1" });
 */

export { decodeBase64, encodeBase64, encodeBase64url } from "./bytes.js";
export { type VerifyOptions, verify } from "./check.js";
export {
  type AskOptions,
  answerOf,
  Client,
  type ClientOptions,
  DEFAULT_URL,
  type ListOptions,
  MAX_WAIT_S,
  question,
  type TaskListOptions,
} from "./client.js";
export * from "./errors.js";
export { Event, EventStream, type EventsOptions } from "./events.js";
export {
  ApprovedCall,
  type GateCall,
  Gatekeeper,
  type GatekeeperOptions,
  glob,
  INTERNAL_CLOSE,
  INTERNAL_OPEN,
  levId,
  refusal,
} from "./gate.js";
export { JsonError, strictParse } from "./json.js";
export {
  type Ask,
  type AskHandler,
  type ConnectHandler,
  Defer,
  type ErrorHandler,
  type Hello,
  type Hook,
  type HookHandler,
  Operator,
  type OperatorOptions,
  REPLACED_CLOSE_CODE,
  Reject,
  type SpawnHandler,
  SpawnOrder,
  SpawnOutcome,
  type Stopped,
  type Triage,
  type TriageHandler,
  type WebSocketFactory,
  type WebSocketLike,
} from "./operator.js";
export { type Attachment, mediaType } from "./parts.js";
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
export {
  type HeadersLike,
  SECRET_PREFIX,
  secretKey,
  signWebhook,
  verifyWebhook,
  WebhookError,
} from "./webhooks.js";
