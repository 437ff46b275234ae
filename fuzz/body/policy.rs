//! The body of the `policy` fuzz target, shared with lev-approval's smoke
//! test (`crates/lev-approval/tests/all/fuzz_smoke_policy.rs`), which runs
//! it on stable Rust.
//!
//! Untrusted bytes as a policy file (TOML: rules, regexes, sandbox modes,
//! tool capabilities): parsing must never panic, and a policy that parses
//! must answer its questions (warnings, capabilities, the first matching
//! rule for a few calls) without panicking.

use lev_approval::policy::Policy;
use serde_json::json;

/// Whether the bytes were a policy.
pub fn run(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let Ok(policy) = Policy::parse(text) else {
        return false;
    };
    let _ = policy.warnings();
    for mode in ["read-only", "workspace-write", "danger-full-access", ""] {
        let _ = policy.granted(mode);
    }
    let calls = [
        (
            "shell",
            json!({"argv": ["git", "push", "--force"], "cwd": "/srv"}),
        ),
        ("fs.write", json!({"path": "/etc/passwd", "content": "x"})),
        (
            "http",
            json!({"method": "POST", "url": "https://example.com"}),
        ),
        ("deploy", json!(null)),
        ("deploy-web", json!({"env": "prod"})),
        ("drop_table", json!({"table": "t"})),
    ];
    for (tool, args) in &calls {
        let _ = policy.required(tool, &["net".to_owned()]);
        let _ = policy.first_matching_rule(tool, args);
        let _ = policy.denies(tool, args);
        // A quorum that parsed can be met: approvals within its voters.
        if let Some(q) = policy.quorum_for(tool, args) {
            assert!(q.approvals >= 1, "a quorum of no one");
            if !q.approvers.is_empty() {
                let mut voters: Vec<&String> = q.approvers.iter().chain(&q.escalate_to).collect();
                voters.sort();
                voters.dedup();
                assert!(
                    usize::try_from(q.approvals).unwrap_or(usize::MAX) <= voters.len(),
                    "a quorum no vote could ever pass"
                );
            }
            assert_eq!(q.escalate_after_s.is_some(), !q.escalate_to.is_empty());
        }
    }
    let _ = policy.shortest_escalation();
    true
}
