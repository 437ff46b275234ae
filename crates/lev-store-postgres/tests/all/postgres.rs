//! What only the PostgreSQL backend promises: migrations that several
//! servers may start at once, a newer schema refused, clear errors for a bad
//! URL and an unreachable server (also at run time, and back by itself), an
//! append-only audit table, and one gapless event order (and one audit
//! chain) when transactions commit out of id order.

use std::net::SocketAddr;
use std::str::FromStr as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lev_approval::audit::{GENESIS_HASH, entry_hash};
use lev_protocol::api::AuditEntry;
use lev_protocol::{Interaction, InteractionKind, InteractionRequest, InteractionStatus};
use lev_store::{
    AuditStore, CreateOutcome, EventStore, InteractionStore, NewInteraction, Store, StoreError,
    TaskStore,
};
use lev_store_postgres::{Options, PostgresStore, migrate, schema_version};
use serde_json::json;
use time::OffsetDateTime;
use tokio_postgres::NoTls;

use super::db::{TestDb, admin_url};

/// A raw connection to `url`, outside the store.
async fn raw(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

fn free_text(id: &str) -> NewInteraction {
    let mut request = InteractionRequest::new(
        "s-1",
        InteractionKind::FreeText {
            prompt: "why?".into(),
        },
    );
    request.id = Some(id.to_owned());
    NewInteraction {
        interaction: Interaction {
            request,
            status: InteractionStatus::Pending,
            created_at: OffsetDateTime::now_utc(),
            expires_at: None,
            answered_at: None,
            answered_by: None,
            votes: Vec::new(),
        },
        max_pending_per_session: 100,
        actor: "worker".into(),
    }
}

/// Check that `entries` are the whole chain: seqs 1, 2, 3..., each hashing
/// the one before.
fn check_chain(entries: &[AuditEntry]) {
    let mut prev = GENESIS_HASH.to_owned();
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1, "seqs are 1, 2, 3...");
        assert_eq!(e.prev_hash, prev, "entry {} follows the one before", e.seq);
        assert_eq!(
            entry_hash(e.seq, &e.at, &e.action, &e.actor, &e.data, &e.prev_hash),
            e.hash,
            "entry {} hashes to its hash",
            e.seq
        );
        prev.clone_from(&e.hash);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_started_at_once_apply_once() {
    let db = TestDb::new().await;
    let (a, b, c, d) = tokio::join!(
        migrate(&db.url),
        migrate(&db.url),
        PostgresStore::connect(&db.url),
        PostgresStore::connect(&db.url),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let (c, d) = (c.unwrap(), d.unwrap());
    assert_eq!(a.version, schema_version());
    assert_eq!(b.version, schema_version());
    assert!(
        a.applied.is_empty() || b.applied.is_empty(),
        "applied twice: {a:?} {b:?}"
    );
    let versions: Vec<i64> = raw(&db.url)
        .await
        .query(
            "SELECT version FROM lev_schema_migrations ORDER BY version",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, (1..=schema_version()).collect::<Vec<_>>());
    // Both servers work on the one schema.
    c.create_interaction(free_text("ir_1")).await.unwrap();
    assert!(d.get_interaction("ir_1").await.unwrap().is_some());
    assert_eq!(c.kind(), "postgres");
    // And again: nothing to do.
    assert!(migrate(&db.url).await.unwrap().applied.is_empty());
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let db = TestDb::new().await;
    migrate(&db.url).await.unwrap();
    raw(&db.url)
        .await
        .execute(
            "INSERT INTO lev_schema_migrations (version) VALUES (999)",
            &[],
        )
        .await
        .unwrap();
    let err = PostgresStore::connect(&db.url)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("schema version 999"), "{err}");
    assert!(
        err.contains(&format!("up to {}", schema_version())),
        "{err}"
    );
    let err = migrate(&db.url).await.unwrap_err().to_string();
    assert!(err.contains("schema version 999"), "{err}");
}

#[tokio::test]
async fn a_bad_url_names_the_host_and_the_cause() {
    let err = PostgresStore::connect("postgres://lev:hunter2@db.example:notaport/lev")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("db.example"), "{err}");
    assert!(err.contains("port"), "the cause: {err}");
    assert!(!err.contains("hunter2"), "no password in messages: {err}");
    let err = migrate("mysql://somewhere/db")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("somewhere"), "{err}");
    assert!(err.contains("postgres://"), "{err}");
}

/// A port nobody listens on.
async fn closed_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    port
}

#[tokio::test]
async fn an_unreachable_server_is_unavailable() {
    let port = closed_port().await;
    let url = format!("postgres://lev:hunter2@127.0.0.1:{port}/lev");
    let err = PostgresStore::connect(&url).await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("127.0.0.1:{port}")),
        "names the host: {text}"
    );
    assert!(
        text.to_lowercase().contains("refused"),
        "names the cause: {text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
    let err = migrate(&url).await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
}

/// A TCP proxy to PostgreSQL that can be cut (every connection closed, no
/// new ones) and restored on the same port.
struct Proxy {
    port: u16,
    target: SocketAddr,
    tasks: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Proxy {
    async fn start(port: u16, target: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let tasks: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let handles = Arc::clone(&tasks);
        let accept = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                let conn = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                handles.lock().unwrap().push(conn.abort_handle());
            }
        });
        tasks.lock().unwrap().push(accept.abort_handle());
        Self {
            port,
            target,
            tasks,
        }
    }

    fn cut(&self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }

    async fn restore(&self) -> Self {
        Self::start(self.port, self.target).await
    }
}

/// The test server's address (host and port of the admin URL).
fn server_addr() -> SocketAddr {
    let config = tokio_postgres::Config::from_str(&admin_url()).unwrap();
    let host = match &config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(host) => host.clone(),
        #[cfg(unix)]
        tokio_postgres::config::Host::Unix(_) => panic!("the tests need a TCP URL"),
    };
    let host = if host == "localhost" {
        "127.0.0.1".to_owned()
    } else {
        host
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}").parse().unwrap()
}

/// `url` with its host and port replaced.
fn via(url: &str, port: u16) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let user = authority
        .rsplit_once('@')
        .map(|(user, _)| format!("{user}@"));
    format!(
        "{scheme}://{}127.0.0.1:{port}/{path}",
        user.unwrap_or_default()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_server_is_unavailable_and_it_comes_back_by_itself() {
    let db = TestDb::new().await;
    let proxy = Proxy::start(0, server_addr()).await;
    let options = Options {
        max_connections: 4,
        wait: Duration::from_secs(2),
    };
    let store = PostgresStore::connect_with(&via(&db.url, proxy.port), options)
        .await
        .unwrap();
    store.create_interaction(free_text("ir_1")).await.unwrap();
    let mut live = store.subscribe();

    proxy.cut();
    let started = std::time::Instant::now();
    for _ in 0..3 {
        let err = store.get_interaction("ir_1").await.unwrap_err();
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains("closed") || text.contains(&format!("127.0.0.1:{}", proxy.port)),
            "{text}"
        );
        let err = store
            .create_interaction(free_text("ir_2"))
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "failed fast enough: {:?}",
        started.elapsed()
    );

    let _restored = proxy.restore().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        match store.get_interaction("ir_1").await {
            Ok(found) => {
                assert!(found.is_some());
                break;
            }
            Err(StoreError::Unavailable(_)) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("not back: {e:?}"),
        }
    }
    // The listener is back too: another server's commit wakes this one.
    let direct = PostgresStore::connect(&db.url).await.unwrap();
    direct.create_interaction(free_text("ir_3")).await.unwrap();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(20), live.recv())
            .await
            .expect("the listener reconnected")
            .unwrap();
        if event.data["request"]["id"] == "ir_3" {
            break;
        }
    }
}

#[tokio::test]
async fn the_audit_table_is_append_only() {
    let db = TestDb::new().await;
    let store = PostgresStore::connect(&db.url).await.unwrap();
    store
        .append_audit(lev_store::AuditRecord {
            action: "test".into(),
            actor: "me".into(),
            data: json!({}),
        })
        .await
        .unwrap();
    let conn = raw(&db.url).await;
    for sql in [
        "UPDATE audit SET actor = 'mallory' WHERE seq = 1",
        "UPDATE audit SET seq = 7 WHERE seq = 1",
        "DELETE FROM audit",
        "TRUNCATE audit",
    ] {
        let err = conn.batch_execute(sql).await.unwrap_err();
        let text = format!("{:?}", err.as_db_error());
        assert!(text.contains("append-only"), "{sql}: {text}");
    }
}

/// A write gets its seq and its audit link in its own transaction, under
/// the heads' row lock held until its commit: a writer that reached
/// `lev_append` first commits first, a later one waits for it, and nobody
/// sees either before it commits. A follower resuming by seq sees every
/// event once, in one order, and the chain verifies. A row without its seq
/// (as an earlier version wrote them) is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_commit_in_seq_order_without_a_second_pass() {
    let db = TestDb::new().await;
    let store = Arc::new(PostgresStore::connect(&db.url).await.unwrap());
    let follower = PostgresStore::connect(&db.url).await.unwrap();
    let mut live = follower.subscribe();
    let early = raw(&db.url).await;
    early
        .batch_execute(
            r#"BEGIN;
               SELECT * FROM lev_append(ARRAY['early'], ARRAY['{"k":"early"}'],
                   ARRAY['2026-12-01T00:00:00Z'], ARRAY['early'], ARRAY['test'], ARRAY['{}'],
                   '2026-12-01T00:00:00Z', 0);"#,
        )
        .await
        .unwrap();
    let writer = Arc::clone(&store);
    let late = tokio::spawn(async move {
        writer
            .append_event("late", json!({"k": "late"}), Some("test"))
            .await
            .unwrap()
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !late.is_finished(),
        "the later writer waits for the earlier"
    );
    assert!(follower.events_after(0, 100).await.unwrap().is_empty());
    assert_eq!(follower.audit_head().await.unwrap().0, 0);
    early.batch_execute("COMMIT").await.unwrap();
    assert_eq!(late.await.unwrap(), 2, "append_event returns its seq");
    let seen: Vec<_> = follower
        .events_after(0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.kind))
        .collect();
    assert_eq!(seen, [(1, "early".to_owned()), (2, "late".to_owned())]);
    let mut streamed = Vec::new();
    while streamed.len() < 2 {
        let event = tokio::time::timeout(Duration::from_secs(10), live.recv())
            .await
            .expect("announced")
            .unwrap();
        streamed.push((event.seq, event.kind));
    }
    assert_eq!(streamed, seen, "the live stream in the same order");
    let audit = follower.audit_after(0, 100).await.unwrap();
    let actions: Vec<_> = audit.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, ["early", "late"]);
    check_chain(&audit);
    assert_eq!(
        follower.audit_head().await.unwrap(),
        (2, audit[1].hash.clone())
    );
    let err = early
        .batch_execute("INSERT INTO events (kind, data_json) VALUES ('orphan', '{}')")
        .await
        .unwrap_err();
    assert!(format!("{err:?}").contains("not-null"), "{err:?}");
}

/// Text that JSON must escape (quotes, backslashes, control characters,
/// non-ASCII) hashes in PostgreSQL (`lev_audit_hash`) exactly as lev's
/// `entry_hash` does; and migration 7 sequences and chains the rows an
/// earlier version left unsequenced (its writer died before its pass), in
/// id order, after those already chained.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migration_7_chains_what_an_earlier_version_left_and_hashes_as_lev_does() {
    let db = TestDb::new().await;
    let store = PostgresStore::connect(&db.url).await.unwrap();
    let tricky = "q\"uo\\te \u{1}\u{8}\u{c}\n\r\t\u{1f} é ✓ \u{1F600} \u{7f} </script>";
    for i in 0..3 {
        store
            .append_audit(lev_store::AuditRecord {
                action: format!("test.{i}"),
                actor: tricky.into(),
                data: json!({"text": tricky, "n": i, "f": 1.5e300, "nested": [{"k": tricky}]}),
            })
            .await
            .unwrap();
    }
    store.append_event("before", json!({}), None).await.unwrap();
    check_chain(&store.audit_after(0, 100).await.unwrap());
    drop(store);
    // The database as a lev before migration 7 left it, with rows whose
    // writer died before its sequencer pass.
    raw(&db.url)
        .await
        .batch_execute(
            r#"DROP FUNCTION lev_append; DROP FUNCTION lev_audit_hash; DROP TABLE lev_heads;
             ALTER TABLE events ALTER COLUMN seq DROP NOT NULL;
             ALTER TABLE audit ALTER COLUMN seq DROP NOT NULL,
                 ALTER COLUMN prev_hash DROP NOT NULL, ALTER COLUMN hash DROP NOT NULL;
             CREATE INDEX events_unsequenced ON events (id) WHERE seq IS NULL;
             CREATE INDEX audit_unchained ON audit (id) WHERE seq IS NULL;
             CREATE OR REPLACE FUNCTION lev_audit_append_only() RETURNS trigger
             LANGUAGE plpgsql AS $$
             BEGIN
                 IF TG_OP = 'UPDATE' AND OLD.seq IS NULL AND NEW.seq IS NOT NULL THEN
                     RETURN NEW;
                 END IF;
                 RAISE EXCEPTION 'the audit log is append-only';
             END
             $$;
             DELETE FROM lev_schema_migrations WHERE version = 7;
             INSERT INTO events (kind, data_json) VALUES ('orphan', '{}');
             INSERT INTO audit (at, action, actor, data_json)
                 VALUES ('2026-12-01T00:00:00Z', 'orphan.1', E'a\"b\u0001', '{}'),
                        ('2026-12-01T00:00:01Z', 'orphan.2', 'test', '{"x":"\u0002é"}');"#,
        )
        .await
        .unwrap();
    assert_eq!(migrate(&db.url).await.unwrap().applied, [7]);
    let store = PostgresStore::connect(&db.url).await.unwrap();
    let events: Vec<_> = store
        .events_after(0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.kind))
        .collect();
    assert_eq!(events, [(1, "before".to_owned()), (2, "orphan".to_owned())]);
    store
        .append_audit(lev_store::AuditRecord {
            action: "after".into(),
            actor: tricky.into(),
            data: json!({"text": tricky}),
        })
        .await
        .unwrap();
    assert_eq!(
        store.append_event("next", json!({}), None).await.unwrap(),
        3
    );
    let audit = store.audit_after(0, 100).await.unwrap();
    let actions: Vec<_> = audit.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(
        actions,
        [
            "test.0", "test.1", "test.2", "orphan.1", "orphan.2", "after"
        ]
    );
    check_chain(&audit);
}

/// Free text that PostgreSQL's `text` cannot hold as is (a NUL) round-trips.
#[tokio::test]
async fn any_text_round_trips() {
    let db = TestDb::new().await;
    let store = PostgresStore::connect(&db.url).await.unwrap();
    let mut new = free_text("ir_nul");
    new.interaction.request.metadata = Some(json!({"text": "a\u{0}b \u{1F600}"}));
    assert!(matches!(
        store.create_interaction(new).await.unwrap(),
        CreateOutcome::Created(_)
    ));
    let view = store.get_interaction("ir_nul").await.unwrap().unwrap();
    assert_eq!(
        view.request.request.metadata.unwrap()["text"],
        "a\u{0}b \u{1F600}"
    );
    let now = OffsetDateTime::now_utc();
    store
        .create_task(lev_store::tasks::NewTask {
            task: lev_protocol::api::Task {
                id: "tk_1".into(),
                session_id: "s-1".into(),
                status: lev_protocol::api::TaskStatus::Pending,
                spawn: json!({}),
                last_result: None,
                output_tail: None,
                error: None,
                caller: None,
                created_at: now,
                updated_at: now,
            },
            token_hash: "h".into(),
            actor: "w".into(),
        })
        .await
        .unwrap();
    store
        .post_task_result(lev_store::tasks::TaskResult {
            task_id: "tk_1".into(),
            last_result: json!("x\u{0}y"),
            output_tail: Some("out\u{0}put".into()),
            actor: "w".into(),
        })
        .await
        .unwrap();
    store
        .finish_task(lev_store::tasks::TaskFinish {
            task_id: "tk_1".into(),
            status: lev_protocol::api::TaskStatus::Failed,
            result: None,
            error: Some("bad\u{0}".into()),
            actor: "w".into(),
        })
        .await
        .unwrap();
    let task = store.get_task("tk_1").await.unwrap().unwrap();
    assert_eq!(task.output_tail.as_deref(), Some("out\u{0}put"));
    assert_eq!(task.error.as_deref(), Some("bad\u{0}"));
    assert_eq!(task.last_result, Some(json!("x\u{0}y")));
}

/// A rough figure, not a gate: create + answer pairs per second from 32
/// concurrent writers on one handle, then on two (two servers). Run with
/// `cargo test --release -p lev-store-postgres --test all throughput --
/// --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand"]
async fn throughput() {
    for handles in [1, 2] {
        let db = TestDb::new().await;
        let mut stores = Vec::new();
        for _ in 0..handles {
            stores.push(Arc::new(
                PostgresStore::connect_with(
                    &db.url,
                    Options {
                        max_connections: 16,
                        ..Options::default()
                    },
                )
                .await
                .unwrap(),
            ));
        }
        let workers = 32;
        let run_for = Duration::from_secs(5);
        let started = std::time::Instant::now();
        let mut tasks = Vec::new();
        for w in 0..workers {
            let store = Arc::clone(&stores[w % handles]);
            tasks.push(tokio::spawn(async move {
                let mut done = 0_u64;
                while started.elapsed() < run_for {
                    let id = format!("ir_{w}_{done}");
                    let mut new = free_text(&id);
                    new.interaction.request.session_id = format!("s-{w}");
                    store.create_interaction(new).await.unwrap();
                    let answer = lev_store::NewAnswer {
                        id: id.clone(),
                        response: lev_protocol::InteractionResponse::text(&id, "ok"),
                        approval: None,
                        answered_by: "bob".into(),
                        answered_at: OffsetDateTime::now_utc(),
                        audit: Default::default(),
                    };
                    store.answer_interaction(answer).await.unwrap();
                    done += 1;
                }
                done
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await.unwrap();
        }
        let secs = started.elapsed().as_secs_f64();
        eprintln!(
            "{handles} handle(s), {workers} writers: {total} create+answer in {secs:.1} s = {:.0}/s",
            total as f64 / secs
        );
        let events = stores[0].last_event_seq().await.unwrap();
        assert_eq!(u64::try_from(events).unwrap(), total * 2);
    }
}

/// A rough figure, not a gate: how long after an answer is given on one
/// handle a subscriber of another hears of it (from the call's start).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand"]
async fn wake_latency() {
    let db = TestDb::new().await;
    let waiter = PostgresStore::connect(&db.url).await.unwrap();
    let answerer = PostgresStore::connect(&db.url).await.unwrap();
    let mut live = waiter.subscribe();
    let mut took = Vec::new();
    for i in 0..300 {
        let id = format!("ir_{i}");
        answerer.create_interaction(free_text(&id)).await.unwrap();
        let answer = lev_store::NewAnswer {
            id: id.clone(),
            response: lev_protocol::InteractionResponse::text(&id, "ok"),
            approval: None,
            answered_by: "bob".into(),
            answered_at: OffsetDateTime::now_utc(),
            audit: Default::default(),
        };
        let started = std::time::Instant::now();
        answerer.answer_interaction(answer).await.unwrap();
        loop {
            let event = live.recv().await.unwrap();
            if event.kind == "interaction.answered" && event.data["request"]["id"] == id.as_str() {
                break;
            }
        }
        took.push(started.elapsed());
    }
    took.sort();
    let at = |q: f64| took[((took.len() as f64 - 1.0) * q) as usize];
    eprintln!(
        "cross-handle wake after an answer: p50 {:?}, p99 {:?}, max {:?}",
        at(0.5),
        at(0.99),
        at(1.0)
    );
}

/// This server's own writes are announced right after their commit, before
/// the write returns: a subscriber that subscribes afterwards is told only of
/// what comes after (as on SQLite), and a local waiter needs no round trip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_write_is_announced_before_it_returns() {
    let db = TestDb::new().await;
    let store = PostgresStore::connect(&db.url).await.unwrap();
    let mut early = store.subscribe();
    for i in 0..20 {
        store
            .create_interaction(free_text(&format!("ir_{i}")))
            .await
            .unwrap();
        let event = early
            .try_recv()
            .expect("announced before the write returned");
        assert_eq!(event.data["request"]["id"], format!("ir_{i}"));
        let mut late = store.subscribe();
        store
            .append_event("test.next", json!({"i": i}), None)
            .await
            .unwrap();
        let event = late.try_recv().unwrap();
        assert_eq!(event.kind, "test.next", "nothing from before it subscribed");
        assert_eq!(early.try_recv().unwrap().seq, event.seq);
    }
}

/// Migration 5 notes the signing key ids an older lev rotated out or
/// removed (from the audit log), so none becomes a person's key.
#[tokio::test]
async fn signing_keys_gone_before_migration_5_are_noted_from_the_audit_log() {
    use lev_store::{AuditRecord, NewPersonKey, PeopleKeyStore, PersonKeyOutcome};
    let db = TestDb::new().await;
    let store = PostgresStore::connect(&db.url).await.unwrap();
    for (action, data) in [
        (
            "key.rotated",
            json!({"kid": "1111111111111111", "previous": "2222222222222222"}),
        ),
        ("key.removed", json!({"kid": "3333333333333333"})),
        ("interaction.created", json!({"text": "\u{0}"})),
    ] {
        store
            .append_audit(AuditRecord {
                action: action.into(),
                actor: "admin".into(),
                data,
            })
            .await
            .unwrap();
    }
    drop(store);
    // The database as a lev before migration 5 left it.
    raw(&db.url)
        .await
        .batch_execute(
            "DROP TABLE signing_kids; DROP TABLE nonce_owners;
             DROP INDEX people_keys_by_fingerprint_all;
             DELETE FROM lev_schema_migrations WHERE version = 5;",
        )
        .await
        .unwrap();
    assert_eq!(migrate(&db.url).await.unwrap().applied, [5]);
    let store = PostgresStore::connect(&db.url).await.unwrap();
    for (i, kid) in ["1111111111111111", "2222222222222222", "3333333333333333"]
        .iter()
        .enumerate()
    {
        let outcome = store
            .add_person_key(NewPersonKey {
                person: format!("p{i}"),
                jwk: lev_approval::votes::ed25519_jwk(&[i as u8 + 1; 32]),
                fingerprint: format!("{kid}{}", "0".repeat(48)),
                max_keys: 4,
                actor: "p".into(),
                at: OffsetDateTime::now_utc(),
            })
            .await
            .unwrap();
        assert_eq!(
            outcome,
            PersonKeyOutcome::SigningKey {
                kid: (*kid).to_owned()
            }
        );
    }
}
