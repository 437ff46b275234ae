//! A fresh database per test, dropped (`WITH (FORCE)`) when the test is done.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio_postgres::NoTls;

/// The server the tests use, as an admin URL.
pub fn admin_url() -> String {
    std::env::var("LEV_TEST_POSTGRES_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// `url` with its database replaced by `db`.
pub fn with_db(url: &str, db: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL with a scheme");
    let (rest, query) = match rest.split_once('?') {
        Some((rest, query)) => (rest, format!("?{query}")),
        None => (rest, String::new()),
    };
    let authority = rest.split('/').next().unwrap_or_default();
    format!("{scheme}://{authority}/{db}{query}")
}

/// An admin connection, or a failed test saying how to start PostgreSQL.
pub async fn admin() -> tokio_postgres::Client {
    let url = admin_url();
    let (client, connection) = match tokio_postgres::connect(&url, NoTls).await {
        Ok(c) => c,
        Err(e) => panic!(
            "PostgreSQL is not reachable at {url} ({e}: {}): run `bash scripts/services.sh` \
             (or set LEV_TEST_POSTGRES_URL to a server the tests may create databases on)",
            std::error::Error::source(&e)
                .map(ToString::to_string)
                .unwrap_or_default()
        ),
    };
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// One test's database.
pub struct TestDb {
    pub name: String,
    pub url: String,
}

impl TestDb {
    pub async fn new() -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let name = format!(
            "lev_t_{}_{}_{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        admin()
            .await
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap();
        Self {
            url: with_db(&admin_url(), &name),
            name,
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // Its own thread and runtime: this may run inside a runtime, which
        // cannot block on a future, and the test's runtime may be ending.
        let name = self.name.clone();
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                admin()
                    .await
                    .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await
            })
        })
        .join();
        match dropped {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("could not drop test database {}: {e}", self.name),
            Err(_) => eprintln!("could not drop test database {}", self.name),
        }
    }
}
