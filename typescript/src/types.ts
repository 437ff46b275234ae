/** The shapes of lev's JSON (SPEC sections 2 and 3). Wire names stay snake_case. */

export interface Signature {
  keyid: string;
  sig: string;
  /** A passkey's vote (SPEC section 13) also carries its WebAuthn data (base64). */
  authenticator_data?: string;
  client_data_json?: string;
}

/** A DSSE envelope: a signed approval (or a person's signed vote). */
export interface Envelope {
  payloadType: string;
  payload: string;
  signatures: Signature[];
}

/**
 * An attachment as the server stores and returns it: never its bytes, which
 * are at `GET /v1/blobs/{sha256}` (`Client.blob`). `name` is reduced to a
 * plain file name; `original_name` is the name sent, when it differed.
 */
export interface StoredPart {
  name: string;
  media_type: string;
  size: number;
  sha256: string;
  original_name?: string;
}

/** An attachment as a respond sends it (`data`: the bytes, base64). */
export interface InboundPart {
  name: string;
  media_type: string;
  data: string;
}

export type ApprovalScope = "once" | "session" | "always";

/** An InteractionResponse as the server stores and returns it. */
export interface Response {
  request_id: string;
  value?: string | null;
  choice_index?: number | null;
  approved?: boolean | null;
  scope?: ApprovalScope | null;
  feedback?: string | null;
  parts?: StoredPart[];
  modified_args_json?: string | null;
  injected_context?: string | null;
  reason?: string | null;
  grant_args?: Record<string, string> | null;
  vote?: Envelope | null;
}

/** An answer as `respond` sends it (`request_id` is filled in for you). */
export interface ResponseInput {
  value?: string;
  choice_index?: number;
  approved?: boolean;
  scope?: ApprovalScope;
  feedback?: string;
  parts?: InboundPart[];
  modified_args_json?: string;
  injected_context?: string;
  reason?: string;
  grant_args?: Record<string, string>;
  vote?: Envelope;
  [extra: string]: unknown;
}

export type InteractionKind =
  | { type: "free_text"; prompt: string }
  | { type: "multiple_choice"; prompt: string; options: string[] }
  | {
      type: "tool_approval";
      tool_name: string;
      args_json: string;
      missing_capabilities?: string[];
      sandbox_mode?: string;
      options?: string[];
    }
  | { type: "interaction_points"; prompt: string; points: { id: string; text: string }[] };

export type OnTimeout = "deny" | "cancel" | { choice: number };

export type InteractionStatus = "pending" | "answered" | "expired" | "cancelled";

/** What a vote on a tool approval binds (SPEC section 13). */
export interface VoteBinding {
  request_id: string;
  tool_name: string;
  args_sha256: string;
  conversation_id: string;
  caller: string;
  sandbox_mode: string;
}

export interface Vote {
  voter: string;
  approved: boolean;
  at: string;
  signed: boolean;
}

/** An InteractionRequest as a worker creates it. */
export interface InteractionRequest {
  id?: string;
  session_id: string;
  conversation_id?: string;
  turn_id?: string;
  caller?: string;
  title?: string;
  kind: InteractionKind;
  timeout_s?: number;
  on_timeout?: OnTimeout;
  route?: string[];
  reason?: string;
  metadata?: unknown;
}

/** An InteractionRequest with what the server adds. */
export interface Interaction extends InteractionRequest {
  id: string;
  status: InteractionStatus;
  created_at: string;
  expires_at?: string | null;
  answered_at?: string | null;
  answered_by?: string | null;
  gate?: Record<string, unknown>;
  approvals_needed?: number;
  votes?: Vote[];
  vote_binding?: VoteBinding;
}

export interface InteractionRecord {
  request: Interaction;
  response: Response | null;
  approval: Envelope | null;
}

/** What every list route answers: `items` and `next_cursor` (null on the last page). */
export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

export interface WaitResult {
  status: InteractionStatus;
  response?: Response;
  approval?: Envelope | null;
}

export interface RespondResult {
  response: Response;
  approval: Envelope | null;
}

export interface GateRequest {
  session_id: string;
  conversation_id?: string;
  turn_id?: string;
  request_id: string;
  caller?: string;
  tool_name: string;
  args_json: string;
  sandbox_mode?: string;
  required_capabilities?: string[];
  timeout_s?: number;
  route?: string[];
  reason?: string;
}

export type GateResult =
  | { decision: "allow"; approval: Envelope }
  | { decision: "deny"; reason: string }
  | { decision: "ask"; interaction_id: string };

export interface Jwk {
  kty: string;
  crv: string;
  x: string;
  kid?: string;
  alg?: string;
  use?: string;
}

export interface Jwks {
  keys: Jwk[];
}

/** A person's public key (SPEC section 13); `kid` is `person:NAME:N`. */
export interface PersonJwk extends Jwk {
  y?: string;
  rp_id?: string;
  credential_id?: string;
}

export interface PeopleJwks {
  keys: PersonJwk[];
}

export interface PersonKeyRegistered {
  key: PersonJwk;
  person: string;
}

export interface Health {
  status: string;
  version: string;
  store: string;
  replica_id?: string;
}

export interface Grant {
  id: string;
  scope: ApprovalScope;
  caller: string;
  conversation_id?: string;
  sandbox_mode: string;
  tool_name: string;
  covered_capabilities: string[];
  approver: string;
  grant_args?: Record<string, string> | null;
  vote?: Envelope | null;
  created_at: string;
}

export type TaskStatus = "pending" | "running" | "succeeded" | "failed";

export interface Task {
  id: string;
  session_id: string;
  status: TaskStatus;
  spawn?: unknown;
  last_result?: unknown;
  output_tail?: string | null;
  error?: string | null;
  caller?: string | null;
  created_at: string;
  updated_at: string;
}

export type Role = "worker" | "operator" | "approver" | "admin";

export interface TokenInfo {
  name: string;
  role: Role;
  caller?: string | null;
  token?: string;
  sessions?: string[];
  created_at?: string;
}

/** The data of `operator.connected` and `operator.disconnected` events. */
export interface OperatorPresence {
  session_id: string;
  operator?: string;
}

export interface AskResult {
  answer: unknown;
  answered_by: string;
}

export interface SpawnResult {
  task_id: string;
  ok: boolean;
  value: unknown;
  error: string | null;
}

export interface AuditEntry {
  seq: number;
  at: string;
  action: string;
  actor: string;
  data: unknown;
  prev_hash: string;
  hash: string;
}

export interface AuditHead {
  seq: number;
  hash: string;
  signature: Envelope;
}

export interface AuditPage extends Page<AuditEntry> {
  head: AuditHead;
}
