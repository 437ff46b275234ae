//! Which store backend a server runs on: `store::open` reads `--database`
//! (a URL) and the data dir, and hands back the one `Arc<dyn Store>` the
//! domain modules use. Nothing else in the server names a backend.

use std::path::Path;
use std::sync::Arc;

use lev_store::Store;
use lev_store_sqlite::SqliteStore;

/// Open the store: SQLite in `data_dir` when `database` is unset.
///
/// # Errors
/// A URL of an unknown or unsupported kind, or a store that cannot be opened
/// (the message names the cause).
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
            Err("--database: PostgreSQL is not supported yet".to_owned())
        }
    }
}

/// Check a `--database` URL before any state is made.
///
/// # Errors
/// A URL lev has no backend for.
pub fn check_url(url: &str) -> Result<(), String> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Err(
            "--database: PostgreSQL is not supported yet; leave --database unset to use SQLite \
             in the data dir"
                .to_owned(),
        )
    } else {
        Err(format!(
            "--database: expected a postgres:// URL, found {url:?}\nhint: leave it unset to use \
             SQLite in the data dir"
        ))
    }
}
