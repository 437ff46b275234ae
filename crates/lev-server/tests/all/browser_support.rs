//! A real headless Chromium, driven over WebDriver (Debian's `chromium` and
//! `chromium-driver`) with fantoccini.
//!
//! Each [`Browser`] starts its own chromedriver on a free port and one
//! Chromium with a fresh profile; dropping it (also on a panic) ends the
//! WebDriver session, which quits Chromium, and then kills chromedriver.
//! Browser tests run one at a time (two cores are shared).
//!
//! When no browser is found the harness runs `scripts/browser-env.sh` once to
//! install it; when that fails the test FAILS with a clear message, it never
//! skips. `LEV_CHROMIUM` and `LEV_CHROMEDRIVER` name other binaries.

#![allow(dead_code)]

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// How long a wait for the page lasts before the test fails.
pub const WAIT: Duration = Duration::from_secs(15);

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
static BINARIES: OnceLock<Result<(PathBuf, PathBuf), String>> = OnceLock::new();

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

fn find_binaries() -> Option<(PathBuf, PathBuf)> {
    let chromium = std::env::var_os("LEV_CHROMIUM")
        .map(PathBuf::from)
        .or_else(|| {
            ["chromium", "chromium-browser", "google-chrome"]
                .iter()
                .find_map(|n| which(n))
        })?;
    let driver = std::env::var_os("LEV_CHROMEDRIVER")
        .map(PathBuf::from)
        .or_else(|| which("chromedriver"))?;
    (chromium.is_file() && driver.is_file()).then_some((chromium, driver))
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The browser and its driver, installed by `scripts/browser-env.sh` when
/// missing. Panics with what to do when they cannot be had.
pub fn binaries() -> (PathBuf, PathBuf) {
    let found = BINARIES.get_or_init(|| {
        if let Some(found) = find_binaries() {
            return Ok(found);
        }
        let script = repo_root().join("scripts/browser-env.sh");
        let out = Command::new("bash")
            .arg(&script)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        if let Some(found) = find_binaries() {
            return Ok(found);
        }
        Err(format!(
            "{} exited with {}:\n{}{}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    });
    match found {
        Ok(found) => found.clone(),
        Err(why) => panic!(
            "the dashboard's browser tests need headless Chromium and chromedriver (Debian \
             packages `chromium` and `chromium-driver`), and they could not be installed. \
             Install them with `scripts/browser-env.sh` (apt-get install -y chromium \
             chromium-driver) or point LEV_CHROMIUM and LEV_CHROMEDRIVER at them.\n{why}"
        ),
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// One Chromium under one chromedriver.
pub struct Browser {
    pub client: Client,
    driver: Child,
    driver_port: u16,
    session: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl Browser {
    /// Start chromedriver and a headless Chromium with a fresh profile.
    pub async fn start() -> Self {
        let turn = ONE_AT_A_TIME.lock().await;
        let (chromium, chromedriver) = binaries();
        let profile = tempfile::tempdir().expect("a profile dir");
        let port = free_port();
        let log = std::fs::File::create(profile.path().join("chromedriver.log")).expect("log file");
        let driver = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", chromedriver.display()));
        let http = plain_http_client();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = http
                .get(format!("{base}/status"))
                .send()
                .await
                .ok()
                .map(|r| r.status().is_success())
                .unwrap_or(false);
            if ready {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver ({}) did not come up on port {port}",
                chromedriver.display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let data_dir = profile.path().join("chromium");
        let args = [
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--no-first-run".to_owned(),
            "--hide-scrollbars".to_owned(),
            "--window-size=1280,860".to_owned(),
            format!("--user-data-dir={}", data_dir.display()),
        ];
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium.display().to_string(),
                "args": args,
            },
        });
        let Value::Object(caps) = caps else {
            unreachable!()
        };
        let mut driver = Some(driver);
        let client =
            match ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
                .capabilities(caps)
                .connect(&base)
                .await
            {
                Ok(client) => client,
                Err(e) => {
                    if let Some(mut d) = driver.take() {
                        let _ = d.kill();
                        let _ = d.wait();
                    }
                    let log = std::fs::read_to_string(profile.path().join("chromedriver.log"))
                        .unwrap_or_default();
                    panic!(
                        "chromedriver could not start {}: {e}\n{log}",
                        chromium.display()
                    );
                }
            };
        let session = client
            .session_id()
            .await
            .ok()
            .flatten()
            .expect("a WebDriver session id");
        Self {
            client,
            driver: driver.take().expect("the driver"),
            driver_port: port,
            session,
            http,
            _profile: profile,
            _turn: turn,
        }
    }

    /// A Chrome DevTools Protocol command, through chromedriver.
    pub async fn cdp(&self, cmd: &str, params: Value) -> Value {
        let url = format!(
            "http://127.0.0.1:{}/session/{}/goog/cdp/execute",
            self.driver_port, self.session
        );
        let resp = self
            .http
            .post(url)
            .json(&json!({"cmd": cmd, "params": params}))
            .send()
            .await
            .expect("chromedriver answers");
        let status = resp.status();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "CDP {cmd}: {status} {body}");
        body
    }

    /// Make the page see `prefers-color-scheme: dark` or `light`.
    pub async fn color_scheme(&self, scheme: &str) {
        self.cdp(
            "Emulation.setEmulatedMedia",
            json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]}),
        )
        .await;
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.expect("navigate");
    }

    /// Run `script` (a function body; `return` what you want) in the page.
    pub async fn js(&self, script: &str) -> Value {
        self.client
            .execute(script, Vec::new())
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    pub async fn js_with(&self, script: &str, args: Vec<Value>) -> Value {
        self.client
            .execute(script, args)
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// Wait until `css` matches an element.
    pub async fn wait_css(&self, css: &str) -> Element {
        self.client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no element {css:?} appeared: {e}"))
    }

    /// Wait until the JavaScript expression `expr` is true in the page.
    pub async fn wait_until(&self, what: &str, expr: &str) {
        let script = format!("return !!({expr});");
        let deadline = Instant::now() + WAIT;
        loop {
            if self.js(&script).await == Value::Bool(true) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what} ({expr})"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Wait until the element `css` exists and its text contains `text`.
    pub async fn wait_text(&self, css: &str, text: &str) -> Element {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Ok(el) = self.client.find(Locator::Css(css)).await
                && let Ok(t) = el.text().await
                && t.contains(text)
            {
                return el;
            }
            if Instant::now() >= deadline {
                let found = match self.client.find(Locator::Css(css)).await {
                    Ok(el) => el.text().await.unwrap_or_default(),
                    Err(_) => "(no such element)".to_owned(),
                };
                panic!("timed out waiting for {css:?} to show {text:?}; it shows {found:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The text of the element `css` (waiting for it).
    pub async fn text(&self, css: &str) -> String {
        self.wait_css(css).await.text().await.expect("text")
    }

    /// Click the element `css`. The page re-renders its lists as events
    /// arrive, so an element found a moment ago may be replaced before the
    /// click lands ("stale element"): find it again and retry.
    pub async fn click(&self, css: &str) {
        let mut tries = 0;
        loop {
            match self.wait_css(css).await.click().await {
                Ok(()) => return,
                Err(e) if tries < 10 && e.to_string().contains("stale element") => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                Err(e) => panic!("cannot click {css:?}: {e}"),
            }
        }
    }

    pub async fn type_into(&self, css: &str, text: &str) {
        self.wait_css(css)
            .await
            .send_keys(text)
            .await
            .unwrap_or_else(|e| panic!("cannot type into {css:?}: {e}"));
    }

    /// Send keys to whatever has the focus (the page's shortcuts).
    pub async fn keys(&self, keys: &str) {
        self.client
            .active_element()
            .await
            .expect("an active element")
            .send_keys(keys)
            .await
            .expect("keys sent");
    }

    pub async fn count(&self, css: &str) -> usize {
        self.client
            .find_all(Locator::Css(css))
            .await
            .map(|v| v.len())
            .unwrap_or(0)
    }

    /// Save a PNG of the window to `target/screenshots/NAME.png`.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        let png = self.client.screenshot().await.expect("a screenshot");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("screenshot written");
        path
    }

    /// End the session (Chromium quits) and stop chromedriver.
    pub async fn close(self) {
        // Drop does it; the session is ended over plain HTTP there so it also
        // happens on a panic.
        drop(self);
    }
}

/// `target/screenshots` (under `CARGO_TARGET_DIR` when set).
pub fn screenshot_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
        .join("screenshots")
}

impl Drop for Browser {
    fn drop(&mut self) {
        // DELETE /session/{id}: chromedriver quits Chromium. Plain blocking
        // HTTP, since this also runs while a failed test unwinds.
        if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.driver_port)) {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let request = format!(
                "DELETE /session/{} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                self.session, self.driver_port
            );
            if stream.write_all(request.as_bytes()).is_ok() {
                let mut sink = Vec::new();
                let _ = stream.read_to_end(&mut sink);
            }
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// A reqwest client for plain HTTP. Built with the rest of the workspace,
/// reqwest has lev-client's rustls without a default crypto provider; ring
/// (the server's provider) is installed so that building a client works.
fn plain_http_client() -> reqwest::Client {
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}
