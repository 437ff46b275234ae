//! Sign, raw `verify_strict`, and verify + authorize (the whole verifier path).
//!
//! Goal (issue #2): verify + authorize at >= 85% of the raw `verify_strict` rate.
//! Run: `cargo bench -p lev-approval --bench approval`.
//!
//! Criterion measures each function in turn, so on a busy machine the load can
//! change between two of them and skew their ratio either way. After them, the
//! bench also prints the ratio measured by interleaving the two paths and
//! keeping each one's fastest round, which such load hardly moves.

// A benchmark is a harness like a test: a broken setup should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group};
use ed25519_dalek::Signature;
use lev_approval::{
    ApprovalPayload, SigningKeyPair, TrustedKeys, decode_base64, pae, sign_payload, verify,
};
use std::hint::black_box;
use std::time::Instant;
use time::OffsetDateTime;

fn payload(now: OffsetDateTime) -> ApprovalPayload {
    ApprovalPayload {
        v: 1,
        turn_id: "t-7".into(),
        request_id: "call-1".into(),
        tool_name: "shell".into(),
        args_json: r#"{"argv":["cargo","test","--workspace"],"cwd":"/home/alice/project"}"#.into(),
        modified_args_json: String::new(),
        approved: true,
        approved_for_session: false,
        covered_capabilities: vec!["proc-exec".into()],
        caller: "alice".into(),
        approver: "bob".into(),
        sandbox_mode: "workspace-write".into(),
        reason: String::new(),
        injected_context: String::new(),
        conversation_id: "c-1".into(),
        nonce: "q3v1Yk0cW3bQ2l7m9n8o0A".into(),
        issued_at: now,
        expires_at: now + time::Duration::minutes(10),
        votes: None,
    }
}

fn bench(c: &mut Criterion) {
    let key = SigningKeyPair::from_seed(&[42u8; 32]);
    let mut keys = TrustedKeys::new();
    keys.insert(key.verifying_key()).unwrap();
    let now = OffsetDateTime::now_utc();
    let p = payload(now);
    let envelope = sign_payload(&p, &key).unwrap();

    c.bench_function("sign", |b| {
        b.iter(|| sign_payload(black_box(&p), &key).unwrap())
    });

    let bytes = decode_base64(&envelope.payload).unwrap();
    let message = pae(&envelope.payload_type, &bytes);
    let sig_bytes: [u8; 64] = decode_base64(&envelope.signatures[0].sig)
        .unwrap()
        .try_into()
        .unwrap();
    let sig = Signature::from_bytes(&sig_bytes);
    let vk = key.verifying_key();
    c.bench_function("verify_strict (raw)", |b| {
        b.iter(|| {
            vk.verify_strict(black_box(&message), black_box(&sig))
                .unwrap()
        })
    });

    c.bench_function("verify + authorize", |b| {
        b.iter(|| {
            let v = verify(black_box(&envelope), &keys, now).unwrap();
            assert!(v.authorizes_call("call-1", "shell", &p.args_json));
            v
        })
    });
}

/// The rate of verify + authorize over the raw `verify_strict` rate, from
/// interleaved rounds (fastest round of each).
fn interleaved_ratio() {
    let key = SigningKeyPair::from_seed(&[42u8; 32]);
    let mut keys = TrustedKeys::new();
    keys.insert(key.verifying_key()).unwrap();
    let now = OffsetDateTime::now_utc();
    let p = payload(now);
    let envelope = sign_payload(&p, &key).unwrap();
    let bytes = decode_base64(&envelope.payload).unwrap();
    let message = pae(&envelope.payload_type, &bytes);
    let sig_bytes: [u8; 64] = decode_base64(&envelope.signatures[0].sig)
        .unwrap()
        .try_into()
        .unwrap();
    let sig = Signature::from_bytes(&sig_bytes);
    let vk = key.verifying_key();

    const ROUNDS: usize = 40;
    const PER_ROUND: u32 = 500;
    let fastest = |best: &mut f64, start: Instant| {
        *best = best.min(start.elapsed().as_secs_f64() / f64::from(PER_ROUND));
    };
    let (mut raw, mut full) = (f64::MAX, f64::MAX);
    for _ in 0..ROUNDS {
        let start = Instant::now();
        for _ in 0..PER_ROUND {
            vk.verify_strict(black_box(&message), black_box(&sig))
                .unwrap();
        }
        fastest(&mut raw, start);
        let start = Instant::now();
        for _ in 0..PER_ROUND {
            let v = verify(black_box(&envelope), &keys, now).unwrap();
            assert!(v.authorizes_call("call-1", "shell", &p.args_json));
        }
        fastest(&mut full, start);
    }
    println!(
        "interleaved: verify_strict (raw) {:.2} µs, verify + authorize {:.2} µs: {:.1}% of the raw rate (goal >= 85%)",
        raw * 1e6,
        full * 1e6,
        raw / full * 100.0
    );
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    // `cargo bench` passes --bench; `cargo test --benches` runs each bench once, quickly.
    if std::env::args().any(|a| a == "--bench") {
        interleaved_ratio();
    }
}
