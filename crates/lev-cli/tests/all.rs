//! The one integration test binary of `lev-cli`: the real `lev` binary, run
//! as a user or a script would run it.
//!
//! - `verify`: `lev verify` over every committed test vector of lev-approval
//!   (exit 0 / 3 / 1, JSON on stdout, the reason on stderr), and its inputs.
//! - `keys`: `lev keys generate` (mode 0600, refuses to overwrite, output).
//! - `serve`: `lev serve` as a process: its start lines, SIGTERM (exit 0),
//!   and every acknowledged write kept through a SIGKILL mid-stream.
//! - `python_signer`: envelopes signed by Python's `cryptography` with its own
//!   DSSE code, verified by `lev verify`.
//! - `sdk`: the Rust SDK (lev-client) against a real `lev serve`: a full
//!   create -> answer -> wait cycle, the 409 winner, attachments, events.
//! - `inbox`: `lev ls`, `lev show`, `lev respond` in every form; where the
//!   token comes from; connection errors.
//! - `ask`: `lev ask` with a person answering through the API; exit 0, 3, 4.
//! - `tokens`: `lev token create|ls|revoke`.
//! - `audit`: `lev audit [--verify]`, a forged entry, a cut-off tail and `--head`.
//! - `terminal`: control characters made visible, NO_COLOR.
//! - `file_limits`: every file lev reads from a path it was given is read
//!   under its kind's limit: /dev/zero, standard input, sparse files.
//! - `hidden_json`: every JSON lev prints writes hidden characters as
//!   `\uXXXX` and reads back the same.
//! - `deadlines`: every command an agent runs with a time limit (`lev hook`,
//!   `lev mcp`'s tools, `lev ask`, `lev run`) answers by its deadline against
//!   a lev that never answers, trickles, or closes mid-answer.
//! - `demo`: `lev demo`'s agent asks and prints what its model reads.
//! - `mcp_proxy`: `lev mcp proxy` between the official MCP Python SDK and
//!   the reference MCP servers from npm: pass-through, gated calls (allowed,
//!   asked, denied, edited, cancelled), annotations in the policy, the
//!   server's sampling and roots requests, `--elicit`, a broken upstream,
//!   Streamable HTTP on either side.
//! - `health`: `lev health` (the container image's HEALTHCHECK), and a
//!   client of plain http:// on a system without certificate roots.
//! - `newcomer`: what a new user runs into: `| head`, usage errors, flags
//!   that do not fit the question, error messages.
//! - `bench`: `lev bench` smoke runs (never a speed test).
//! - `webhooks`: `lev webhook` and what a real receiver gets: signatures,
//!   retries through failures and a restart, 410, bad input (`receiver` is
//!   the loopback HTTP receiver it and the Slack tests use).
//! - `slack`: the Slack integration against a fake of Slack's Web API:
//!   posts, 429, signed clicks and modals, hostile requests refused.
//! - `votes`: quorum and people's own signed votes: `lev key init`, `lev
//!   respond` signing, `lev show`/`lev ls` with votes, `lev verify
//!   --require-votes`, revoked keys.
//! - `watch`: `lev watch` in a real pseudo-terminal (tmux): keys typed, answers
//!   checked through the API, a dropped connection resumed.
//! - `postgres_tls`: `lev serve` and `lev migrate` over TLS to PostgreSQL
//!   (`sslmode=verify-full&sslrootcert=...`), and refused with a wrong CA or
//!   host name (the server set up by lev-store-postgres's `server_tls`).
//!
//! - `observability`: `lev serve --log-format json` parsed line by line
//!   (one line per request, its fields, no token), and `/metrics` parsed by
//!   `prometheus_client` (Python) against a run whose counts are known;
//!   OTLP/HTTP traces received and decoded with `opentelemetry-proto`
//!   (Python): spans, parents, the `traceparent` round trip.
//! - `crate_graph`: ARCHITECTURE.md's crate graph and layers against every
//!   crate's `Cargo.toml`.
//!
//! The client-command modules share `client_env`: `lev serve` on port 0 in a
//! scratch data dir, and `lev` runs with LEV_URL and LEV_TOKEN pointed at it.
//! Every `lev serve` child is a `spawned::Spawned`, the very file `lev bench`
//! starts its servers with (`src/cmd/bench/spawned.rs`).

// Test helpers outside `#[test]` functions may panic on a broken setup too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "all/agents/mod.rs"]
mod agents;
#[path = "all/ask.rs"]
mod ask;
#[path = "all/audit.rs"]
mod audit;
#[path = "all/bench.rs"]
mod bench;
#[path = "all/client_env.rs"]
mod client_env;
#[path = "all/crate_graph.rs"]
mod crate_graph;
#[path = "all/deadlines.rs"]
mod deadlines;
#[path = "all/demo.rs"]
mod demo;
#[path = "all/file_limits.rs"]
mod file_limits;
#[path = "all/forms.rs"]
mod forms;
#[path = "all/health.rs"]
mod health;
#[path = "all/hidden_json.rs"]
mod hidden_json;
#[path = "all/inbox.rs"]
mod inbox;
#[path = "all/keys.rs"]
mod keys;
#[path = "all/mcp_proxy.rs"]
mod mcp_proxy;
#[path = "all/newcomer.rs"]
mod newcomer;
#[path = "all/observability.rs"]
mod observability;
#[path = "all/operators.rs"]
mod operators;
#[path = "all/postgres_tls.rs"]
mod postgres_tls;
#[path = "all/python_signer.rs"]
mod python_signer;
#[path = "all/receiver.rs"]
mod receiver;
#[path = "all/replicas.rs"]
mod replicas;
#[path = "all/run.rs"]
mod run;
#[path = "all/sdk.rs"]
mod sdk;
#[path = "all/serve.rs"]
mod serve;
// The test PostgreSQL serving TLS: lev-store-postgres's test fixture, shared.
#[path = "../../lev-store-postgres/tests/all/server_tls.rs"]
mod server_tls;
#[path = "all/slack.rs"]
mod slack;
// `lev serve` as a child process: the binary's own code for `lev bench`,
// of which the tests use another part than the bench.
#[allow(dead_code)]
#[path = "../src/cmd/bench/spawned.rs"]
mod spawned;
#[path = "all/support.rs"]
mod support;
#[path = "all/terminal.rs"]
mod terminal;
#[path = "all/tokens.rs"]
mod tokens;
#[path = "all/verify.rs"]
mod verify;
#[path = "all/votes.rs"]
mod votes;
#[path = "all/watch.rs"]
mod watch;
#[path = "all/webhooks.rs"]
mod webhooks;
