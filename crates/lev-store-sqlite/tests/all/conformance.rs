//! The store contract's conformance suite, on a fresh SQLite data dir per case.

use std::sync::Arc;

use async_trait::async_trait;
use lev_store::Store;
use lev_store::conformance::Backend;
use lev_store_sqlite::SqliteStore;

struct Sqlite(tempfile::TempDir);

#[async_trait]
impl Backend for Sqlite {
    async fn open(&self) -> Arc<dyn Store> {
        Arc::new(SqliteStore::open(self.0.path()).unwrap())
    }

    fn many_handles(&self) -> bool {
        false
    }
}

async fn backend() -> Sqlite {
    Sqlite(tempfile::tempdir().unwrap())
}

lev_store::conformance_suite!(backend);
