//! The conformance suite: what every backend of the store contract must do,
//! run against any [`Backend`]. A backend's own tests call
//! [`conformance_suite!`](crate::conformance_suite) once; each case becomes
//! one test.
//!
//! Cases that need several handles on one database at once (several
//! servers) run only where [`Backend::many_handles`] says so; every other
//! case runs everywhere. Concurrency cases run their writers on many tasks
//! of a multi-threaded runtime, so they also race on one handle.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_docs,
    missing_debug_implementations
)] // a test that cannot unwrap has failed

mod fixtures;
mod gate;
mod interactions;
mod lifecycle;
mod operators;
mod parts;
mod replicas;
mod stats;
mod tasks;
mod votes;
mod webhooks;

use std::sync::Arc;

use async_trait::async_trait;

use crate::Store;

pub use gate::*;
pub use interactions::*;
pub use lifecycle::*;
pub use operators::*;
pub use parts::*;
pub use replicas::*;
pub use stats::*;
pub use tasks::*;
pub use votes::*;
pub use webhooks::*;

/// One test's database, on some backend.
#[async_trait]
pub trait Backend: Send + Sync {
    /// A handle on this test's database, empty at first. Called again once
    /// every earlier handle was dropped, it sees the same data (a restart).
    async fn open(&self) -> Arc<dyn Store>;

    /// Whether several handles may be open at once (several servers on one
    /// database); the cases that need it are skipped otherwise.
    fn many_handles(&self) -> bool;
}

/// Every case of the suite, as `#[tokio::test]` functions calling
/// `$make().await` for a fresh [`Backend`] each.
#[macro_export]
macro_rules! conformance_suite {
    ($make:path) => {
        $crate::conformance_suite!(@cases $make;
            create_is_idempotent_by_id,
            forms_keep_their_schema_order_and_answer,
            the_lifecycle_follows_the_model,
            pending_limit_per_session,
            pending_limit_holds_under_concurrent_creates,
            racing_answers_exactly_one_wins,
            events_are_announced_after_commit_and_replayable,
            events_from_concurrent_writers_resume_without_gaps,
            expiry_applies_on_timeout,
            cancel_is_a_compare_and_set,
            list_pages_newest_first,
            audit_chain_is_whole,
            audit_chain_verifies_after_concurrent_writers,
            blobs_are_served_only_for_a_winning_answer,
            tokens_have_one_owner_per_name,
            gate_decisions_are_idempotent_by_request,
            a_repeated_gate_call_signs_nothing_new,
            gate_asks_respect_the_pending_limit,
            grants_commit_only_with_the_winning_answer,
            nonces_are_spent_once,
            nonces_are_spent_once_in_any_spelling,
            a_task_lives_from_create_to_finish_and_survives_a_reopen,
            a_task_finishes_once,
            an_escalation_note_keeps_the_create_idempotent,
            bare_events_commit_with_their_audit_entry,
            signing_keys_init_rotate_remove,
            dashboard_sessions_live_in_the_store,
            a_second_handle_sees_every_write,
            operator_messages_resolve_once,
            an_operator_reply_races_a_withdrawal,
            operator_presence_follows_connections,
            operator_signals_reach_every_server,
            the_live_stream_is_one_gapless_order,
            appended_entries_are_returned_as_stored,
            first_starts_at_once_make_one_signing_key,
            one_grant_per_key_under_concurrent_approvals,
            expiry_races_answers_once,
            any_text_comes_back_as_it_went,
            deliveries_commit_with_their_events,
            deliveries_are_claimed_once_and_keep_their_attempts,
            a_gone_endpoint_is_disabled_and_a_deleted_one_forgotten,
            reminders_are_recorded_once_and_reach_the_outbox,
            votes_count_once_each_against_the_votes_seen,
            concurrent_votes_never_count_the_same_votes,
            people_keys_belong_to_one_person_and_go_with_the_token,
            an_escalation_is_recorded_once,
            revocations_void_the_votes_they_backed,
            a_vote_is_recorded_only_while_its_authority_holds,
            signing_keys_are_never_a_persons,
            approvals_note_whose_nonce_they_carry,
            a_revocation_racing_a_vote_is_never_outlived,
            stats_count_a_window_per_kind_and_rule,
            signing_key_changes_are_audited_and_reach_every_handle,
            a_revoked_token_is_refused_on_every_handle_at_once,
        );
    };
    (@cases $make:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let backend = $make().await;
                $crate::conformance::$case(&backend).await;
            }
        )*
    };
}
