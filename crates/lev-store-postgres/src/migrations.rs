//! PostgreSQL schema migrations, run under an advisory lock so that several
//! servers starting at once apply each exactly once. Released migrations
//! are never edited: a change is a new migration appended to [`MIGRATIONS`].
//!
//! Times are kept as RFC 3339 text (as SQLite keeps them: exact to the
//! nanosecond) beside integer milliseconds where they are compared; JSON
//! as text, compared as values in Rust; free text that may hold any
//! character (a task's output tail and error) as JSON strings.

use lev_store::{Result, StoreError};
use tokio_postgres::Client;

use crate::sql::pg;

/// The advisory lock key migrations run under (`lev:migrate`).
pub(crate) const MIGRATE_LOCK: i64 = 0x6c65_766d_6967_0001;

/// `(version, SQL)`, applied in order, each in its own transaction.
const MIGRATIONS: &[(i64, &str)] = &[
    (
        1,
        r"
CREATE TABLE interactions (
    seq                   bigserial PRIMARY KEY,
    id                    text NOT NULL UNIQUE,
    session_id            text NOT NULL,
    request_json          text NOT NULL,
    original_request_json text,
    status                text NOT NULL,
    created_at            text NOT NULL,
    expires_at            text,
    expires_at_ms         bigint,
    answered_at           text,
    answered_by           text,
    response_json         text,
    approval_json         text
);
CREATE INDEX interactions_by_status ON interactions (status, seq);
CREATE INDEX interactions_by_session ON interactions (session_id, status, seq);
CREATE INDEX interactions_by_expiry ON interactions (expires_at_ms, id) WHERE status = 'pending';

CREATE TABLE tokens (
    name          text PRIMARY KEY,
    role          text NOT NULL,
    caller        text,
    hash          text NOT NULL UNIQUE,
    created_at    text NOT NULL,
    sessions_json text
);
CREATE INDEX tokens_by_role ON tokens (role);

-- Rows are inserted with seq NULL and numbered after their commit by the
-- sequencer; readers see only numbered rows.
CREATE TABLE events (
    id        bigserial PRIMARY KEY,
    seq       bigint UNIQUE,
    kind      text NOT NULL,
    data_json text NOT NULL
);
CREATE INDEX events_unsequenced ON events (id) WHERE seq IS NULL;

-- Likewise chained (seq, prev_hash, hash) by the sequencer.
CREATE TABLE audit (
    id        bigserial PRIMARY KEY,
    seq       bigint UNIQUE,
    at        text NOT NULL,
    action    text NOT NULL,
    actor     text NOT NULL,
    data_json text NOT NULL,
    prev_hash text,
    hash      text
);
CREATE INDEX audit_unchained ON audit (id) WHERE seq IS NULL;

-- Append-only: a row may be chained once, and never changed or removed.
CREATE FUNCTION lev_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE'
       AND OLD.seq IS NULL AND NEW.seq IS NOT NULL
       AND NEW.prev_hash IS NOT NULL AND NEW.hash IS NOT NULL
       AND NEW.id = OLD.id AND NEW.at = OLD.at AND NEW.action = OLD.action
       AND NEW.actor = OLD.actor AND NEW.data_json = OLD.data_json THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'the audit log is append-only';
END
$$;
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON audit
    FOR EACH ROW EXECUTE FUNCTION lev_audit_append_only();
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
    FOR EACH STATEMENT EXECUTE FUNCTION lev_audit_append_only();

-- put_blob keeps the bytes; a row of blobs (written by the winning answer
-- whose parts name it) makes them servable.
CREATE TABLE blob_data (
    sha256 text PRIMARY KEY,
    bytes  bytea NOT NULL
);
CREATE TABLE blobs (
    sha256     text PRIMARY KEY,
    media_type text NOT NULL,
    size       bigint NOT NULL
);

CREATE TABLE gate_calls (
    seq            bigserial PRIMARY KEY,
    session_id     text NOT NULL,
    request_id     text NOT NULL,
    call_json      text NOT NULL,
    decision_json  text NOT NULL,
    interaction_id text,
    created_at     text NOT NULL,
    UNIQUE (session_id, request_id)
);
CREATE INDEX gate_calls_by_interaction ON gate_calls (interaction_id)
    WHERE interaction_id IS NOT NULL;

CREATE TABLE grants (
    seq             bigserial PRIMARY KEY,
    id              text NOT NULL UNIQUE,
    scope           text NOT NULL,
    caller          text NOT NULL,
    conversation_id text,
    sandbox_mode    text NOT NULL,
    tool_name       text NOT NULL,
    covered_json    text NOT NULL,
    grant_args_json text,
    approver        text NOT NULL,
    interaction_id  text,
    created_at      text NOT NULL,
    revoked_at      text,
    revoked_by      text
);
CREATE INDEX grants_in_force ON grants (caller, tool_name, sandbox_mode)
    WHERE revoked_at IS NULL;

CREATE TABLE nonces (
    nonce    text PRIMARY KEY,
    spent_at text NOT NULL,
    spent_by text NOT NULL
);

CREATE TABLE tasks (
    seq              bigserial PRIMARY KEY,
    id               text NOT NULL UNIQUE,
    session_id       text NOT NULL,
    status           text NOT NULL,
    spawn_json       text NOT NULL,
    token_hash       text NOT NULL UNIQUE,
    caller           text,
    last_result_json text,
    output_tail_json text,
    error_json       text,
    result_json      text,
    created_at       text NOT NULL,
    updated_at       text NOT NULL
);
CREATE INDEX tasks_by_session ON tasks (session_id, seq);
CREATE INDEX tasks_by_status ON tasks (status, seq);

-- Exactly one active key once any is stored.
CREATE TABLE signing_keys (
    kid      text PRIMARY KEY,
    material text NOT NULL,
    active   boolean NOT NULL DEFAULT false
);
CREATE UNIQUE INDEX signing_keys_one_active ON signing_keys ((true)) WHERE active;

CREATE TABLE dashboard_sessions (
    id_hash       text PRIMARY KEY,
    token_hash    text NOT NULL,
    csrf          text NOT NULL,
    created_at    text NOT NULL,
    created_at_ms bigint NOT NULL,
    last_seen     text NOT NULL,
    last_seen_ms  bigint NOT NULL
);
CREATE INDEX dashboard_sessions_by_last_seen ON dashboard_sessions (last_seen_ms);
",
    ),
    (
        2,
        // The operators' relay: messages waiting for a session's operator and
        // their replies (kept an hour after they are resolved, to tell a late
        // reply from a made-up one), and where each session's operator is.
        r"
CREATE TABLE operator_requests (
    req_id       text PRIMARY KEY,
    session_id   text NOT NULL,
    reply_type   text NOT NULL,
    frame        text NOT NULL,
    posted_at    text NOT NULL,
    posted_ms    bigint NOT NULL,
    state        text NOT NULL CHECK (state IN ('pending', 'replied', 'withdrawn')),
    reply_json   text,
    replied_by   text,
    resolved_ms  bigint
);
CREATE INDEX operator_requests_pending ON operator_requests (session_id, posted_ms)
    WHERE state = 'pending';
CREATE INDEX operator_requests_resolved ON operator_requests (resolved_ms)
    WHERE state <> 'pending';
CREATE TABLE operator_presence (
    session_id text PRIMARY KEY,
    conn       text,
    operator   text NOT NULL,
    since      text NOT NULL
);
",
    ),
    (
        3,
        // Webhook endpoints, their outbox (a delivery per event and endpoint,
        // written with the event), every attempt, what an endpoint made of an
        // interaction (a Slack message), and the reminders already sent.
        r"
CREATE TABLE webhooks (
    seq             bigserial PRIMARY KEY,
    id              text NOT NULL UNIQUE,
    kind            text NOT NULL,
    url             text NOT NULL,
    events          text NOT NULL,
    secret          text NOT NULL,
    created_by      text NOT NULL,
    created_at      text NOT NULL,
    disabled_at     text,
    disabled_reason text
);
CREATE TABLE webhook_deliveries (
    seq             bigserial PRIMARY KEY,
    id              text NOT NULL UNIQUE,
    endpoint_id     text NOT NULL,
    event_id        bigint NOT NULL,
    event_kind      text NOT NULL,
    body            text NOT NULL,
    state           text NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        integer NOT NULL DEFAULT 0,
    created_at      text NOT NULL,
    created_at_ms   bigint NOT NULL,
    next_attempt_ms bigint,
    lease_until_ms  bigint
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_ms) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id, seq);
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (created_at_ms)
    WHERE state <> 'pending';
CREATE TABLE webhook_attempts (
    delivery_id text NOT NULL,
    n           integer NOT NULL,
    at          text NOT NULL,
    status      integer,
    error       text,
    duration_ms bigint NOT NULL,
    PRIMARY KEY (delivery_id, n)
);
CREATE TABLE message_refs (
    endpoint_id    text NOT NULL,
    interaction_id text NOT NULL,
    message_ref    text NOT NULL,
    PRIMARY KEY (endpoint_id, interaction_id)
);
CREATE TABLE reminders (
    interaction_id text NOT NULL,
    n              integer NOT NULL,
    at             text NOT NULL,
    PRIMARY KEY (interaction_id, n)
);
",
    ),
    (
        4,
        // Quorum (SPEC section 13): the votes cast on a tool approval, in
        // order, and the public keys people sign their votes with. A key's
        // row stays when it is revoked (with its token).
        r"
ALTER TABLE interactions ADD COLUMN votes_json text;
CREATE TABLE people_keys (
    kid         text PRIMARY KEY,
    person      text NOT NULL,
    n           integer NOT NULL,
    fingerprint text NOT NULL,
    jwk_json    text NOT NULL,
    created_at  text NOT NULL,
    revoked_at  text,
    revoked_by  text,
    UNIQUE (person, n)
);
CREATE INDEX people_keys_in_force ON people_keys (person) WHERE revoked_at IS NULL;
CREATE INDEX people_keys_by_fingerprint ON people_keys (fingerprint) WHERE revoked_at IS NULL;
",
    ),
    (
        5,
        // Whose approval each nonce is (the session and caller it names), so
        // that only a worker covering them spends it; every signing key id
        // the server ever had, so that none becomes a person's key (those
        // removed before this migration, from the audit log); and a key's
        // rows, revoked ones included, by fingerprint: a key belongs to one
        // person for ever.
        r"
CREATE TABLE nonce_owners (
    nonce      text PRIMARY KEY,
    session_id text NOT NULL,
    caller     text NOT NULL
);
CREATE TABLE signing_kids (
    kid text PRIMARY KEY
);
INSERT INTO signing_kids (kid)
    SELECT k FROM (
        SELECT data_json::json ->> 'kid' AS k
        FROM audit WHERE action IN ('key.rotated', 'key.removed')
        UNION
        SELECT data_json::json ->> 'previous'
        FROM audit WHERE action = 'key.rotated'
    ) AS seen WHERE k IS NOT NULL
    ON CONFLICT (kid) DO NOTHING;
CREATE INDEX people_keys_by_fingerprint_all ON people_keys (fingerprint);
",
    ),
    (
        6,
        // Every process keeps the tokens it looked up and the signing keys
        // it signs with: a change of either, by any writer (lev or a
        // person at psql), is notified to every process when it commits.
        // `lev_tokens` carries the changed token's hash (empty: any token).
        r"
CREATE FUNCTION lev_token_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('lev_tokens', '');
    ELSE
        PERFORM pg_notify('lev_tokens', OLD.hash);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER tokens_changed AFTER UPDATE OR DELETE ON tokens
    FOR EACH ROW EXECUTE FUNCTION lev_token_changed();
CREATE TRIGGER tokens_truncated AFTER TRUNCATE ON tokens
    FOR EACH STATEMENT EXECUTE FUNCTION lev_token_changed();
CREATE FUNCTION lev_keys_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('lev_keys', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER signing_keys_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON signing_keys FOR EACH STATEMENT EXECUTE FUNCTION lev_keys_changed();
",
    ),
    (
        7,
        // Events get their seq, and audit entries their link in the chain,
        // in the transaction that writes them (`lev_append`, called last
        // before the commit): the row of `lev_heads` it locks orders the
        // writers' tails, so rows become visible in seq order. Rows an
        // earlier version left unsequenced are sequenced here first, as its
        // sequencer would have; then seq, prev_hash and hash are required,
        // so a server of an earlier version cannot write beside this one.
        r#"
LOCK TABLE events, audit IN EXCLUSIVE MODE;

CREATE FUNCTION lev_audit_hash(seq bigint, at text, action text, actor text, data_json text,
                               prev text) RETURNS text LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT encode(sha256(convert_to(
        '{"seq":' || seq::text || ',"at":' || to_json(at)::text
        || ',"action":' || to_json(action)::text || ',"actor":' || to_json(actor)::text
        || ',"data":' || data_json || ',"prev_hash":' || to_json(prev)::text || '}',
        'UTF8')), 'hex')
$$;

CREATE TABLE lev_heads (
    id         int PRIMARY KEY CHECK (id = 1),
    event_seq  bigint NOT NULL,
    audit_seq  bigint NOT NULL,
    audit_hash text NOT NULL
);

DO $$
DECLARE
    top bigint;
    s bigint;
    h text;
    r record;
BEGIN
    SELECT COALESCE(MAX(seq), 0) INTO top FROM events;
    UPDATE events SET seq = top + todo.n
        FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM events WHERE seq IS NULL) AS todo
        WHERE events.id = todo.id;
    SELECT a.seq, a.hash INTO s, h FROM audit a WHERE a.seq IS NOT NULL ORDER BY a.seq DESC LIMIT 1;
    IF s IS NULL THEN
        s := 0;
        h := repeat('0', 64);
    END IF;
    FOR r IN SELECT id, at, action, actor, data_json FROM audit WHERE seq IS NULL ORDER BY id LOOP
        s := s + 1;
        UPDATE audit SET seq = s, prev_hash = h,
               hash = lev_audit_hash(s, r.at, r.action, r.actor, r.data_json, h)
            WHERE id = r.id RETURNING hash INTO h;
    END LOOP;
    INSERT INTO lev_heads (id, event_seq, audit_seq, audit_hash)
        SELECT 1, COALESCE(MAX(seq), 0), s, h FROM events;
END
$$;

DROP INDEX events_unsequenced;
DROP INDEX audit_unchained;
ALTER TABLE events ALTER COLUMN seq SET NOT NULL;
ALTER TABLE audit ALTER COLUMN seq SET NOT NULL,
    ALTER COLUMN prev_hash SET NOT NULL,
    ALTER COLUMN hash SET NOT NULL;

-- Chained when inserted: never changed or removed.
CREATE OR REPLACE FUNCTION lev_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only';
END
$$;

-- A write transaction's events and audit entries, numbered and chained
-- after the heads (locked until the commit), with the outbox's deliveries
-- and one notification per event (seq, kind and data; the seq alone when
-- that would not fit), in seq order. Returns the greatest event seq, and
-- the last audit entry's seq, previous hash and hash.
CREATE FUNCTION lev_append(kinds text[], datas text[], ats text[], actions text[],
                           actors text[], audit_datas text[], now_text text, now_ms bigint,
                           OUT event_top bigint, OUT audit_top bigint, OUT audit_prev text,
                           OUT audit_last text)
LANGUAGE plpgsql AS $$
DECLARE
    n int := COALESCE(array_length(kinds, 1), 0);
    m int := COALESCE(array_length(actions, 1), 0);
    base bigint;
    payload text;
    delivered bigint;
BEGIN
    SELECT event_seq, audit_seq, audit_hash INTO base, audit_top, audit_last
        FROM lev_heads WHERE id = 1 FOR UPDATE;
    event_top := base + n;
    IF n > 0 THEN
        WITH e AS (INSERT INTO events (seq, kind, data_json)
                   SELECT base + u.o, u.k, u.d
                   FROM unnest(kinds, datas) WITH ORDINALITY AS u(k, d, o)
                   RETURNING id, kind, data_json),
             w AS (INSERT INTO webhook_deliveries (id, endpoint_id, event_id, event_kind,
                       body, state, created_at, created_at_ms, next_attempt_ms)
                   SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), wh.id,
                       e.id, e.kind,
                       '{"type":' || to_json(e.kind)::text || ',"timestamp":'
                           || to_json(now_text)::text || ',"data":' || e.data_json || '}',
                       'pending', now_text, now_ms, now_ms
                   FROM e JOIN webhooks wh ON wh.disabled_at IS NULL
                       AND (wh.events = '' OR strpos(wh.events, ',' || e.kind || ',') > 0)
                   RETURNING 1)
        SELECT (SELECT count(*) FROM w) INTO delivered;
        FOR i IN 1 .. n LOOP
            payload := (base + i)::text || ' ' || kinds[i] || ' ' || datas[i];
            IF octet_length(payload) > 7900 THEN
                payload := (base + i)::text;
            END IF;
            PERFORM pg_notify('lev_events', payload);
        END LOOP;
    END IF;
    FOR i IN 1 .. m LOOP
        audit_top := audit_top + 1;
        audit_prev := audit_last;
        audit_last := lev_audit_hash(audit_top, ats[i], actions[i], actors[i], audit_datas[i],
                                     audit_prev);
        INSERT INTO audit (seq, at, action, actor, data_json, prev_hash, hash)
            VALUES (audit_top, ats[i], actions[i], actors[i], audit_datas[i], audit_prev,
                    audit_last);
    END LOOP;
    UPDATE lev_heads SET event_seq = event_top, audit_seq = audit_top, audit_hash = audit_last
        WHERE id = 1;
END
$$;
"#,
    ),
];

/// The newest schema version this build knows.
#[must_use]
pub fn schema_version() -> i64 {
    MIGRATIONS.iter().map(|(v, _)| *v).max().unwrap_or_default()
}

/// What [`crate::migrate`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrateReport {
    /// The versions applied now, in order (empty when up to date).
    pub applied: Vec<i64>,
    /// The schema version the database has now.
    pub version: i64,
}

/// Bring the database up to the newest schema, under the migration lock
/// (held on this connection until it is released or the connection ends).
pub(crate) async fn run(client: &mut Client) -> Result<MigrateReport> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATE_LOCK])
        .await
        .map_err(pg)?;
    let result = run_locked(client).await;
    let unlock = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATE_LOCK])
        .await
        .map_err(pg);
    let report = result?;
    unlock?;
    Ok(report)
}

async fn run_locked(client: &mut Client) -> Result<MigrateReport> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS lev_schema_migrations (
                 version    bigint PRIMARY KEY,
                 applied_at timestamptz NOT NULL DEFAULT now()
             )",
        )
        .await
        .map_err(pg)?;
    let applied: Vec<i64> = client
        .query("SELECT version FROM lev_schema_migrations", &[])
        .await
        .map_err(pg)?
        .iter()
        .map(|row| crate::sql::col::<i64>(row, 0))
        .collect::<Result<_>>()?;
    // Every migration not yet applied, not only those past the newest.
    if let Some(newer) = applied
        .iter()
        .filter(|v| !MIGRATIONS.iter().any(|(known, _)| known == *v))
        .max()
    {
        return Err(StoreError::Database(format!(
            "the database has schema version {newer}, newer than this lev knows \
             (up to {}): run the lev that wrote it, or a newer one",
            schema_version()
        )));
    }
    let mut todo: Vec<&(i64, &str)> = MIGRATIONS
        .iter()
        .filter(|(v, _)| !applied.contains(v))
        .collect();
    todo.sort_by_key(|(v, _)| *v);
    let mut report = MigrateReport {
        applied: Vec::new(),
        version: applied.iter().copied().max().unwrap_or_default(),
    };
    for (version, sql) in todo {
        let tx = client.transaction().await.map_err(pg)?;
        tx.batch_execute(sql).await.map_err(pg)?;
        tx.execute(
            "INSERT INTO lev_schema_migrations (version) VALUES ($1)",
            &[version],
        )
        .await
        .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        report.applied.push(*version);
        report.version = report.version.max(*version);
    }
    Ok(report)
}
