//! A real `lev serve` process on port 0, whose address is read from its
//! "listening on" line; its log is kept, it is killed when dropped, and it
//! can be killed with SIGKILL mid-flight (crash tests). Errors are returned,
//! not panicked on: the shipped binary's `lev bench` starts its servers with
//! it, and lev-cli's integration tests include this same file (std only, so
//! that it compiles in both).

use std::ffi::OsString;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant};

/// Why a server could not be started.
#[derive(Debug)]
pub enum SpawnError {
    /// The program could not be started.
    Start(std::io::Error),
    /// It exited before it said where it listens.
    Exited {
        /// Its log.
        log: String,
    },
    /// It said nothing of where it listens in the time it was given.
    NoAddress {
        /// How long it was given.
        waited: Duration,
        /// Its log so far.
        log: String,
    },
    /// A file it writes could not be read.
    Read(PathBuf, std::io::Error),
}

impl std::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Start(e) => write!(f, "starting lev serve: {e}"),
            Self::Exited { log } => {
                write!(f, "lev serve exited before it listened; its log:\n{log}")
            }
            Self::NoAddress { waited, log } => write!(
                f,
                "lev serve did not say where it listens within {waited:?}; its log:\n{log}"
            ),
            Self::Read(path, e) => write!(f, "{}: {e}", path.display()),
        }
    }
}

impl std::error::Error for SpawnError {}

/// How to start a [`Spawned`] server.
#[derive(Debug, Clone)]
pub struct SpawnedBuilder {
    program: PathBuf,
    data_dir: PathBuf,
    listen: String,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    timeout: Duration,
}

impl SpawnedBuilder {
    /// Listen here instead of `127.0.0.1:0`.
    #[must_use]
    pub fn listen(mut self, addr: &str) -> Self {
        addr.clone_into(&mut self.listen);
        self
    }

    /// One more argument after `serve --listen ... --data-dir ...`.
    #[must_use]
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// More arguments.
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// An environment variable for the server (the `LEV_*` ones of the
    /// caller's environment are removed first).
    #[must_use]
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// How long to wait for the "listening on" line (default 60 s).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Start it and wait until it listens.
    ///
    /// # Errors
    /// When it cannot be started or exits before it listens.
    pub fn start(self) -> Result<Spawned, SpawnError> {
        let mut command = Command::new(&self.program);
        command
            .args(["serve", "--listen", &self.listen, "--data-dir"])
            .arg(&self.data_dir)
            // The server stops when its stdin ends: this process holds the
            // pipe's other end, so the server never outlives it, however it
            // ends (a signal, SIGKILL, a panic).
            .arg("--exit-on-stdin-close")
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("LEV_") {
                command.env_remove(key);
            }
        }
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        let mut child = command.spawn().map_err(SpawnError::Start)?;
        let lifeline = child.stdin.take();
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel::<String>();
        if let Some(stderr) = child.stderr.take() {
            let keep = Arc::clone(&log);
            // Keeps draining stderr for the server's whole life, so it never
            // blocks on a full pipe.
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    let mut kept = keep.lock().unwrap_or_else(PoisonError::into_inner);
                    kept.push_str(&line);
                    kept.push('\n');
                    drop(kept);
                    let _ = tx.send(line);
                }
            });
        }
        let deadline = Instant::now() + self.timeout;
        let url = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    // A JSON log line (--log-format json) says it in its
                    // message.
                    let message = serde_json::from_str::<serde_json::Value>(&line)
                        .ok()
                        .and_then(|v| v["message"].as_str().map(str::to_owned))
                        .unwrap_or(line);
                    if let Some(rest) = message.split("listening on ").nth(1) {
                        break rest.trim().to_owned();
                    }
                }
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    let log = log.lock().unwrap_or_else(PoisonError::into_inner).clone();
                    return Err(match e {
                        mpsc::RecvTimeoutError::Disconnected => SpawnError::Exited { log },
                        mpsc::RecvTimeoutError::Timeout => SpawnError::NoAddress {
                            waited: self.timeout,
                            log,
                        },
                    });
                }
            }
        };
        Ok(Spawned {
            child,
            _lifeline: lifeline,
            url,
            data_dir: self.data_dir,
            log,
        })
    }
}

/// A running `lev serve`, killed when dropped, and stopped by itself when
/// this process ends without dropping it (its stdin closes).
#[derive(Debug)]
pub struct Spawned {
    child: Child,
    /// The write end of the server's stdin, never written: when this process
    /// ends, however it ends, the server reads end-of-file and stops.
    _lifeline: Option<std::process::ChildStdin>,
    url: String,
    data_dir: PathBuf,
    log: Arc<Mutex<String>>,
}

impl Spawned {
    /// A `lev serve` of `program` on `127.0.0.1:0` in `data_dir`; add flags
    /// with the builder's methods, then [`SpawnedBuilder::start`].
    pub fn builder(program: impl AsRef<Path>, data_dir: impl AsRef<Path>) -> SpawnedBuilder {
        SpawnedBuilder {
            program: program.as_ref().to_owned(),
            data_dir: data_dir.as_ref().to_owned(),
            listen: "127.0.0.1:0".into(),
            args: Vec::new(),
            env: Vec::new(),
            timeout: Duration::from_secs(60),
        }
    }

    /// `http://127.0.0.1:PORT` (or `https://...`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> &str {
        self.url.split("://").nth(1).unwrap_or(&self.url)
    }

    /// The data dir it was started on.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The admin token it wrote on its first start.
    ///
    /// # Errors
    /// When `admin.token` cannot be read.
    pub fn admin_token(&self) -> Result<String, SpawnError> {
        read_token(&self.data_dir.join("admin.token"))
    }

    /// Everything it wrote to stderr so far.
    pub fn log(&self) -> String {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kill it with SIGKILL (no shutdown at all: a crash) and reap it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Ask it to stop (SIGTERM) and wait up to `within` for it to exit.
    ///
    /// # Errors
    /// When it does not exit in time (it is then killed).
    pub fn terminate(&mut self, within: Duration) -> Result<ExitStatus, SpawnError> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(SpawnError::NoAddress {
                    waited: within,
                    log: format!("did not exit on SIGTERM; its log:\n{}", self.log()),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether it has exited (and how), without waiting.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A token file's secret (its first line).
///
/// # Errors
/// When the file cannot be read.
pub fn read_token(path: &Path) -> Result<String, SpawnError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .map_err(|e| SpawnError::Read(path.to_owned(), e))
}
