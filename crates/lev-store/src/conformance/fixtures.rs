//! Builders the cases share.

use lev_protocol::api::{Role, Task, TaskStatus, TokenInfo};
use lev_protocol::{
    Interaction, InteractionKind, InteractionRequest, InteractionResponse, InteractionStatus,
};
use serde_json::json;
use time::OffsetDateTime;

use crate::tasks::{NewTask, TaskFinish, TaskResult};
use crate::{
    NewAnswer, NewGrant, NewInteraction, NewVote, Store, TokenRecord, TransitionOutcome,
    VoteOutcome,
};

pub(crate) fn interaction(id: &str, session: &str, kind: InteractionKind) -> Interaction {
    let mut request = InteractionRequest::new(session, kind);
    request.id = Some(id.to_owned());
    Interaction {
        request,
        status: InteractionStatus::Pending,
        created_at: OffsetDateTime::now_utc(),
        expires_at: None,
        answered_at: None,
        answered_by: None,
        votes: Vec::new(),
    }
}

/// `answer` by its `answered_by` as the one vote that decides a tool
/// approval (with its grant), as the server casts a single person's
/// decision: counted against the votes there are now, again when another
/// vote came in meanwhile.
pub(crate) async fn answer_tool_approval(
    store: &dyn Store,
    answer: NewAnswer,
    grant: Option<NewGrant>,
) -> TransitionOutcome {
    loop {
        let seen = store
            .get_interaction(&answer.id)
            .await
            .unwrap()
            .map_or_else(Vec::new, |v| v.request.votes);
        let vote = NewVote {
            id: answer.id.clone(),
            vote: lev_protocol::Vote {
                voter: answer.answered_by.clone(),
                approved: true,
                at: answer.answered_at,
                signed: false,
                response: answer.response.clone(),
                envelope: None,
            },
            seen_votes: seen,
            authority: Default::default(),
            audit: Default::default(),
            decision: Some((answer.clone(), grant.clone())),
        };
        match store.cast_vote(vote).await.unwrap() {
            VoteOutcome::Recorded(view) => return TransitionOutcome::Done(view),
            VoteOutcome::Closed(outcome) => return outcome,
            VoteOutcome::AlreadyVoted(view) => return TransitionOutcome::AlreadyAnswered(view),
            VoteOutcome::Stale(_) => {}
        }
    }
}

pub(crate) fn free_text_in(id: &str, session: &str) -> NewInteraction {
    NewInteraction {
        interaction: interaction(
            id,
            session,
            InteractionKind::FreeText {
                prompt: "why?".into(),
            },
        ),
        max_pending_per_session: 10_000,
        actor: "worker".into(),
    }
}

pub(crate) fn free_text(id: &str) -> NewInteraction {
    free_text_in(id, "s-1")
}

pub(crate) fn tool_approval(id: &str, session: &str) -> NewInteraction {
    NewInteraction {
        interaction: interaction(
            id,
            session,
            InteractionKind::ToolApproval {
                tool_name: "shell".into(),
                args_json: r#"{"argv":["ls"]}"#.into(),
                missing_capabilities: vec!["exec".into()],
                sandbox_mode: "read-only".into(),
                options: vec![],
            },
        ),
        max_pending_per_session: 10_000,
        actor: "worker".into(),
    }
}

pub(crate) fn answer(id: &str, text: &str, by: &str) -> NewAnswer {
    NewAnswer {
        id: id.to_owned(),
        response: InteractionResponse::text(id, text),
        approval: None,
        answered_by: by.to_owned(),
        answered_at: OffsetDateTime::now_utc(),
        audit: Default::default(),
    }
}

pub(crate) fn token(name: &str, role: Role, hash: &str) -> TokenRecord {
    TokenRecord {
        info: TokenInfo {
            name: name.into(),
            role,
            caller: None,
            sessions: None,
            created_at: OffsetDateTime::now_utc(),
        },
        hash: hash.into(),
    }
}

pub(crate) fn task(id: &str, session: &str) -> NewTask {
    let now = OffsetDateTime::now_utc();
    NewTask {
        task: Task {
            id: id.into(),
            session_id: session.into(),
            status: TaskStatus::Pending,
            spawn: json!({"agent": id}),
            last_result: None,
            output_tail: None,
            error: None,
            caller: None,
            created_at: now,
            updated_at: now,
        },
        token_hash: format!("hash-{id}"),
        actor: "worker-1".into(),
    }
}

pub(crate) fn result(id: &str, value: serde_json::Value) -> TaskResult {
    TaskResult {
        task_id: id.into(),
        last_result: json!({"value": value, "ok": true, "error": null}),
        output_tail: Some("tail".into()),
        actor: format!("task:{id}"),
    }
}

pub(crate) fn finish(id: &str, status: TaskStatus) -> TaskFinish {
    TaskFinish {
        task_id: id.into(),
        status,
        result: Some(json!("final")),
        error: None,
        actor: "main-ai".into(),
    }
}

/// Check a run of audit entries chains from `prev` and hashes right;
/// returns the last hash.
pub(crate) fn check_chain(entries: &[lev_protocol::api::AuditEntry], mut prev: String) -> String {
    for e in entries {
        assert_eq!(
            e.prev_hash, prev,
            "entry {} does not follow the one before",
            e.seq
        );
        assert_eq!(
            lev_approval::audit::entry_hash(
                e.seq,
                &e.at,
                &e.action,
                &e.actor,
                &e.data,
                &e.prev_hash
            ),
            e.hash,
            "entry {} does not hash to its hash",
            e.seq
        );
        prev.clone_from(&e.hash);
    }
    prev
}
