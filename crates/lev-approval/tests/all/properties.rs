//! Property tests of the approval binding, the signature and grant matching.

use std::collections::BTreeSet;

use lev_approval::{
    ApprovalPayload, Call, GrantMatch, GrantRule, NotAuthorized, SigningKeyPair, TrustedKeys,
    VerifiedResponse, decode_base64, encode_base64, sign_payload, verify,
};
use proptest::prelude::*;
use time::OffsetDateTime;

fn key() -> SigningKeyPair {
    SigningKeyPair::from_seed(&[0x5a; 32])
}

fn trusted() -> TrustedKeys {
    let mut keys = TrustedKeys::new();
    keys.insert(key().verifying_key()).unwrap();
    keys
}

fn now() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_767_268_800).unwrap()
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[ -~]{0,24}", "\\PC{0,12}", Just(String::new()),]
}

prop_compose! {
    fn payload()(
        request_id in text(),
        tool_name in text(),
        args_json in text(),
        modified_args_json in text(),
        approved in any::<bool>(),
        approved_for_session in any::<bool>(),
        caller in text(),
        conversation_id in text(),
        sandbox_mode in text(),
        reason in text(),
    ) -> ApprovalPayload {
        ApprovalPayload {
            v: 1,
            turn_id: "t-1".into(),
            request_id,
            tool_name,
            args_json,
            modified_args_json,
            approved,
            approved_for_session,
            covered_capabilities: vec!["proc-exec".into()],
            caller,
            approver: "bob".into(),
            sandbox_mode,
            reason,
            injected_context: String::new(),
            conversation_id,
            nonce: "AAECAwQFBgcICQoLDA0ODw".into(),
            issued_at: now(),
            expires_at: now() + time::Duration::minutes(10),
            votes: None,
        }
    }
}

fn verified(p: &ApprovalPayload) -> VerifiedResponse {
    verify(&sign_payload(p, &key()).unwrap(), &trusted(), now()).unwrap()
}

/// A change of one byte sequence: flip a bit, insert a byte, or drop a byte.
#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, u8),
    Remove(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(i, b)| Edit::Flip(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<usize>().prop_map(Edit::Remove),
    ]
}

/// Apply `edit`; `None` when it cannot change these bytes (removing from nothing).
fn apply(bytes: &[u8], edit: &Edit) -> Option<Vec<u8>> {
    let mut out = bytes.to_vec();
    match *edit {
        Edit::Flip(i, bit) if !out.is_empty() => {
            let i = i % out.len();
            out[i] ^= 1 << bit;
        }
        Edit::Insert(i, b) => out.insert(i % (out.len() + 1), b),
        Edit::Remove(i) if !out.is_empty() => {
            let i = i % out.len();
            out.remove(i);
        }
        _ => return None,
    }
    Some(out)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_change_of_the_call_is_not_authorized(
        p in payload(),
        field in 0usize..3,
        e in edit(),
    ) {
        let p = ApprovalPayload { approved: true, ..p };
        let v = verified(&p);
        prop_assert!(v.authorizes_call(&p.request_id, &p.tool_name, &p.args_json));
        prop_assert_eq!(v.check_call(&Call::new(&p.request_id, &p.tool_name, &p.args_json)), Ok(()));

        let original = [&p.request_id, &p.tool_name, &p.args_json][field].as_bytes();
        let Some(changed) = apply(original, &e) else { return Ok(()) };
        prop_assume!(changed != original);
        let mut call = Call::new(&p.request_id, &p.tool_name, &p.args_json);
        let changed_text = String::from_utf8(changed.clone());
        match field {
            0 | 1 => {
                // Ids and tool names are text: only a change that stays UTF-8 can be presented.
                let Ok(t) = changed_text.as_deref() else { return Ok(()) };
                if field == 0 { call.request_id = t } else { call.tool_name = t }
            }
            _ => call.args_json = &changed,
        }
        let field_name = ["request_id", "tool_name", "args_json"][field];
        let err = v.check_call(&call).unwrap_err();
        prop_assert_eq!(err.reason(), field_name);
        if let Ok(args) = std::str::from_utf8(call.args_json) {
            prop_assert!(!v.authorizes_call(call.request_id, call.tool_name, args));
        }
    }

    #[test]
    fn a_denial_authorizes_nothing(p in payload()) {
        let p = ApprovalPayload { approved: false, ..p };
        let v = verified(&p);
        prop_assert!(!v.authorizes_call(&p.request_id, &p.tool_name, &p.args_json));
        let full = Call {
            conversation_id: Some(&p.conversation_id),
            caller: Some(&p.caller),
            sandbox_mode: Some(&p.sandbox_mode),
            ..Call::new(&p.request_id, &p.tool_name, &p.args_json)
        };
        prop_assert_eq!(
            v.check_call(&full),
            Err(NotAuthorized::Denied { reason: p.reason.clone() })
        );
    }

    #[test]
    fn check_call_agrees_with_authorizes_call(
        p in payload(),
        request_id in text(),
        tool_name in text(),
        args_json in text(),
    ) {
        let v = verified(&p);
        for (r, t, a) in [
            (p.request_id.as_str(), p.tool_name.as_str(), p.args_json.as_str()),
            (&request_id, &tool_name, &args_json),
            (&p.request_id, &p.tool_name, &args_json),
        ] {
            prop_assert_eq!(v.check_call(&Call::new(r, t, a)).is_ok(), v.authorizes_call(r, t, a));
        }
    }

    #[test]
    fn a_flipped_payload_bit_fails_verification(p in payload(), i in any::<usize>(), bit in 0u8..8) {
        let mut envelope = sign_payload(&p, &key()).unwrap();
        let mut bytes = decode_base64(&envelope.payload).unwrap();
        let i = i % bytes.len();
        bytes[i] ^= 1 << bit;
        envelope.payload = encode_base64(&bytes);
        prop_assert!(verify(&envelope, &trusted(), now()).is_err());
    }

    #[test]
    fn a_flipped_signature_bit_fails_verification(p in payload(), i in 0usize..64, bit in 0u8..8) {
        let mut envelope = sign_payload(&p, &key()).unwrap();
        let mut sig = decode_base64(&envelope.signatures[0].sig).unwrap();
        sig[i] ^= 1 << bit;
        envelope.signatures[0].sig = encode_base64(&sig);
        prop_assert!(verify(&envelope, &trusted(), now()).is_err());
    }

    #[test]
    fn a_flipped_payload_type_bit_fails_verification(p in payload(), i in any::<usize>(), bit in 0u8..7) {
        let mut envelope = sign_payload(&p, &key()).unwrap();
        let mut t = envelope.payload_type.into_bytes();
        let i = i % t.len();
        t[i] ^= 1 << bit;
        envelope.payload_type = String::from_utf8(t).unwrap();
        prop_assert!(verify(&envelope, &trusted(), now()).is_err());
    }
}

const CAPABILITIES: [&str; 6] = ["fs-read", "fs-write", "net", "proc-exec", "gpu", "secrets"];

fn capabilities() -> impl Strategy<Value = BTreeSet<String>> {
    proptest::sample::subsequence(CAPABILITIES.to_vec(), 0..=CAPABILITIES.len())
        .prop_map(|caps| caps.into_iter().map(str::to_owned).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_shortfall_outside_the_covered_set_never_matches(
        covered in capabilities(),
        shortfall in capabilities(),
        same_conversation in any::<bool>(),
        session in any::<bool>(),
    ) {
        let grant = GrantRule {
            caller: "alice".into(),
            conversation_id: session.then(|| "c-1".to_owned()),
            sandbox_mode: "workspace-write".into(),
            tool_name: "shell".into(),
            covered_capabilities: covered.clone(),
            args: None,
        };
        let args = serde_json::json!({"argv": ["ls"]});
        let call = GrantMatch {
            caller: "alice",
            conversation_id: if same_conversation { "c-1" } else { "c-2" },
            sandbox_mode: "workspace-write",
            tool_name: "shell",
            shortfall: &shortfall,
            args: &args,
        };
        let in_scope = !session || same_conversation;
        prop_assert_eq!(grant.covers(&call), in_scope && shortfall.is_subset(&covered));
        if !shortfall.is_subset(&covered) {
            prop_assert!(!grant.covers(&call));
        }
    }
}

proptest! {
    /// The verified response holds the signed payload itself, field for
    /// field, beside the key that signed it.
    #[test]
    fn the_verified_response_is_the_signed_payload(p in payload()) {
        let v = verified(&p);
        prop_assert_eq!(&v.payload, &p);
        let public = key().verifying_key();
        prop_assert_eq!(v.signer_public_key.as_slice(), public.as_bytes().as_slice());
        prop_assert_eq!(v.signer_kid(), key().kid().to_owned());
    }
}

/// As JSON (what `lev verify` prints) a verified response is the payload's
/// fields without `v`, the signer's key before the two times: the shape it
/// had before it held the payload.
#[test]
fn a_verified_response_serialises_as_it_always_did() {
    let p = ApprovalPayload {
        v: 1,
        turn_id: "t-1".into(),
        request_id: "call-1".into(),
        tool_name: "shell".into(),
        args_json: r#"{"argv":["ls"]}"#.into(),
        modified_args_json: String::new(),
        approved: true,
        approved_for_session: false,
        covered_capabilities: vec!["proc-exec".into()],
        caller: "alice".into(),
        approver: "bob".into(),
        sandbox_mode: "workspace-write".into(),
        reason: "fine".into(),
        injected_context: String::new(),
        conversation_id: "c-1".into(),
        nonce: "AAECAwQFBgcICQoLDA0ODw".into(),
        issued_at: now(),
        expires_at: now() + time::Duration::minutes(10),
        votes: None,
    };
    let text = serde_json::to_string(&verified(&p)).unwrap();
    let expected = format!(
        concat!(
            r#"{{"turn_id":"t-1","request_id":"call-1","tool_name":"shell","#,
            r#""args_json":"{{\"argv\":[\"ls\"]}}","modified_args_json":"","approved":true,"#,
            r#""approved_for_session":false,"covered_capabilities":["proc-exec"],"#,
            r#""caller":"alice","approver":"bob","sandbox_mode":"workspace-write","#,
            r#""reason":"fine","injected_context":"","conversation_id":"c-1","#,
            r#""nonce":"AAECAwQFBgcICQoLDA0ODw","signer_public_key":"{}","#,
            r#""issued_at":"2026-01-01T12:00:00Z","expires_at":"2026-01-01T12:10:00Z"}}"#
        ),
        key().public_base64url()
    );
    assert_eq!(text, expected);
}
