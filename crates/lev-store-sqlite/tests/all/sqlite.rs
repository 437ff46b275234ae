//! What only the SQLite backend promises: the audit table refuses edits,
//! one process per data dir, a schema newer than the binary is refused, and
//! the key files keep the layout older versions wrote.

use lev_store::AuditStore;
use lev_store_sqlite::SqliteStore;

#[tokio::test]
async fn the_audit_table_is_append_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    store
        .append_audit(lev_store::AuditRecord {
            action: "test".into(),
            actor: "me".into(),
            data: serde_json::json!({}),
        })
        .await
        .unwrap();
    let conn = rusqlite::Connection::open(dir.path().join("lev.db")).unwrap();
    let err = conn
        .execute("UPDATE audit SET actor = 'mallory' WHERE seq = 1", [])
        .unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
    let err = conn.execute("DELETE FROM audit", []).unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
}

#[test]
fn a_second_process_on_the_data_dir_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let first = SqliteStore::open(dir.path()).unwrap();
    let err = SqliteStore::open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("in use by another lev process"), "{err}");
    assert!(err.contains("PostgreSQL"), "{err}");
    drop(first);
    SqliteStore::open(dir.path()).unwrap();
}

#[test]
fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(SqliteStore::open(dir.path()).unwrap());
    let conn = rusqlite::Connection::open(dir.path().join("lev.db")).unwrap();
    conn.execute(
        "INSERT INTO schema_migrations (version, applied_at) VALUES (999, 'later')",
        [],
    )
    .unwrap();
    drop(conn);
    let err = SqliteStore::open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("schema version 999"), "{err}");
}

#[tokio::test]
async fn keys_keep_their_files() {
    use lev_store::KeyStore;
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    store
        .init_signing_key(lev_store::StoredSigningKey {
            kid: "0123456789abcdef".into(),
            material: "{\"jwk\":1}".into(),
            active: false,
        })
        .await
        .unwrap();
    let keys = dir.path().join("keys");
    assert_eq!(
        std::fs::read_to_string(keys.join("active")).unwrap().trim(),
        "0123456789abcdef"
    );
    assert_eq!(
        std::fs::read_to_string(keys.join("0123456789abcdef.json")).unwrap(),
        "{\"jwk\":1}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(keys.join("0123456789abcdef.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "no access for others: {mode:o}");
    }
}

/// Migration 8 notes the signing key ids an older lev rotated out or
/// removed (from the audit log), so none becomes a person's key.
#[tokio::test]
async fn signing_keys_gone_before_migration_8_are_noted_from_the_audit_log() {
    use lev_store::{NewPersonKey, PeopleKeyStore, PersonKeyOutcome};
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    for (action, data) in [
        (
            "key.rotated",
            serde_json::json!({"kid": "1111111111111111", "previous": "2222222222222222"}),
        ),
        (
            "key.removed",
            serde_json::json!({"kid": "3333333333333333"}),
        ),
    ] {
        store
            .append_audit(lev_store::AuditRecord {
                action: action.into(),
                actor: "admin".into(),
                data,
            })
            .await
            .unwrap();
    }
    drop(store);
    // The database as a lev before migration 8 left it.
    let conn = rusqlite::Connection::open(dir.path().join("lev.db")).unwrap();
    conn.execute_batch(
        "DROP TABLE signing_kids; DROP TABLE nonce_owners;
         DROP INDEX people_keys_by_fingerprint_all;
         DELETE FROM schema_migrations WHERE version = 8;",
    )
    .unwrap();
    drop(conn);
    let store = SqliteStore::open(dir.path()).unwrap();
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
                at: time::OffsetDateTime::now_utc(),
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
