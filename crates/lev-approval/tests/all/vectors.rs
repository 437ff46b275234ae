//! Every committed vector gives its verdict, and the committed files are what
//! the generator makes.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ed25519_dalek::{Signature, Verifier as _, VerifyingKey};
use lev_approval::{decode_base64, pae};
use lev_protocol::Envelope;
use serde_json::Value;

use super::vector_set::{
    self, REGENERATE, Vector, Verdict, VoteVerdict, check_vote_bytes, evaluate, evaluate_vote,
};

fn committed() -> BTreeMap<String, (String, Vector)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(vector_set::DIR);
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}\nhint: regenerate with `{REGENERATE}`",
            dir.display()
        )
    }) {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let vector: Vector = serde_json::from_str(&text).unwrap_or_else(|e| {
            panic!(
                "{}: not a vector: {e}\nhint: regenerate with `{REGENERATE}`",
                path.display()
            )
        });
        out.insert(name, (text, vector));
    }
    out
}

#[test]
fn every_vector_gives_its_verdict() {
    let vectors = committed();
    assert!(vectors.len() >= 30, "found only {} vectors", vectors.len());
    let mut failures = Vec::new();
    for (name, (_, vector)) in &vectors {
        let got = evaluate(vector);
        if got != vector.expect {
            failures.push(format!(
                "{name}: expected {:?}, found {got:?}",
                vector.expect
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} vector(s) disagree with the verifier:\n{}\nhint: if the change in behaviour is intended, regenerate with `{REGENERATE}` and review the diff",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn committed_vectors_are_what_the_generator_makes() {
    let committed = committed();
    let generated = vector_set::generate();
    let mut problems = Vec::new();
    for (name, vector) in &generated {
        match committed.get(*name) {
            None => problems.push(format!("{name}.json is missing")),
            Some((text, _)) if *text != vector_set::to_file_text(vector) => {
                problems.push(format!("{name}.json differs from the generator's output"));
            }
            Some(_) => {}
        }
    }
    for name in committed.keys() {
        if !generated.iter().any(|(n, _)| n == name) {
            problems.push(format!("{name}.json is not made by the generator"));
        }
    }
    assert!(
        problems.is_empty(),
        "{}\nhint: regenerate with `{REGENERATE}`",
        problems.join("\n")
    );
}

#[test]
fn the_required_cases_are_covered() {
    let committed = committed();
    for name in [
        "valid_grant",
        "valid_denial",
        "args_one_byte_changed",
        "payload_type_swapped",
        "unknown_payload_field",
        "duplicated_payload_key",
        "untrusted_key",
        "weak_key",
        "malleated_signature",
        "expired",
        "issued_in_future",
        "other_conversation",
        "other_caller",
        "other_sandbox_mode",
        "empty_edit_means_proposed_args",
        "edit_resolves_to_edit",
        "base64url_unpadded",
        "vote_envelope_cli_key",
        "vote_envelope_payload_edited",
        "v2_denial",
    ] {
        assert!(
            committed.contains_key(name),
            "no vector {name}.json\nhint: regenerate with `{REGENERATE}`"
        );
    }
    let verdicts =
        |f: fn(&Verdict) -> bool| committed.values().filter(|(_, v)| f(&v.expect)).count();
    assert!(verdicts(|v| matches!(v, Verdict::Authorized { .. })) >= 5);
    assert!(verdicts(|v| matches!(v, Verdict::NotAuthorized { .. })) >= 5);
    assert!(verdicts(|v| matches!(v, Verdict::Invalid { .. })) >= 5);
}

/// Every vote envelope on its own gives its verdict, its bytes are what
/// its envelope says, and a plain Ed25519 check of the signature over the
/// committed PAE bytes (not the library's vote verifier) agrees: the
/// signature verifies under the voter's registered key exactly when the
/// vote is valid.
#[test]
fn every_vote_envelope_gives_its_verdict_over_its_exact_bytes() {
    let committed = committed();
    let mut seen = 0;
    for (name, (_, vector)) in &committed {
        let Some(vote) = &vector.vote else {
            continue;
        };
        seen += 1;
        check_vote_bytes(vote).unwrap_or_else(|e| panic!("{name}: {e}\nhint: {REGENERATE}"));
        assert_eq!(
            evaluate_vote(vector).as_ref(),
            Some(&vote.expect),
            "{name}\nhint: {REGENERATE}"
        );
        let envelope: Envelope = serde_json::from_value(vote.envelope.clone()).unwrap();
        assert_eq!(
            envelope.payload_type,
            lev_protocol::VOTE_PAYLOAD_TYPE,
            "{name}"
        );
        let pae_bytes: Vec<u8> = (0..vote.pae_hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&vote.pae_hex[i..i + 2], 16).unwrap())
            .collect();
        let text = String::from_utf8(pae_bytes.clone()).unwrap();
        assert!(
            text.starts_with(&format!(
                "DSSEv1 {} {} {} ",
                lev_protocol::VOTE_PAYLOAD_TYPE.len(),
                lev_protocol::VOTE_PAYLOAD_TYPE,
                vote.payload_json.len()
            )) && text.ends_with(&vote.payload_json),
            "{name}: {text}"
        );
        let voter: Value = serde_json::from_str(&vote.payload_json).unwrap();
        let voter = voter["voter"].as_str().unwrap();
        let keys = vector.people_keys.as_ref().unwrap()["keys"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|k| {
                k["kid"]
                    .as_str()
                    .is_some_and(|kid| kid.starts_with(&format!("person:{voter}:")))
            })
            .map(|k| {
                let raw: [u8; 32] = decode_base64(k["x"].as_str().unwrap())
                    .unwrap()
                    .try_into()
                    .unwrap();
                (
                    k["kid"].as_str().unwrap().to_owned(),
                    VerifyingKey::from_bytes(&raw).unwrap(),
                )
            })
            .collect::<Vec<_>>();
        let sig: [u8; 64] = decode_base64(&envelope.signatures[0].sig)
            .unwrap()
            .try_into()
            .unwrap();
        let verified_by = keys
            .iter()
            .find(|(_, key)| {
                key.verify_strict(&pae_bytes, &Signature::from_bytes(&sig))
                    .is_ok()
            })
            .map(|(kid, _)| kid.clone());
        match &vote.expect {
            VoteVerdict::Valid { voter: v, kid } => {
                assert_eq!(v, voter, "{name}");
                assert_eq!(verified_by.as_ref(), Some(kid), "{name}");
            }
            VoteVerdict::Invalid { .. } => assert_eq!(verified_by, None, "{name}"),
        }
    }
    assert!(seen >= 3, "only {seen} vote envelope vectors");
}

/// The weak-key vector is only worth having if the forgery in it is real:
/// plain (non-strict) Ed25519 verification accepts it, strict refuses it.
#[test]
fn the_weak_key_forgery_fools_non_strict_verification() {
    let (_, vector) = &committed()["weak_key"];
    let raw: [u8; 32] = decode_base64(&vector.trusted_keys[0])
        .unwrap()
        .try_into()
        .unwrap();
    assert_eq!(raw, vector_set::WEAK_KEY);
    let key = VerifyingKey::from_bytes(&raw).unwrap();
    assert!(key.is_weak());
    let envelope: Envelope = serde_json::from_value(vector.envelope.clone()).unwrap();
    let message = pae(
        &envelope.payload_type,
        &decode_base64(&envelope.payload).unwrap(),
    );
    let sig: [u8; 64] = decode_base64(&envelope.signatures[0].sig)
        .unwrap()
        .try_into()
        .unwrap();
    let sig = Signature::from_bytes(&sig);
    assert!(key.verify(&message, &sig).is_ok(), "non-strict accepts");
    assert!(key.verify_strict(&message, &sig).is_err(), "strict refuses");
}

/// The malleated signature is the genuine one plus L: the same value mod L.
#[test]
fn the_malleated_signature_is_the_genuine_one_plus_l() {
    let vectors = committed();
    let sig = |name: &str| -> Vec<u8> {
        let envelope: Envelope = serde_json::from_value(vectors[name].1.envelope.clone()).unwrap();
        decode_base64(&envelope.signatures[0].sig).unwrap()
    };
    let genuine = sig("valid_grant");
    let malleated = sig("malleated_signature");
    assert_eq!(genuine[..32], malleated[..32], "R is unchanged");
    assert_ne!(genuine[32..], malleated[32..], "s changed");
}
