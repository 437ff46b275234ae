//! Slack: lev's interactions posted to a channel as Block Kit messages with
//! buttons, and the clicks coming back (SPEC section 14).
//!
//! This module is the pure part: [`config`] reads `--slack-config`,
//! [`verify`] checks Slack's request signature, [`payload`] decodes what
//! Slack posts to the interactivity URL, and [`blocks`] renders messages and
//! modals. None of that does network I/O. [`deliver`] turns the Slack
//! endpoint's outbox deliveries into Web API calls, and [`interact`] is the
//! interactivity route.

pub mod blocks;
pub mod config;
pub mod deliver;
pub mod interact;
pub mod payload;
pub mod verify;

pub use blocks::{ephemeral, feedback_modal, message, reply_modal};
pub use config::SlackConfig;
pub use payload::{PayloadError, SlackAction};
pub use verify::{VerifyError, sign};
