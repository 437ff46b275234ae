//! The store contract's conformance suite, on a fresh database per case,
//! with two handles at once where a case races (two servers).

use std::sync::Arc;

use async_trait::async_trait;
use lev_store::Store;
use lev_store::conformance::Backend;
use lev_store_postgres::{Options, PostgresStore};

use super::db::TestDb;

struct Postgres(TestDb);

#[async_trait]
impl Backend for Postgres {
    async fn open(&self) -> Arc<dyn Store> {
        let options = Options {
            max_connections: 8,
            ..Options::default()
        };
        Arc::new(
            PostgresStore::connect_with(&self.0.url, options)
                .await
                .unwrap(),
        )
    }

    fn many_handles(&self) -> bool {
        true
    }
}

async fn backend() -> Postgres {
    Postgres(TestDb::new().await)
}

lev_store::conformance_suite!(backend);
