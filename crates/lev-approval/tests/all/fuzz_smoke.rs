//! The `envelope` fuzz target's body (`fuzz/body/envelope.rs`) over a few
//! thousand random and mutated inputs, so CI checks on stable Rust what
//! `cargo fuzz run envelope` checks at length: no input makes it panic.

#[path = "../../../../fuzz/body/envelope.rs"]
mod body;

use proptest::prelude::*;

/// Inputs the fuzz body should start from: real envelopes and key sets.
fn seeds() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = super::vector_set::generate()
        .into_iter()
        .map(|(_, v)| serde_json::to_vec(&v.envelope).unwrap())
        .collect();
    // The votes inside the version 2 decisions, and their payloads.
    for (_, v) in super::vector_set::generate() {
        let Some(payload) = v.envelope["payload"]
            .as_str()
            .and_then(|p| lev_approval::decode_base64(p).ok())
            .and_then(|p| serde_json::from_slice::<serde_json::Value>(&p).ok())
        else {
            continue;
        };
        for vote in payload["votes"].as_array().into_iter().flatten() {
            if !vote["envelope"].is_null() {
                seeds.push(serde_json::to_vec(&vote["envelope"]).unwrap());
                if let Some(p) = vote["envelope"]["payload"]
                    .as_str()
                    .and_then(|p| lev_approval::decode_base64(p).ok())
                {
                    seeds.push(p);
                }
            }
        }
    }
    let key = body::trusted_key();
    seeds.push(key.public_base64url().into_bytes());
    seeds.push(serde_json::to_vec(&key.public_jwk()).unwrap());
    seeds.push(
        format!(
            r#"{{"keys":[{}]}}"#,
            serde_json::to_string(&key.public_jwk()).unwrap()
        )
        .into_bytes(),
    );
    seeds
}

/// The seeds and the committed corpus (`fuzz/corpus/envelope/`, what `cargo
/// fuzz` found and kept, and `fuzz/regressions/envelope/`).
fn seeds_and_corpus() -> Vec<Vec<u8>> {
    let mut all = seeds();
    all.extend(crate::mutate::committed("envelope"));
    all
}

#[test]
fn the_committed_corpus_never_panics() {
    for input in crate::mutate::committed("envelope") {
        body::run(&input);
    }
}

#[test]
fn the_seeds_reach_past_the_signature_check() {
    let verified = seeds()
        .iter()
        .filter(|s| body::run(s).verified_envelope)
        .count();
    assert!(
        verified >= 10,
        "only {verified} seeds verify: the smoke test would not reach the payload parse"
    );
    let votes = seeds()
        .iter()
        .filter(|s| body::run(s).verified_vote)
        .count();
    assert!(votes >= 2, "only {votes} seeds are votes that verify");
    let payloads = seeds()
        .iter()
        .filter(|s| body::run(s).verified_vote_payload)
        .count();
    assert!(
        payloads >= 2,
        "only {payloads} seeds are vote payloads that verify when ann signs them"
    );
}

/// 24 bytes that make the body pick `issued_at`, `expires_at` and the clock
/// among the first and last writable seconds and a time near the vectors'
/// "now", in every combination, with and without an offset.
#[test]
fn extreme_times_never_panic_and_verify_inside_their_window() {
    let mut verified = 0;
    for issued in 0u8..3 {
        for expires in 0u8..3 {
            for clock in 0u8..3 {
                for offset in [[0u8, 0], [0x9f, 0x05], [0x61, 0xfa]] {
                    let mut data = Vec::new();
                    for pick in [issued, expires, clock] {
                        // n % 8 picks: 0 first, 1 last, 2 near now.
                        data.extend_from_slice(&[pick, 7, 0x80, offset[0], offset[1], 0, 0, 0]);
                    }
                    if body::run(&data).verified_times {
                        verified += 1;
                    }
                }
            }
        }
    }
    assert!(verified > 0, "no combination verified");
}

fn mutated() -> impl Strategy<Value = Vec<u8>> {
    crate::mutate::mutated(seeds_and_corpus(), 8)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        body::run(&data);
    }

    #[test]
    fn mutated_envelopes_and_keys_never_panic(data in mutated()) {
        body::run(&data);
    }

    #[test]
    fn random_json_shaped_text_never_panics(data in r#"[{}\[\]":,0-9a-zA-Z_=+/ -]{0,300}"#) {
        body::run(data.as_bytes());
    }
}
