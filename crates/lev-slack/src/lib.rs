//! Slack, the pure part: lev's interactions posted to a channel as Block Kit
//! messages with buttons, and the clicks coming back (SPEC section 14).
//!
//! [`config`] reads `--slack-config`, [`verify`] checks Slack's request
//! signature, [`payload`] decodes what Slack posts to the interactivity URL,
//! and [`blocks`] renders messages and modals. None of that does network
//! I/O, and none of it knows the server: lev-server's `slack::deliver`
//! turns the Slack endpoint's outbox deliveries into Web API calls, and its
//! `slack::interact` is the interactivity route.
//!
//! # Invariants
//! - No network I/O, no server types: what the server knows comes in as
//!   parameters (an [`lev_protocol::api::InteractionView`], the clock's
//!   time, the signing secret).
//! - Agent text is shown inert: hidden characters spelled out, and flagged
//!   when any of [`lev_protocol::text::agent_texts`] holds one.

pub mod blocks;
pub mod config;
pub mod payload;
pub mod verify;

pub use blocks::{ephemeral, feedback_modal, message, reply_modal};
pub use config::SlackConfig;
pub use payload::{PayloadError, SlackAction};
pub use verify::{VerifyError, sign};
