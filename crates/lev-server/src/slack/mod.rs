//! Slack's adapters (SPEC section 14): [`deliver`] turns the Slack
//! endpoint's outbox deliveries into Web API calls, and [`interact`] is the
//! interactivity route. The pure part (the configuration, Slack's
//! signature, its payloads, Block Kit) is the `lev-slack` crate.

pub mod deliver;
pub mod interact;
