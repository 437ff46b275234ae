//! lev-store-postgres against a real PostgreSQL (`LEV_TEST_POSTGRES_URL`,
//! default `postgres://postgres@127.0.0.1:5432/postgres`; `bash
//! scripts/services.sh` starts it): the store contract's conformance suite
//! with two handles per database (two servers), and what is particular to
//! PostgreSQL, and TLS to it (`tls`, with the server set up to serve a
//! certificate from a CA the test makes: `server_tls`). Each test runs in a
//! database of its own, dropped after it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test that cannot unwrap has failed

mod all {
    mod conformance;
    mod db;
    mod postgres;
    pub mod server_tls;
    mod tls;
}
