//! The Rust SDK for lev: a worker asks a person (or a supervising AI) and
//! waits; an approver answers; both over lev's HTTP API (SPEC section 3).
//!
//! - [`Client`] has one method per route: health, keys, interactions
//!   (create, list, get, wait, respond, cancel), blobs, tokens, audit, tasks
//!   and a sub-agent's result, and the event stream. Every list comes as a
//!   [`lev_protocol::api::Page`] (`items`, `next_cursor`); the methods that
//!   return a whole list follow `next_cursor` for you.
//! - One HTTP stack: [`Client`] builds its connection pool once (clones and
//!   [`Client::with_token`] share it), and every call, the session and
//!   sub-agent calls of [`operator`] included, maps a refusal to
//!   [`Error::Api`] the same way.
//! - [`Client::ask`] creates an interaction and waits for its [`Outcome`],
//!   re-waiting while it is pending, until a deadline.
//! - [`Answer::tool_result_text`] turns the outcome into the text a model
//!   reads as the tool's result; [`Client::save_parts`] stores attachments in
//!   a directory the worker chooses, under safe names.
//!
//! # Example
//! ```no_run
//! use lev_client::Client;
//! use lev_protocol::{InteractionKind, InteractionRequest};
//! use std::time::Duration;
//!
//! # async fn f() -> lev_client::Result<()> {
//! let client = Client::new("http://127.0.0.1:7420", Some("worker-secret".into()))?;
//! let request = InteractionRequest::new(
//!     "s-1",
//!     InteractionKind::FreeText { prompt: "Which branch should I deploy?".into() },
//! );
//! let answer = client.ask(&request, Some(Duration::from_secs(600))).await?;
//! let text = client
//!     .tool_result(&answer, None, Some(std::path::Path::new("/tmp/run-parts")))
//!     .await?;
//! println!("{text}");
//! # Ok(()) }
//! ```
//!
//! # Invariants
//! - The client knows the wire types (`lev-protocol`) and HTTP, nothing of
//!   storage or of the server's insides.
//! - `https://` with rustls (the `ring` provider), trusting the system's
//!   roots or the CA in [`ConnectOptions`]; plain `http://` only to loopback
//!   unless [`ConnectOptions::insecure_http`], so a token never travels in
//!   clear by accident. Redirects are never followed.
//! - A file name from the server is never trusted as a path.
//! - A file read from a path ([`files`]) is read under a limit: never more
//!   than its kind may hold, whatever the path names.

pub mod backoff;
mod client;
mod error;
pub mod events;
/// The one bounded read of a file lev is pointed at (from `lev-io`, which
/// the server uses too).
pub use lev_io::files;
pub mod gate;
pub mod operator;
mod outcome;
pub mod parts;
pub mod render;
mod tls;
mod worker;

pub use client::{Blob, Client, ListQuery, MAX_WAIT_S, StatusFilter, TaskQuery};
pub use error::{Error, Result};
pub use events::{Event, EventStream};
pub use lev_io::outbound_tls_config;
pub use parts::{SavedPart, inbound_part, safe_file_name};
pub use tls::ConnectOptions;
pub use worker::{Answer, Outcome, final_outcome};
