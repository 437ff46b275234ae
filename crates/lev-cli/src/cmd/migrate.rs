//! `lev migrate`: bring a PostgreSQL database's schema up to this lev's,
//! without starting a server (SPEC section 11). `lev serve --database URL`
//! runs the same migrations at start; this is for a deploy step that
//! migrates first.

use std::process::ExitCode;

use anyhow::anyhow;

use crate::connect::runtime;

/// `lev migrate` flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The postgres:// URL of the database, as `lev serve --database` takes it
    /// (TLS as its sslmode and sslrootcert say).
    // The URL may hold a password: --help does not show its value.
    #[arg(
        long,
        env = "LEV_DATABASE_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub database: String,
}

/// Run `lev migrate`.
///
/// # Errors
/// A URL that is not PostgreSQL's or does not connect, a schema newer than
/// this lev, a migration that fails.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let done = runtime()?
        .block_on(lev_server::migrate_database(&args.database))
        .map_err(|message| anyhow!(message))?;
    println!("lev migrate: {done}");
    Ok(ExitCode::SUCCESS)
}
