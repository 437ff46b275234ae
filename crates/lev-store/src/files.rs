//! Secret files of the data dir, in plain std IO: written whole or not at
//! all (a temporary file, fsync, rename, fsync of the directory), and never
//! readable by others. SQLite's signing keys (`keys/<kid>.json`, `active`)
//! and the server's `admin.token` are written here.

use std::io::Write as _;
use std::path::Path;

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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::write_secret_file;

    #[test]
    fn a_secret_file_replaces_the_old_one_whole_and_is_private() {
        let dir = std::env::temp_dir().join(format!("lev-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("admin.token");
        std::fs::write(&path, "old\n").unwrap();
        write_secret_file(&path, "new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
