//! What only the SQLite backend promises: the audit table refuses edits,
//! one process per data dir, a schema newer than the binary is refused, and
//! the key files keep the layout older versions wrote.

use lev_store::Store;
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
