//! Which keys a client trusts to sign approvals: `--key` for `lev verify`,
//! and the pin of `lev run` (`--key`, env `LEV_TRUSTED_KEYS`).

use std::path::Path;

use anyhow::{Context as _, anyhow};
use lev_approval::TrustedKeys;

/// The keys `lev run`, `lev hook` and `lev mcp` trust, when pinned.
#[derive(Debug, Clone, clap::Args)]
pub struct TrustArgs {
    /// Trust only this key to sign the approval: a JWKS (or JWK) file, or one
    /// public key in base64url, as `lev verify --key` takes. May be given more
    /// than once (or use a JWKS with several keys). An approval signed by any
    /// other key is refused and nothing runs. Without a pin the keys come
    /// from the server lev talks to (GET /v1/keys): whoever answers at --url
    /// could then sign anything.
    #[arg(
        long = "key",
        env = "LEV_TRUSTED_KEYS",
        value_name = "FILE|KEY",
        allow_hyphen_values = true
    )]
    pub keys: Vec<String>,
}

impl TrustArgs {
    /// The pinned keys, or `None` to take the server's.
    ///
    /// # Errors
    /// A key that cannot be read, parsed or trusted.
    pub fn pinned(&self) -> anyhow::Result<Option<TrustedKeys>> {
        if self.keys.is_empty() {
            return Ok(None);
        }
        load_keys(&self.keys).map(Some)
    }
}

/// Every `--key`: a file (JWKS, JWK, or a key file's public half) when one
/// exists at that path, else the text of one base64url public key.
pub fn load_keys(specs: &[String]) -> anyhow::Result<TrustedKeys> {
    let mut all = TrustedKeys::new();
    for spec in specs {
        let path = Path::new(spec);
        let set = if path.is_file() {
            let text = lev_client::files::read_text(path, lev_client::files::limit::KEYS)
                .context("--key")?;
            TrustedKeys::parse(&text).map_err(|e| anyhow!("--key {}: {e}", path.display()))?
        } else {
            TrustedKeys::parse(spec).map_err(|e| {
                if spec.contains(['/', '\\']) || spec.ends_with(".json") {
                    anyhow!(
                        "--key: expected a key file or a base64url public key, found {spec:?}: no file at that path, and {e}"
                    )
                } else {
                    anyhow!("--key: {e}")
                }
            })?
        };
        for key in set.candidates("") {
            all.insert(*key).map_err(|e| anyhow!("--key: {e}"))?;
        }
    }
    Ok(all)
}
