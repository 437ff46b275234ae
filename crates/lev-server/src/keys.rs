//! The server's signing keys in the data dir.
//!
//! `keys/<kid>.json` holds a private JWK (mode 0600), `keys/active` the kid
//! that signs. Both are made on first start. Every key in the directory is
//! listed in the JWKS, so older keys keep verifying after a rotation, until
//! `lev keys remove KID` deletes the file. The active key is never removed.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use lev_approval::SigningKeyPair;
use lev_protocol::api::Jwks;

/// The signing key and the public keys to publish; rotated in place, so
/// every clone sees the change at once.
#[derive(Debug, Clone)]
pub struct KeyRing(Arc<RingInner>);

#[derive(Debug)]
struct RingInner {
    dir: PathBuf,
    loaded: RwLock<Arc<Loaded>>,
    /// Serialises rotations and removals (file changes and reload).
    changing: Mutex<()>,
}

#[derive(Debug)]
struct Loaded {
    active: Arc<SigningKeyPair>,
    jwks: Jwks,
}

/// Outcome of [`KeyRing::remove`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoveOutcome {
    /// The key no longer verifies.
    Removed,
    /// The key signs: rotate first.
    Active,
    /// No such key.
    NotFound,
}

impl KeyRing {
    /// The key that signs approvals and audit heads.
    pub fn active(&self) -> Arc<SigningKeyPair> {
        Arc::clone(&self.current().active)
    }

    /// Every trusted public key, the active one first.
    pub fn jwks(&self) -> Jwks {
        self.current().jwks.clone()
    }

    fn current(&self) -> Arc<Loaded> {
        Arc::clone(&self.0.loaded.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Make a new signing key and make it the active one; older keys stay
    /// trusted. Returns the new and the previous key ids. Blocking file IO.
    ///
    /// # Errors
    /// When a file cannot be written or the directory read back.
    pub fn rotate(&self) -> Result<(String, String), KeyStoreError> {
        let _changing = self
            .0
            .changing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let previous = self.active().kid().to_owned();
        let dir = &self.0.dir;
        let key = SigningKeyPair::generate().map_err(|e| KeyStoreError::Bad {
            path: dir.clone(),
            message: e.to_string(),
        })?;
        let path = dir.join(format!("{}.json", key.kid()));
        write_secret_file(&path, &key.to_private_jwk()).map_err(io(&path))?;
        let active_path = dir.join("active");
        write_secret_file(&active_path, &format!("{}\n", key.kid())).map_err(io(&active_path))?;
        self.reload()?;
        Ok((key.kid().to_owned(), previous))
    }

    /// Stop trusting key `kid`: its file is deleted. The active key is
    /// refused. Blocking file IO.
    ///
    /// # Errors
    /// When the file cannot be removed or the directory read back.
    pub fn remove(&self, kid: &str) -> Result<RemoveOutcome, KeyStoreError> {
        let _changing = self
            .0
            .changing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let is_kid = kid.len() == 16 && kid.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !is_kid || !self.jwks().keys.iter().any(|k| k.kid == kid) {
            return Ok(RemoveOutcome::NotFound);
        }
        if self.active().kid() == kid {
            return Ok(RemoveOutcome::Active);
        }
        let path = self.0.dir.join(format!("{kid}.json"));
        std::fs::remove_file(&path).map_err(io(&path))?;
        std::fs::File::open(&self.0.dir)
            .and_then(|d| d.sync_all())
            .map_err(io(&self.0.dir))?;
        self.reload()?;
        Ok(RemoveOutcome::Removed)
    }

    fn reload(&self) -> Result<(), KeyStoreError> {
        let loaded = load_dir(&self.0.dir)?;
        *self
            .0
            .loaded
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(loaded);
        Ok(())
    }
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
    let loaded = load_dir(&dir)?;
    Ok(KeyRing(Arc::new(RingInner {
        dir,
        loaded: RwLock::new(Arc::new(loaded)),
        changing: Mutex::new(()),
    })))
}

/// Read the key directory, making the first key when there is no `active`.
fn load_dir(dir: &Path) -> Result<Loaded, KeyStoreError> {
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
                path: dir.to_path_buf(),
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
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let path = entry.map_err(io(dir))?.path();
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
    Ok(Loaded {
        active: Arc::new(active),
        jwks,
    })
}
