//! The server's signing keys in the data dir.
//!
//! `keys/<kid>.json` holds a private JWK (mode 0600), `keys/active` the kid
//! that signs. Both are made on first start. Every key in the directory is
//! listed in the JWKS, so older keys keep verifying after a rotation.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use lev_approval::SigningKeyPair;
use lev_protocol::api::Jwks;

/// The signing key and the public keys to publish.
#[derive(Debug, Clone)]
pub struct KeyRing {
    /// The key that signs approvals and audit heads.
    pub active: SigningKeyPair,
    /// Every key of the directory, the active one first.
    pub jwks: Jwks,
}

/// Why the keys could not be loaded or made.
#[derive(Debug, thiserror::Error)]
pub enum KeyStoreError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A key file does not hold a key.
    #[error("{path}: {message}")]
    Bad {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> KeyStoreError + '_ {
    move |source| KeyStoreError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Write `text` to `path` durably, created with mode 0600 (never readable by
/// others, not even for an instant), replacing any file there.
///
/// # Errors
/// When the file cannot be written.
pub fn write_secret_file(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut f = options.open(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Load the keys of `data_dir/keys`, making a first key when there is none.
///
/// # Errors
/// When the directory cannot be read or written, or a key file is bad.
pub fn load_or_create(data_dir: &Path) -> Result<KeyRing, KeyStoreError> {
    let dir = data_dir.join("keys");
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(io(&dir))?;
    }
    let active_path = dir.join("active");
    let active_kid = match std::fs::read_to_string(&active_path) {
        Ok(text) => Some(text.trim().to_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(&active_path)(e)),
    };
    let active = match active_kid {
        Some(kid) => {
            let path = dir.join(format!("{kid}.json"));
            let text = std::fs::read_to_string(&path).map_err(io(&path))?;
            SigningKeyPair::from_private_jwk(&text).map_err(|e| KeyStoreError::Bad {
                path: path.clone(),
                message: e.to_string(),
            })?
        }
        None => {
            let key = SigningKeyPair::generate().map_err(|e| KeyStoreError::Bad {
                path: dir.clone(),
                message: e.to_string(),
            })?;
            let path = dir.join(format!("{}.json", key.kid()));
            write_secret_file(&path, &key.to_private_jwk()).map_err(io(&path))?;
            write_secret_file(&active_path, &format!("{}\n", key.kid()))
                .map_err(io(&active_path))?;
            key
        }
    };
    let mut jwks = Jwks {
        keys: vec![active.public_jwk()],
    };
    let mut others = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(io(&dir))? {
        let path = entry.map_err(io(&dir))?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(io(&path))?;
        let key = SigningKeyPair::from_private_jwk(&text).map_err(|e| KeyStoreError::Bad {
            path: path.clone(),
            message: e.to_string(),
        })?;
        if key.kid() != active.kid() {
            others.push(key.public_jwk());
        }
    }
    others.sort_by(|a, b| a.kid.cmp(&b.kid));
    jwks.keys.extend(others);
    Ok(KeyRing { active, jwks })
}
