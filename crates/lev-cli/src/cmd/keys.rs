//! `lev keys`: signing keys. `generate` writes a new key file.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, anyhow};
use lev_approval::SigningKeyPair;

use crate::report::HINT;

/// `lev keys ...`
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Write a new Ed25519 signing key to FILE (mode 0600) and print its public
    /// key (base64url) and key id.
    Generate(GenerateArgs),
}

#[derive(Debug, clap::Args)]
struct GenerateArgs {
    /// Where to write the private key (a JWK).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Replace FILE if it exists.
    #[arg(long)]
    force: bool,
}

/// Run `lev keys ...`.
///
/// # Errors
/// When the key cannot be made or written.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Generate(args) => generate(&args),
    }
}

fn generate(args: &GenerateArgs) -> anyhow::Result<ExitCode> {
    let key = SigningKeyPair::generate().context("making a key")?;
    write_secret(&args.out, key.to_private_jwk().as_bytes(), args.force)
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!("key id:     {}", key.kid());
    println!("public key: {}", key.public_base64url());
    Ok(ExitCode::SUCCESS)
}

/// Write `bytes` to a file that is never readable by others, not even for an
/// instant: it is created with mode 0600. Without `force`, an existing file is
/// left alone; with it, the new file replaces the old one atomically.
fn write_secret(path: &Path, bytes: &[u8], force: bool) -> anyhow::Result<()> {
    if !force {
        return match create_private(path) {
            Ok(mut file) => {
                file.write_all(bytes)?;
                file.sync_all()?;
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(anyhow!(
                "refusing to overwrite an existing file{HINT}pass --force to replace it"
            )),
            Err(e) => Err(e.into()),
        };
    }
    let name = path
        .file_name()
        .ok_or_else(|| anyhow!("expected a file name, found {}", path.display()))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let written = (|| -> std::io::Result<()> {
        let mut file = create_private(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    Ok(written?)
}

#[cfg(unix)]
fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    // The umask can only take bits away; make the mode exactly 0600.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(file)
}

#[cfg(not(unix))]
fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}
