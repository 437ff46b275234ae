//! SQLite schema migrations. Released migrations are never edited: a change
//! is a new migration appended to [`MIGRATIONS`].

use rusqlite::Connection;

use crate::Result;

/// `(version, SQL)`, applied in order, each in its own transaction.
const MIGRATIONS: &[(i64, &str)] = &[
    (
        1,
        r"
CREATE TABLE interactions (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    id            TEXT NOT NULL UNIQUE,
    session_id    TEXT NOT NULL,
    request_json  TEXT NOT NULL,
    status        TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    expires_at    TEXT,
    expires_at_ms INTEGER,
    answered_at   TEXT,
    answered_by   TEXT,
    response_json TEXT,
    approval_json TEXT
);
CREATE INDEX interactions_by_status ON interactions (status, seq);
CREATE INDEX interactions_by_session ON interactions (session_id, status, seq);
CREATE INDEX interactions_by_expiry ON interactions (expires_at_ms) WHERE status = 'pending';

CREATE TABLE tokens (
    name       TEXT PRIMARY KEY,
    role       TEXT NOT NULL,
    caller     TEXT,
    hash       TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL
);

CREATE TABLE events (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    kind      TEXT NOT NULL,
    data_json TEXT NOT NULL
);

CREATE TABLE audit (
    seq       INTEGER PRIMARY KEY,
    at        TEXT NOT NULL,
    action    TEXT NOT NULL,
    actor     TEXT NOT NULL,
    data_json TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash      TEXT NOT NULL
);
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;

CREATE TABLE blobs (
    sha256     TEXT PRIMARY KEY,
    media_type TEXT NOT NULL,
    size       INTEGER NOT NULL
);
",
    ),
    (
        2,
        // The gate (SPEC sections 5 and 6). A gate call is kept for ever: its
        // (session, request id) is the idempotency key. A revoked grant keeps
        // its row. Spent nonces are never pruned: a spent approval is refused
        // for ever. gate_calls keeps rowids: its rows (the signed decision)
        // are large, which WITHOUT ROWID tables handle badly.
        r"
CREATE TABLE gate_calls (
    seq            INTEGER PRIMARY KEY,
    session_id     TEXT NOT NULL,
    request_id     TEXT NOT NULL,
    call_json      TEXT NOT NULL,
    decision_json  TEXT NOT NULL,
    interaction_id TEXT,
    created_at     TEXT NOT NULL,
    UNIQUE (session_id, request_id)
);
CREATE INDEX gate_calls_by_interaction ON gate_calls (interaction_id)
    WHERE interaction_id IS NOT NULL;

CREATE TABLE grants (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    scope           TEXT NOT NULL,
    caller          TEXT NOT NULL,
    conversation_id TEXT,
    sandbox_mode    TEXT NOT NULL,
    tool_name       TEXT NOT NULL,
    covered_json    TEXT NOT NULL,
    grant_args_json TEXT,
    approver        TEXT NOT NULL,
    interaction_id  TEXT,
    created_at      TEXT NOT NULL,
    revoked_at      TEXT,
    revoked_by      TEXT
);
CREATE INDEX grants_in_force ON grants (caller, tool_name, sandbox_mode)
    WHERE revoked_at IS NULL;

CREATE TABLE nonces (
    nonce    TEXT PRIMARY KEY,
    spent_at TEXT NOT NULL,
    spent_by TEXT NOT NULL
) WITHOUT ROWID;
",
    ),
    (
        3,
        // Tasks of the operator's spawns, and the request as created beside an
        // interaction whose metadata later gained an escalation note.
        r"
CREATE TABLE tasks (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    id               TEXT NOT NULL UNIQUE,
    session_id       TEXT NOT NULL,
    status           TEXT NOT NULL,
    spawn_json       TEXT NOT NULL,
    token_hash       TEXT NOT NULL UNIQUE,
    last_result_json TEXT,
    output_tail      TEXT,
    error            TEXT,
    result_json      TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
);
CREATE INDEX tasks_by_session ON tasks (session_id, seq);
CREATE INDEX tasks_by_status ON tasks (status, seq);
ALTER TABLE interactions ADD COLUMN original_request_json TEXT;
",
    ),
    (
        4,
        // Session-scoped tokens (SPEC section 12), and the caller a task was
        // spawned for, so a worker bound to a caller sees only its own tasks.
        r"
ALTER TABLE tokens ADD COLUMN sessions_json TEXT;
ALTER TABLE tasks ADD COLUMN caller TEXT;
",
    ),
    (
        5,
        // Dashboard sessions as a store part (they were in memory): only the
        // cookie's hash is kept.
        r"
CREATE TABLE dashboard_sessions (
    id_hash     TEXT PRIMARY KEY,
    token_hash  TEXT NOT NULL,
    csrf        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    last_seen   TEXT NOT NULL,
    last_seen_ms INTEGER NOT NULL
);
CREATE INDEX dashboard_sessions_by_last_seen ON dashboard_sessions (last_seen_ms);
",
    ),
    (
        6,
        // Webhook endpoints, their outbox (a delivery per event and endpoint,
        // written with the event), every attempt, what an endpoint made of an
        // interaction (a Slack message), and the reminders already sent.
        r"
CREATE TABLE webhooks (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    kind            TEXT NOT NULL,
    url             TEXT NOT NULL,
    events          TEXT NOT NULL,
    secret          TEXT NOT NULL,
    created_by      TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    disabled_at     TEXT,
    disabled_reason TEXT
);
CREATE TABLE webhook_deliveries (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    endpoint_id     TEXT NOT NULL,
    event_seq       INTEGER NOT NULL,
    event_kind      TEXT NOT NULL,
    body            TEXT NOT NULL,
    state           TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    created_at      TEXT NOT NULL,
    created_at_ms   INTEGER NOT NULL,
    next_attempt_ms INTEGER,
    lease_until_ms  INTEGER
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_ms) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id, seq);
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (created_at_ms) WHERE state <> 'pending';
CREATE TABLE webhook_attempts (
    delivery_id TEXT NOT NULL,
    n           INTEGER NOT NULL,
    at          TEXT NOT NULL,
    status      INTEGER,
    error       TEXT,
    duration_ms INTEGER NOT NULL,
    PRIMARY KEY (delivery_id, n)
) WITHOUT ROWID;
CREATE TABLE message_refs (
    endpoint_id    TEXT NOT NULL,
    interaction_id TEXT NOT NULL,
    message_ref    TEXT NOT NULL,
    PRIMARY KEY (endpoint_id, interaction_id)
) WITHOUT ROWID;
CREATE TABLE reminders (
    interaction_id TEXT NOT NULL,
    n              INTEGER NOT NULL,
    at             TEXT NOT NULL,
    PRIMARY KEY (interaction_id, n)
) WITHOUT ROWID;
",
    ),
    (
        7,
        // Quorum (SPEC section 13): the votes cast on a tool approval, in
        // order, and the public keys people sign their votes with. A key's
        // row stays when it is revoked (with its token).
        r"
ALTER TABLE interactions ADD COLUMN votes_json TEXT;
CREATE TABLE people_keys (
    kid         TEXT PRIMARY KEY,
    person      TEXT NOT NULL,
    n           INTEGER NOT NULL,
    fingerprint TEXT NOT NULL,
    jwk_json    TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    revoked_at  TEXT,
    revoked_by  TEXT,
    UNIQUE (person, n)
);
CREATE INDEX people_keys_in_force ON people_keys (person) WHERE revoked_at IS NULL;
CREATE INDEX people_keys_by_fingerprint ON people_keys (fingerprint) WHERE revoked_at IS NULL;
",
    ),
    (
        8,
        // Whose approval each nonce is (the session and caller it names), so
        // that only a worker covering them spends it; every signing key id
        // the server ever had, so that none becomes a person's key (those
        // removed before this migration, from the audit log); and a key's
        // rows, revoked ones included, by fingerprint: a key belongs to one
        // person for ever.
        r"
CREATE TABLE nonce_owners (
    nonce      TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    caller     TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE signing_kids (
    kid TEXT PRIMARY KEY
) WITHOUT ROWID;
INSERT OR IGNORE INTO signing_kids (kid)
    SELECT k FROM (
        SELECT CASE WHEN json_valid(data_json) THEN json_extract(data_json, '$.kid') END AS k
        FROM audit WHERE action IN ('key.rotated', 'key.removed')
        UNION ALL
        SELECT CASE WHEN json_valid(data_json) THEN json_extract(data_json, '$.previous') END
        FROM audit WHERE action = 'key.rotated'
    ) WHERE typeof(k) = 'text';
CREATE INDEX people_keys_by_fingerprint_all ON people_keys (fingerprint);
",
    ),
];

/// Bring the database up to the newest schema.
pub(crate) fn migrate(conn: &mut Connection) -> Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)",
    )?;
    // Every migration not yet applied, not only those past the newest: they
    // are numbered as they are written, and may land out of order.
    let applied: Vec<i64> = {
        let mut stmt = conn.prepare("SELECT version FROM schema_migrations")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    if let Some(newer) = applied
        .iter()
        .filter(|v| !MIGRATIONS.iter().any(|(known, _)| known == *v))
        .max()
    {
        return Err(lev_store::StoreError::Database(format!(
            "the database has schema version {newer}, newer than this lev knows \
             (up to {}): run the lev that wrote it, or a newer one",
            MIGRATIONS.iter().map(|(v, _)| *v).max().unwrap_or_default()
        ))
        .into());
    }
    let mut todo: Vec<&(i64, &str)> = MIGRATIONS
        .iter()
        .filter(|(v, _)| !applied.contains(v))
        .collect();
    todo.sort_by_key(|(v, _)| *v);
    for (version, sql) in todo {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES (?1, datetime('now'))",
            [version],
        )?;
        tx.commit()?;
    }
    Ok(())
}
