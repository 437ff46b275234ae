//! A full disk (issue 28, item 12): every write that cannot be stored
//! answers 503 `store_unavailable` (retry), never 500, SQLite's pages and
//! attachments' files alike; once space is free again, the same requests
//! succeed. The data dir is a small tmpfs, so the test needs to mount one
//! (root); elsewhere it says so and checks nothing.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use lev_server::Settings;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestServer, code, free_text};

/// A tmpfs of `size` on `dir`, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Self> {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Self(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Write `path` until the file system is full.
fn fill(path: &Path) {
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0x5au8; 64 * 1024];
    while f.write_all(&chunk).is_ok() {}
    let _ = f.sync_all();
}

/// Every answer is a success or 503 `store_unavailable`: the statuses seen.
fn check(what: &str, status: StatusCode, v: &Value) -> bool {
    if status.is_success() {
        return true;
    }
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{what} on a full disk: {v}"
    );
    assert_eq!(code(v), "store_unavailable", "{what}: {v}");
    false
}

#[tokio::test]
async fn a_full_disk_answers_503_and_the_server_recovers() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let Some(mount) = Tmpfs::mount(dir.path(), "24m") else {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    };
    let s = TestServer::start_in(Arc::clone(&dir), Settings::default()).await;
    let (worker, approver) = s.worker_and_approver().await;
    let asked = s.create(&worker, &free_text("s-1", "a file?")).await;
    let filler = dir.path().join("filler");
    fill(&filler);

    // Writes of every kind until the store has no room left: each one is
    // stored, or refused with 503.
    let prompt = "x".repeat(60 * 1024);
    let mut refused = 0;
    for i in 0..1000 {
        let (status, v) = s
            .post("/v1/interactions", &worker, &free_text("s-1", &prompt))
            .await;
        if !check("a new interaction", status, &v) {
            refused += 1;
            if refused == 3 {
                break;
            }
        }
        let (status, v) = s
            .post(
                "/v1/tokens",
                &s.admin,
                &json!({"name": format!("t-{i}"), "role": "worker"}),
            )
            .await;
        check("a new token", status, &v);
    }
    eprintln!("full disk: {refused} writes refused");
    assert!(refused > 0, "the disk never filled");
    // An attachment's bytes are a file of their own.
    let data = lev_approval::encode_base64(&vec![7u8; 512 * 1024]);
    let (status, v) = s
        .respond(
            &approver,
            &asked,
            &json!({"request_id": asked, "value": "here",
                    "parts": [{"name": "a.bin", "media_type": "application/octet-stream",
                               "data": data}]}),
        )
        .await;
    assert!(
        !check("an attachment", status, &v),
        "stored on a full disk: {v}"
    );
    // Reads still answer.
    let (status, v) = s.get(&format!("/v1/interactions/{asked}"), &approver).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["request"]["status"], "pending", "{v}");

    // Room again: the same requests succeed.
    std::fs::remove_file(&filler).unwrap();
    let (status, v) = s
        .post("/v1/interactions", &worker, &free_text("s-1", &prompt))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let (status, v) = s
        .respond(
            &approver,
            &asked,
            &json!({"request_id": asked, "value": "here",
                    "parts": [{"name": "a.bin", "media_type": "application/octet-stream",
                               "data": data}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    s.stop().await;
    drop(mount);
}
