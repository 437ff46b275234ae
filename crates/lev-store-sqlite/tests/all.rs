//! lev-store-sqlite against real SQLite files: the store contract's
//! conformance suite, and what is particular to SQLite.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test that cannot unwrap has failed

mod all {
    mod conformance;
    mod sqlite;
}
