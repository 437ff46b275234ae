//! lev-store against a real SQLite file.

mod all {
    mod sqlite;
}
