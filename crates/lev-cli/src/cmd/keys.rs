//! `lev keys`: the server's signing keys (list, `rotate`, `remove KID`,
//! through the admin API), and `generate`, which writes a new key file.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, anyhow};
use lev_approval::SigningKeyPair;
use lev_protocol::api::Jwks;

use crate::connect::{ClientArgs, runtime};
use crate::report::HINT;

/// `lev keys ...`: without a subcommand, the server's trusted keys, the one
/// that signs first.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// Print the JWKS as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// The server's trusted public keys (GET /v1/keys), the one that signs
    /// first (the default).
    #[command(alias = "list")]
    Ls {
        /// Print the JWKS as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Make a new signing key on the server (admin). Older keys stay
    /// trusted, so approvals they signed still verify, until removed.
    Rotate {
        /// Print the JWKS after as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Stop trusting an old key (admin): approvals it signed no longer
    /// verify. The key that signs is refused: rotate first.
    Remove {
        /// The key id (16 hex digits, as `lev keys` lists them).
        kid: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Write a new Ed25519 signing key to FILE (mode 0600) and print its public
    /// key (base64url) and key id.
    Generate(GenerateArgs),
    /// Write a new key-encryption key to FILE (32 random bytes, base64, mode
    /// 0600), for `lev serve --key-encryption-key-file FILE`: the servers
    /// store their signing keys sealed with it.
    Kek(GenerateArgs),
}

#[derive(Debug, clap::Args)]
struct GenerateArgs {
    /// Where to write the key (mode 0600).
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
        None => list(&args.client, args.json),
        Some(Command::Ls { json, client }) => list(&client, json),
        Some(Command::Rotate { json, client }) => {
            let jwks = runtime()?
                .block_on(client.client()?.rotate_key())
                .context("rotating the signing key")?;
            if json {
                crate::out::print_json(&jwks)?;
            } else {
                let active = jwks.keys.first().map_or("", |k| k.kid.as_str());
                eprintln!(
                    "lev: new signing key {active}; older keys stay trusted until `lev keys remove KID`"
                );
                print_keys(&jwks);
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Remove { kid, client }) => {
            let jwks = runtime()?
                .block_on(client.client()?.remove_key(&kid))
                .with_context(|| format!("removing key {}", crate::term::one_line(&kid)))?;
            eprintln!(
                "lev: key {} is no longer trusted",
                crate::term::one_line(&kid)
            );
            print_keys(&jwks);
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Generate(args)) => generate(&args),
        Some(Command::Kek(args)) => kek(&args),
    }
}

/// `GET /v1/keys` needs no token.
fn list(client: &ClientArgs, json: bool) -> anyhow::Result<ExitCode> {
    let client = client.anonymous_client()?;
    let jwks = runtime()?
        .block_on(client.keys())
        .context("reading the server's keys")?;
    if json {
        crate::out::print_json(&jwks)?;
    } else {
        print_keys(&jwks);
    }
    Ok(ExitCode::SUCCESS)
}

/// One line per key: the id, its role, the public key.
fn print_keys(jwks: &Jwks) {
    for (i, key) in jwks.keys.iter().enumerate() {
        let role = if i == 0 { "signs" } else { "verifies" };
        println!(
            "{}  {role:<8}  {}",
            crate::term::one_line(&key.kid),
            crate::term::one_line(&key.x)
        );
    }
}

fn kek(args: &GenerateArgs) -> anyhow::Result<ExitCode> {
    let text = lev_server::Kek::generate_base64().map_err(|e| anyhow!(e))?;
    write_secret(&args.out, format!("{text}\n").as_bytes(), args.force)
        .with_context(|| format!("writing {}", args.out.display()))?;
    eprintln!(
        "lev: wrote a key-encryption key to {}; give every server the same file \
         (--key-encryption-key-file) and keep a copy: without it the stored signing keys \
         cannot be opened",
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
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
pub(crate) fn write_secret(path: &Path, bytes: &[u8], force: bool) -> anyhow::Result<()> {
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
