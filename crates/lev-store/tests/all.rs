//! lev-store against a real SQLite file.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test that cannot unwrap has failed

mod all {
    mod sqlite;
    mod tasks;
}
