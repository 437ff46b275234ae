//! `lev key`: the person's own signing key (SPEC section 13). `lev key init`
//! makes an Ed25519 key in the person's config dir (mode 0600) and registers
//! its public half under the name of their token; `lev respond` then signs
//! each vote with it, so that what they approved can be checked offline
//! against keys the server never held.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use lev_approval::SigningKeyPair;
use lev_protocol::api::PeopleJwks;

use crate::connect::{ClientArgs, runtime};
use crate::report::HINT;
use crate::term;

/// `lev key` flags.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  lev key init                    make your key (once) and register it with your token\n  lev key ls                      every person's registered keys\n  lev key revoke person:alice:1   stop a key counting"
)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Make your signing key, if you have none yet, and register its public
    /// half on the server under your token's name. Run it again on another
    /// server to register the same key there.
    Init {
        #[command(flatten)]
        key: KeyFile,
        /// Print the registered key as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Every person's registered keys (GET /v1/people/keys, no token).
    Ls {
        /// Print the JWKS.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Stop a key counting: your own, or anyone's with an admin token.
    Revoke {
        /// The key id, person:NAME:N.
        kid: String,
        #[command(flatten)]
        client: ClientArgs,
    },
}

/// Where a person's key lives.
#[derive(Debug, Clone, clap::Args)]
pub struct KeyFile {
    /// Your signing key file [default: $XDG_CONFIG_HOME/lev/person-key.json,
    /// else ~/.config/lev/person-key.json].
    #[arg(long, env = "LEV_PERSON_KEY", value_name = "FILE")]
    pub person_key: Option<PathBuf>,
}

impl KeyFile {
    /// The file's path.
    ///
    /// # Errors
    /// Without `--person-key`, when neither `XDG_CONFIG_HOME` nor `HOME` is set.
    pub fn path(&self) -> anyhow::Result<PathBuf> {
        if let Some(p) = &self.person_key {
            return Ok(p.clone());
        }
        let dir = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
            Some(xdg) => PathBuf::from(xdg).join("lev"),
            None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
                Some(home) => PathBuf::from(home).join(".config/lev"),
                None => bail!(
                    "no config dir: expected HOME or XDG_CONFIG_HOME to be set, found neither{HINT}give the key file with --person-key or LEV_PERSON_KEY"
                ),
            },
        };
        Ok(dir.join("person-key.json"))
    }

    /// The key, when the file exists.
    ///
    /// # Errors
    /// A file that cannot be read, is not a key, or that others may read.
    pub fn load(&self) -> anyhow::Result<Option<(PathBuf, SigningKeyPair)>> {
        let path = self.path()?;
        let text = match lev_client::files::read_text(&path, lev_client::files::limit::SECRET) {
            Ok(text) => text,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e).context("reading your signing key"),
        };
        check_private(&path)?;
        let key = SigningKeyPair::from_private_jwk(&text)
            .with_context(|| format!("{}: not a signing key", path.display()))?;
        Ok(Some((path, key)))
    }
}

#[cfg(unix)]
fn check_private(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(path)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "{}: mode {mode:04o} lets others read your signing key{HINT}chmod 600 {}",
            path.display(),
            path.display()
        );
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_private(_path: &Path) -> anyhow::Result<()> {
    Ok(())
}

/// Make a new key file (mode 0600, its directory 0700).
fn create(path: &Path) -> anyhow::Result<SigningKeyPair> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        make_private_dir(dir).with_context(|| format!("making {}", dir.display()))?;
    }
    let key = SigningKeyPair::generate()?;
    super::keys::write_secret(path, key.to_private_jwk().as_bytes(), false)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(key)
}

#[cfg(unix)]
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// The kid and person under which `key` is registered in `people`, if it is.
pub fn registered<'a>(people: &'a PeopleJwks, key: &SigningKeyPair) -> Option<(&'a str, &'a str)> {
    let x = key.public_base64url();
    people
        .keys
        .iter()
        .filter(|k| k.rp_id.is_none() && k.kty == "OKP")
        .find(|k| k.x.trim_end_matches('=') == x)
        .and_then(|k| {
            lev_approval::votes::parse_person_kid(&k.kid)
                .map(|(person, _)| (k.kid.as_str(), person))
        })
}

/// Where the server's `vote_binding` of `view` differs from the call the
/// view shows (the tool, the exact args, the conversation, the caller, the
/// sandbox mode): a server that binds the vote to another call than the one
/// the person reads gets no signature.
pub fn binding_mismatch(view: &lev_protocol::api::InteractionView) -> Option<String> {
    let request = &view.request.request;
    let binding = request.vote_binding.as_ref()?;
    let lev_protocol::InteractionKind::ToolApproval {
        tool_name,
        args_json,
        sandbox_mode,
        ..
    } = &request.kind
    else {
        return Some("it is not a tool approval".to_owned());
    };
    let shown = [
        ("tool", tool_name.as_str(), binding.tool_name.as_str()),
        (
            "conversation",
            request.conversation_id.as_deref().unwrap_or_default(),
            binding.conversation_id.as_str(),
        ),
        (
            "caller",
            request.caller.as_deref().unwrap_or_default(),
            binding.caller.as_str(),
        ),
        (
            "sandbox mode",
            sandbox_mode.as_str(),
            binding.sandbox_mode.as_str(),
        ),
    ];
    if let Some((what, ..)) = shown.iter().find(|(_, a, b)| a != b) {
        return Some(format!("another {what}"));
    }
    (lev_approval::sha256_hex(args_json.as_bytes()) != binding.args_sha256)
        .then(|| "other args".to_owned())
}

/// Sign `response`, a decision on the tool approval `view`, as the vote of
/// the person `key` is registered to on this server (its `vote_binding`,
/// the decision, the scope and the args to run): the kid it was signed with.
///
/// # Errors
/// An interaction stored before votes could be signed, a key that is not
/// registered on this server, the server unreachable.
pub async fn sign_vote(
    client: &lev_client::Client,
    view: &lev_protocol::api::InteractionView,
    response: &mut lev_protocol::InteractionResponse,
    path: &Path,
    key: &SigningKeyPair,
) -> anyhow::Result<String> {
    let id = term::one_line(view.request.id());
    let Some(binding) = &view.request.request.vote_binding else {
        bail!(
            "{id}: this interaction was stored before votes could be signed{HINT}vote without your key (lev respond --unsigned)"
        );
    };
    if let Some(mismatch) = binding_mismatch(view) {
        bail!(
            "{id}: the server's vote binding is not the call it shows ({mismatch}); lev will not sign a vote for a call you were not shown"
        );
    }
    let people = client
        .people_keys()
        .await
        .context("reading people's keys to find yours")?;
    let Some((kid, person)) = registered(&people, key) else {
        bail!(
            "{id}: your key ({}) is not registered on {}{HINT}run `lev key init` with your token (or vote with lev respond --unsigned)",
            path.display(),
            client.base_url()
        );
    };
    let approved = response.approved == Some(true);
    let scope = response.scope.unwrap_or_default().as_str();
    let edit = response.modified_args_json.clone().unwrap_or_default();
    let payload = lev_approval::VotePayload::for_call(
        binding,
        approved,
        scope,
        &edit,
        person,
        time::OffsetDateTime::now_utc(),
    );
    response.vote = Some(lev_approval::sign_vote(&payload, key, kid).context("signing your vote")?);
    Ok(kid.to_owned())
}

/// Run `lev key`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Init { key, json, client } => {
            let (path, pair, made) = match key.load()? {
                Some((path, pair)) => (path, pair, false),
                None => {
                    let path = key.path()?;
                    let pair = create(&path)?;
                    (path, pair, true)
                }
            };
            let client = client.client()?;
            let jwk = lev_approval::votes::ed25519_jwk(pair.verifying_key().as_bytes());
            let done = runtime()?
                .block_on(client.register_person_key(&jwk))
                .with_context(|| {
                    format!(
                        "registering your key{}",
                        if made {
                            format!(" (made now, kept at {})", path.display())
                        } else {
                            String::new()
                        }
                    )
                })?;
            if json {
                crate::out::print_json(&done)?;
            } else {
                println!(
                    "{} your key as {} for {} ({}); lev respond signs your votes with it",
                    if made {
                        "made and registered"
                    } else {
                        "registered"
                    },
                    term::one_line(&done.key.kid),
                    term::one_line(&done.person),
                    path.display()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Ls { json, client } => {
            let people = runtime()?
                .block_on(client.anonymous_client()?.people_keys())
                .context("reading people's keys")?;
            if json {
                crate::out::print_json(&people)?;
            } else if people.keys.is_empty() {
                println!(
                    "no person has registered a key (lev key init, or a passkey in the dashboard)"
                );
            } else {
                for k in &people.keys {
                    let what = match (&k.rp_id, k.alg.as_deref()) {
                        (Some(rp), alg) => {
                            format!("passkey {} for {rp}", alg.unwrap_or("?"))
                        }
                        (None, _) => "key (lev key init)".to_owned(),
                    };
                    println!("{}  {}", term::one_line(&k.kid), term::one_line(&what));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Revoke { kid, client } => {
            runtime()?
                .block_on(client.client()?.revoke_person_key(&kid))
                .with_context(|| format!("revoking {}", term::one_line(&kid)))?;
            println!(
                "revoked {}: votes it signs no longer count",
                term::one_line(&kid)
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::binding_mismatch;

    /// A tool approval as `GET /v1/interactions/{id}` shows it, with the
    /// server's binding.
    fn view(binding: Value) -> lev_protocol::api::InteractionView {
        let args = r#"{"env":"staging"}"#;
        serde_json::from_value(json!({
            "request": {
                "id": "i1", "session_id": "s", "conversation_id": "c", "caller": "alice",
                "kind": {"type": "tool_approval", "tool_name": "deploy", "args_json": args,
                         "sandbox_mode": "workspace-write"},
                "vote_binding": binding,
                "status": "pending", "created_at": "2026-12-02T00:00:00Z"
            }
        }))
        .unwrap()
    }

    fn binding() -> Value {
        json!({
            "request_id": "call_1", "tool_name": "deploy",
            "args_sha256": lev_approval::sha256_hex(br#"{"env":"staging"}"#),
            "conversation_id": "c", "caller": "alice", "sandbox_mode": "workspace-write"
        })
    }

    /// A server that shows one call and binds the vote to another gets no
    /// signature from `lev respond` or `lev watch`.
    #[test]
    fn a_vote_is_signed_only_for_the_call_shown() {
        assert_eq!(binding_mismatch(&view(binding())), None);
        for (field, value, says) in [
            ("tool_name", json!("deploy_prod"), "another tool"),
            (
                "args_sha256",
                json!(lev_approval::sha256_hex(br#"{"env":"production"}"#)),
                "other args",
            ),
            ("conversation_id", json!("other"), "another conversation"),
            ("caller", json!("mallory"), "another caller"),
            (
                "sandbox_mode",
                json!("danger-full-access"),
                "another sandbox mode",
            ),
        ] {
            let mut b = binding();
            b[field] = value;
            assert_eq!(binding_mismatch(&view(b)).as_deref(), Some(says), "{field}");
        }
    }
}
