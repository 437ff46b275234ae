//! Which store backend a server runs on: `store::open` reads `--database`
//! (a URL) and the data dir, and hands back the one `Arc<dyn Store>` the
//! domain modules use. Nothing else in the server names a backend.

use std::path::Path;
use std::sync::Arc;

use lev_store::Store;
use lev_store_postgres::PostgresStore;
use lev_store_sqlite::SqliteStore;

/// Open the store: SQLite in `data_dir` when `database` is unset, else
/// PostgreSQL at the URL (migrated first, under an advisory lock).
///
/// # Errors
/// A URL of an unknown kind, or a store that cannot be opened (the message
/// names the cause; for PostgreSQL, the host too).
pub async fn open(database: Option<&str>, data_dir: &Path) -> Result<Arc<dyn Store>, String> {
    match database {
        None => {
            let dir = data_dir.to_owned();
            let store = tokio::task::spawn_blocking(move || SqliteStore::open(&dir))
                .await
                .map_err(|e| format!("opening the SQLite store: {e}"))?
                .map_err(|e| e.to_string())?;
            Ok(Arc::new(store))
        }
        Some(url) => {
            check_url(url)?;
            let store = PostgresStore::connect(url)
                .await
                .map_err(|e| format!("--database: {}", plain(e)))?;
            Ok(Arc::new(store))
        }
    }
}

/// A store error's message without the variant's prefix, where the
/// message says it all (the PostgreSQL backend's name the host and cause).
fn plain(e: lev_store::StoreError) -> String {
    match e {
        lev_store::StoreError::Database(m) | lev_store::StoreError::Unavailable(m) => m,
        other => other.to_string(),
    }
}

/// Whether `url` names PostgreSQL.
#[must_use]
pub fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// Check a `--database` URL before any state is made.
///
/// # Errors
/// A URL lev has no backend for.
pub fn check_url(url: &str) -> Result<(), String> {
    if is_postgres(url) {
        Ok(())
    } else {
        Err(format!(
            "--database: expected a postgres:// URL, found {url:?}\nhint: leave it unset to use \
             SQLite in the data dir"
        ))
    }
}

/// The PostgreSQL database at `url`'s activity (`lev bench`): committed
/// transactions so far, and the processes that serve it.
///
/// # Errors
/// A URL that is not PostgreSQL's, or does not connect.
pub async fn activity(url: &str) -> Result<lev_store_postgres::Activity, String> {
    check_url(url)?;
    lev_store_postgres::activity(url)
        .await
        .map_err(|e| format!("--database: {}", plain(e)))
}

/// Run the migrations of the PostgreSQL database at `url` alone (`lev
/// migrate`), under the same advisory lock servers take at start; returns
/// what was done, for people.
///
/// # Errors
/// A URL that is not PostgreSQL's, does not connect (the message names the
/// host and the cause), or holds a schema newer than this build.
pub async fn migrate(url: &str) -> Result<String, String> {
    check_url(url)?;
    let report = lev_store_postgres::migrate(url)
        .await
        .map_err(|e| format!("--database: {}", plain(e)))?;
    Ok(if report.applied.is_empty() {
        format!("the schema is up to date (version {})", report.version)
    } else {
        let applied: Vec<String> = report.applied.iter().map(ToString::to_string).collect();
        format!(
            "applied migration {}: the schema is at version {}",
            applied.join(", "),
            report.version
        )
    })
}
