//! Worker helpers: ask a question and wait for its outcome, however long it takes.

use std::path::Path;
use std::time::Duration;

use lev_protocol::api::WaitResponse;
use lev_protocol::{Interaction, InteractionRequest, InteractionStatus, StoredResponse};
use tokio::time::Instant;

use crate::client::{Client, MAX_WAIT_S};
use crate::error::{Error, Result};
use crate::parts::SavedPart;
use crate::render;

/// How many transport failures in a row a waiter rides out (server restarts,
/// dropped connections) before giving up.
const MAX_CONSECUTIVE_FAILURES: u32 = 8;
/// How long past its deadline a waiter may still be talking to the server:
/// the last long-poll's answer on its way, a cancel.
const PAST_DEADLINE: Duration = Duration::from_secs(2);

/// How an interaction ended, as a waiter sees it.
pub use crate::outcome::Outcome;

/// A question and how it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The interaction as stored.
    pub interaction: Interaction,
    /// How it ended.
    pub outcome: Outcome,
}

impl Answer {
    /// The answer, when there is one.
    pub fn response(&self) -> Option<&StoredResponse> {
        match &self.outcome {
            Outcome::Answered { response, .. } => Some(response),
            _ => None,
        }
    }

    /// A form's answer as `T` (a struct deriving `Deserialize` whose fields
    /// are the form's), `None` when the form was not answered.
    ///
    /// # Errors
    /// [`Error::Decode`] when the fields do not fit `T`.
    pub fn form<T: serde::de::DeserializeOwned>(&self) -> Result<Option<T>> {
        let Some(fields) = self.response().and_then(|r| r.fields.clone()) else {
            return Ok(None);
        };
        serde_json::from_value(serde_json::Value::Object(fields))
            .map(Some)
            .map_err(|e| Error::Decode {
                path: format!("/v1/interactions/{}", self.interaction.id()),
                expected: "the form's fields",
                found: e.to_string(),
            })
    }

    /// Whether a tool call was approved.
    pub fn is_approved(&self) -> bool {
        self.response().is_some_and(|r| r.approved == Some(true))
    }

    /// Whether this is a denial: a tool approval answered with a deny, or an
    /// expiry with `on_timeout: deny`.
    pub fn is_denied(&self) -> bool {
        match &self.outcome {
            Outcome::Expired => true,
            Outcome::Answered { response, .. } => response.approved == Some(false),
            _ => false,
        }
    }

    /// Whether nobody answered: cancelled, or timed out with no deny.
    pub fn is_unanswered(&self) -> bool {
        matches!(self.outcome, Outcome::Cancelled | Outcome::TimedOut { .. })
    }

    /// The text a model reads for this answer (SPEC section 2, "Tool result
    /// text"). `tool_output` is what the tool printed, for an approved call
    /// the worker then ran; `parts` are the attachments stored by
    /// [`Client::save_parts`] (parts not among them are named as not stored).
    pub fn tool_result_text(&self, tool_output: Option<&str>, parts: &[SavedPart]) -> String {
        render::tool_result_text(&self.interaction, &self.outcome, tool_output, parts)
    }
}

impl Client {
    /// Ask: create the interaction, then wait for its outcome until
    /// `deadline` (or for ever with `None`), re-waiting while it is pending.
    /// Past the deadline the interaction is cancelled, so nobody answers a
    /// question no one waits for; an answer that beat the cancel is returned.
    ///
    /// With a deadline, the whole of it ends a few seconds past it whatever
    /// the server does (each request gets what is left and 2 s; the cancel
    /// and its check 2 s each): a server that hangs or trickles its answer
    /// is a transport error then.
    ///
    /// # Errors
    /// Any [`Error`] from the create; during the wait, transport failures are
    /// retried a few times (the server may be restarting) before one is returned.
    pub async fn ask(
        &self,
        request: &InteractionRequest,
        deadline: Option<Duration>,
    ) -> Result<Answer> {
        let started = Instant::now();
        let until = deadline.and_then(|d| started.checked_add(d));
        let interaction = self
            .create_interaction_within(request, within(until))
            .await?;
        let outcome = self.wait_outcome(interaction.id(), until, true).await?;
        Ok(Answer {
            interaction,
            outcome,
        })
    }

    /// Wait for an existing interaction's outcome until `deadline`, without
    /// cancelling it when the deadline passes. With a deadline, it returns
    /// by it and 2 s whatever the server does (each request gets what is
    /// left and 2 s).
    ///
    /// # Errors
    /// Any [`Error`], as for [`Client::ask`].
    pub async fn wait_for_answer(&self, id: &str, deadline: Option<Duration>) -> Result<Answer> {
        // A deadline past what the clock can hold is no deadline.
        let until = deadline.and_then(|d| Instant::now().checked_add(d));
        let interaction = self
            .get_interaction_within(id, within(until))
            .await?
            .request;
        let outcome = self.wait_outcome(id, until, false).await?;
        Ok(Answer {
            interaction,
            outcome,
        })
    }

    /// Store an answer's attached parts in `dir`, each checked against its
    /// digest, under a safe file name; see [`crate::parts`].
    ///
    /// # Errors
    /// [`Error::Io`] when `dir` cannot be written, [`Error::Part`] when a
    /// blob's bytes do not match the digest, any [`Error`] of the download.
    pub async fn save_parts(
        &self,
        response: &StoredResponse,
        dir: &Path,
    ) -> Result<Vec<SavedPart>> {
        let mut saved = Vec::with_capacity(response.parts.len());
        for part in &response.parts {
            let blob = self.blob(&part.sha256).await?;
            saved.push(crate::parts::store(dir, part, &blob.bytes).await?);
        }
        Ok(saved)
    }

    /// The tool-result text of `answer`, its attachments first stored in
    /// `parts_dir` when one is given.
    ///
    /// # Errors
    /// As for [`Client::save_parts`].
    pub async fn tool_result(
        &self,
        answer: &Answer,
        tool_output: Option<&str>,
        parts_dir: Option<&Path>,
    ) -> Result<String> {
        let saved = match (answer.response(), parts_dir) {
            (Some(response), Some(dir)) if !response.parts.is_empty() => {
                self.save_parts(response, dir).await?
            }
            _ => Vec::new(),
        };
        Ok(answer.tool_result_text(tool_output, &saved))
    }

    async fn wait_outcome(
        &self,
        id: &str,
        until: Option<Instant>,
        cancel_at_deadline: bool,
    ) -> Result<Outcome> {
        let started = Instant::now();
        let mut failures = 0;
        loop {
            let chunk = match until {
                Some(until) => {
                    let left = until.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    left.as_secs().clamp(1, MAX_WAIT_S)
                }
                None => MAX_WAIT_S,
            };
            // Each long-poll ends by the deadline (and a little): a server
            // that never answers, or trickles its answer, cannot hold it.
            match self.wait_within(id, chunk, within(until)).await {
                Ok(w) => {
                    failures = 0;
                    if let Some(outcome) = final_outcome(w) {
                        return Ok(outcome);
                    }
                }
                Err(e) if retryable(&e) && failures < MAX_CONSECUTIVE_FAILURES => {
                    failures += 1;
                    let pause =
                        crate::backoff::jittered(Duration::from_millis(100 << failures.min(5)));
                    match until {
                        Some(until) => {
                            tokio::time::sleep_until(until.min(Instant::now() + pause)).await;
                        }
                        None => tokio::time::sleep(pause).await,
                    }
                }
                Err(e) => return Err(e),
            }
        }
        if cancel_at_deadline {
            match self.cancel_within(id, Some(PAST_DEADLINE)).await {
                Ok(()) => {}
                // Answered between the last wait and the cancel: that answer stands.
                Err(e) if e.status() == Some(409) || e.status() == Some(410) => {
                    let view = self.get_interaction_within(id, Some(PAST_DEADLINE)).await?;
                    if let Some(outcome) = final_outcome(WaitResponse {
                        status: view.request.status,
                        response: view.response,
                        approval: view.approval,
                        answered_by: view.request.answered_by,
                    }) && !matches!(outcome, Outcome::Cancelled)
                    {
                        return Ok(outcome);
                    }
                }
                Err(_) => {}
            }
        }
        Ok(Outcome::TimedOut {
            waited: started.elapsed(),
        })
    }
}

/// How long a request may take so that it ends by `until` (and a little);
/// `None` (the usual 60 s) without a deadline.
fn within(until: Option<Instant>) -> Option<Duration> {
    until.map(|u| {
        u.saturating_duration_since(Instant::now())
            .saturating_add(PAST_DEADLINE)
    })
}

fn retryable(e: &Error) -> bool {
    matches!(e, Error::Connect { .. } | Error::Transport { .. }) || e.status() == Some(503)
}

/// The outcome a wait answer means, `None` while pending.
pub fn final_outcome(w: WaitResponse) -> Option<Outcome> {
    match w.status {
        InteractionStatus::Pending => None,
        InteractionStatus::Answered => Some(match w.response {
            Some(response) => Outcome::Answered {
                response,
                approval: w.approval,
                answered_by: w.answered_by,
            },
            // A server that says answered must say what: treat its silence as
            // nothing decided rather than guessing a grant.
            None => Outcome::Cancelled,
        }),
        InteractionStatus::Expired => Some(Outcome::Expired),
        InteractionStatus::Cancelled => Some(Outcome::Cancelled),
    }
}
