//! The vectors of payload version 2 and people's signed votes (SPEC section
//! 13): decisions carrying votes signed by `lev key init` keys (Ed25519)
//! and by passkeys (WebAuthn assertions, EdDSA and ES256), checked with
//! `require_votes` against people's keys; and the forgeries a server could
//! make without the people's private keys.
//!
//! Deterministic like the rest: fixed seeds, fixed times. ECDSA signing is
//! randomised, so the one ES256 assertion is a fixed signature made once
//! (over [`es256_message`]'s bytes) with the fixed private key below.

use lev_approval::votes::{ed25519_jwk, passkey_jwk};
use lev_approval::{
    ApprovalPayload, PayloadVote, SigningKeyPair, VoteEnvelope, VotePayload, encode_base64,
    encode_base64url, sha256_hex, sign_envelope, sign_vote,
};
use lev_protocol::api::{PeopleJwks, PersonJwk};
use lev_protocol::{
    APPROVAL_PAYLOAD_TYPE, APPROVAL_PAYLOAD_TYPE_V2, Envelope, EnvelopeSignature, VoteBinding,
};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::vector_set::{
    ARGS, EDITED_ARGS, ISSUED_AT, Vector, Verdict, VoteVector, VoteVerdict, at, authorized,
    edited_text, grant, hex as hex_of, invalid, json, key_untrusted, not_authorized, shifted,
    signed, vector,
};

/// The relying party of the passkeys.
const RP_ID: &str = "lev.example.com";
const ORIGIN: &str = "https://lev.example.com";

fn ann() -> SigningKeyPair {
    SigningKeyPair::from_seed(&[0x44; 32])
}
fn bob() -> SigningKeyPair {
    SigningKeyPair::from_seed(&[0x55; 32])
}
/// carol's passkey, EdDSA.
fn carol() -> SigningKeyPair {
    SigningKeyPair::from_seed(&[0x66; 32])
}

/// dana's passkey, ES256: the uncompressed point of the private scalar
/// 0x0707...07 (32 bytes of 7).
const DANA_POINT_HEX: &str = "041e18532fd4754c02f3041d9c75ceb33b83ffd81ac7ce4fe882ccb1c98bc5896ea46c311c4e2ff40dd96a3653e6e45445d32dfe486eced75c7a90c6a18881c0a3";

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn cli_jwk(key: &SigningKeyPair, kid: &str) -> PersonJwk {
    let mut jwk = ed25519_jwk(key.verifying_key().as_bytes());
    jwk.kid = kid.into();
    jwk
}

fn passkey(mut jwk: PersonJwk, kid: &str, credential: &[u8]) -> PersonJwk {
    jwk.kid = kid.into();
    jwk.rp_id = Some(RP_ID.into());
    jwk.credential_id = Some(encode_base64url(credential));
    jwk
}

fn carol_jwk() -> PersonJwk {
    let mut spki = vec![
        0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
    ];
    spki.extend_from_slice(carol().verifying_key().as_bytes());
    passkey(
        passkey_jwk(&spki, -8).expect("an Ed25519 SPKI"),
        "person:carol:1",
        b"carol-credential",
    )
}

fn dana_jwk() -> PersonJwk {
    let mut spki = vec![
        0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08,
        0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
    ];
    spki.extend_from_slice(&hex(DANA_POINT_HEX));
    passkey(
        passkey_jwk(&spki, -7).expect("a P-256 SPKI"),
        "person:dana:1",
        b"dana-credential",
    )
}

fn people() -> Value {
    serde_json::to_value(PeopleJwks {
        keys: vec![
            cli_jwk(&ann(), "person:ann:1"),
            cli_jwk(&bob(), "person:bob:1"),
            carol_jwk(),
            dana_jwk(),
        ],
    })
    .expect("a JWKS is JSON")
}

/// What the grant's votes bind.
fn binding() -> VoteBinding {
    let g = grant();
    VoteBinding {
        request_id: g.request_id,
        tool_name: g.tool_name,
        args_sha256: sha256_hex(g.args_json.as_bytes()),
        conversation_id: g.conversation_id,
        caller: g.caller,
        sandbox_mode: g.sandbox_mode,
    }
}

fn vote_payload(voter: &str, binding: &VoteBinding) -> VotePayload {
    VotePayload::for_call(
        binding,
        true,
        "once",
        "",
        voter,
        at(&shifted(ISSUED_AT, -40)),
    )
}

/// `voter`'s vote on the grant, signed with `key` (kid `kid`).
fn cli_vote(voter: &str, key: &SigningKeyPair, kid: &str) -> Envelope {
    sign_vote(&vote_payload(voter, &binding()), key, kid).expect("a vote")
}

/// A passkey's authenticator data and client data for `challenge`.
fn assertion_parts(challenge: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut auth = Sha256::digest(RP_ID.as_bytes()).to_vec();
    auth.push(0x05); // user present, user verified
    auth.extend_from_slice(&[0, 0, 0, 1]);
    let client = format!(
        r#"{{"type":"webauthn.get","challenge":"{}","origin":"{ORIGIN}","crossOrigin":false}}"#,
        encode_base64url(challenge)
    );
    (auth, client.into_bytes())
}

/// What a passkey signs: authenticator data and the client data's hash.
fn signed_by_passkey(auth: &[u8], client: &[u8]) -> Vec<u8> {
    let mut m = auth.to_vec();
    m.extend_from_slice(&Sha256::digest(client));
    m
}

/// A vote signed by a passkey whose assertion is over `challenge_of`'s
/// challenge (normally the vote itself).
fn passkey_vote(
    vote: &VotePayload,
    challenge_of: &VotePayload,
    kid: &str,
    sig: Vec<u8>,
) -> Envelope {
    let (auth, client) = assertion_parts(&challenge_of.challenge().expect("a challenge"));
    Envelope {
        payload_type: lev_protocol::VOTE_PAYLOAD_TYPE.into(),
        payload: encode_base64(&vote.to_bytes().expect("a vote")),
        signatures: vec![EnvelopeSignature {
            keyid: kid.into(),
            sig: encode_base64(&sig),
            authenticator_data: Some(encode_base64(&auth)),
            client_data_json: Some(encode_base64(&client)),
        }],
    }
}

fn carol_vote(challenge_of: &VotePayload) -> Envelope {
    let vote = vote_payload("carol", &binding());
    let (auth, client) = assertion_parts(&challenge_of.challenge().expect("a challenge"));
    let sig = carol().sign(&signed_by_passkey(&auth, &client)).to_vec();
    passkey_vote(&vote, challenge_of, "person:carol:1", sig)
}

/// The bytes dana's passkey signs for her vote (`gen_vectors
/// --es256-message` prints them in base64, to be signed once with the
/// private scalar 0x07...07 should the vote's bytes ever change).
#[allow(dead_code)] // the generator prints it; the tests do not need it
pub fn es256_message() -> Vec<u8> {
    let vote = vote_payload("dana", &binding());
    let (auth, client) = assertion_parts(&vote.challenge().expect("a challenge"));
    signed_by_passkey(&auth, &client)
}

/// dana's ES256 signature (DER) over [`es256_message`].
const DANA_SIG_HEX: &str = "3046022100b32c24b0a84e3c6b8c8be9d57f6ffa88b5894199cb7b59dd368952a6a8ed9dbd022100ccb0c111bad5b84cb8566018cca40875d2d56db2da48295e707ed050b55e5272";

fn dana_vote() -> Envelope {
    let vote = vote_payload("dana", &binding());
    passkey_vote(&vote, &vote, "person:dana:1", hex(DANA_SIG_HEX))
}

fn entry(voter: &str, envelope: Option<&Envelope>) -> PayloadVote {
    PayloadVote {
        voter: voter.into(),
        approved: true,
        at: at(&shifted(ISSUED_AT, -30)),
        envelope: envelope.map(VoteEnvelope::from),
    }
}

/// The grant as a decision of version 2 carrying `votes`.
fn decided(votes: Vec<PayloadVote>) -> ApprovalPayload {
    ApprovalPayload {
        v: 2,
        approver: votes.last().map_or_else(String::new, |v| v.voter.clone()),
        nonce: "ICEiIyQlJicoKSorLC0uLw".into(),
        votes: Some(votes),
        ..grant()
    }
}

/// A vector that checks `needed` signed votes with the people's keys.
fn requiring(description: &str, envelope: Value, needed: usize, expect: Verdict) -> Vector {
    Vector {
        people_keys: Some(people()),
        require_votes: Some(needed),
        ..vector(description, envelope, expect)
    }
}

/// `envelope`, a vote, on its own: its bytes and `expect`.
fn vote_vector(envelope: &Envelope, expect: VoteVerdict) -> VoteVector {
    let payload = lev_approval::decode_base64(&envelope.payload).expect("base64");
    let pae = lev_approval::pae(&envelope.payload_type, &payload);
    VoteVector {
        envelope: json(envelope),
        payload_json: String::from_utf8(payload).expect("a vote payload is UTF-8"),
        pae_hex: hex_of(&pae),
        pae_sha256: sha256_hex(&pae),
        expect,
    }
}

fn valid_vote(voter: &str, kid: &str) -> VoteVerdict {
    VoteVerdict::Valid {
        voter: voter.into(),
        kid: kid.into(),
    }
}

/// Push every vote vector onto `v`.
pub fn generate(v: &mut Vec<(&'static str, Vector)>) {
    let ann_vote = cli_vote("ann", &ann(), "person:ann:1");
    let bob_vote = cli_vote("bob", &bob(), "person:bob:1");
    let two = signed(&decided(vec![
        entry("ann", Some(&ann_vote)),
        entry("bob", Some(&bob_vote)),
    ]));
    v.push((
        "v2_two_signed_votes",
        requiring(
            "a decision of version 2 carrying two people's own signed votes on exactly this call, two required",
            two.clone(),
            2,
            authorized(ARGS),
        ),
    ));
    v.push((
        "v2_two_signed_votes_three_required",
        requiring(
            "the same decision when three people's signed votes are required",
            two.clone(),
            3,
            not_authorized("votes"),
        ),
    ));
    v.push((
        "v2_without_required_votes",
        vector(
            "a decision of version 2 checked without requiring votes: a genuine approval",
            two,
            authorized(ARGS),
        ),
    ));
    v.push((
        "v2_unsigned_votes_required",
        requiring(
            "two unsigned votes (envelope null) where one signed vote is required: the server's word alone",
            signed(&decided(vec![entry("ann", None), entry("bob", None)])),
            1,
            not_authorized("votes"),
        ),
    ));
    v.push((
        "v2_made_up_vote",
        requiring(
            "ann's genuine vote and one for bob signed by a key not registered to him (a server making up a vote)",
            signed(&decided(vec![
                entry("ann", Some(&ann_vote)),
                entry("bob", Some(&cli_vote("bob", &key_untrusted(), "person:bob:1"))),
            ])),
            2,
            not_authorized("votes"),
        ),
    ));
    let mut other = binding();
    other.args_sha256 = sha256_hex(EDITED_ARGS.as_bytes());
    v.push((
        "v2_vote_for_other_args",
        requiring(
            "bob's genuine vote, signed for other args than the decision's, beside ann's",
            signed(&decided(vec![
                entry("ann", Some(&ann_vote)),
                entry(
                    "bob",
                    Some(
                        &sign_vote(&vote_payload("bob", &other), &bob(), "person:bob:1")
                            .expect("a vote"),
                    ),
                ),
            ])),
            2,
            not_authorized("votes"),
        ),
    ));
    v.push((
        "v2_vote_by_another_persons_key",
        requiring(
            "a vote naming ann, signed by bob's registered key",
            signed(&decided(vec![entry(
                "ann",
                Some(&cli_vote("ann", &bob(), "person:bob:1")),
            )])),
            1,
            not_authorized("votes"),
        ),
    ));
    v.push((
        "v2_vote_under_another_voter",
        requiring(
            "ann's genuine vote listed a second time as bob's",
            signed(&decided(vec![
                entry("ann", Some(&ann_vote)),
                entry("bob", Some(&ann_vote)),
            ])),
            2,
            not_authorized("votes"),
        ),
    ));
    let carol_own = vote_payload("carol", &binding());
    v.push((
        "v2_passkey_eddsa_vote",
        requiring(
            "ann's vote and carol's, signed by her passkey (EdDSA, a WebAuthn assertion whose challenge is the SHA-256 of the vote's PAE)",
            signed(&decided(vec![
                entry("ann", Some(&ann_vote)),
                entry("carol", Some(&carol_vote(&carol_own))),
            ])),
            2,
            authorized(ARGS),
        ),
    ));
    v.push((
        "v2_passkey_wrong_challenge",
        requiring(
            "carol's passkey assertion made for another vote's challenge, put on this one",
            signed(&decided(vec![entry(
                "carol",
                Some(&carol_vote(&vote_payload("carol", &other))),
            )])),
            1,
            not_authorized("votes"),
        ),
    ));
    v.push((
        "v2_passkey_es256_vote",
        requiring(
            "ann's vote and dana's, signed by her passkey (ES256, DER)",
            signed(&decided(vec![
                entry("ann", Some(&ann_vote)),
                entry("dana", Some(&dana_vote())),
            ])),
            2,
            authorized(ARGS),
        ),
    ));
    v.push((
        "v2_payload_under_version_1_type",
        vector(
            "a payload of version 2 signed under the version 1 payload type",
            json(&sign_envelope(
                APPROVAL_PAYLOAD_TYPE,
                &decided(vec![entry("ann", Some(&ann_vote))])
                    .to_bytes()
                    .expect("a payload"),
                &super::vector_set::key_a(),
            )),
            invalid("version"),
        ),
    ));
    v.push((
        "v1_payload_under_version_2_type",
        vector(
            "a payload of version 1 (no votes) signed under the version 2 payload type",
            json(&sign_envelope(
                APPROVAL_PAYLOAD_TYPE_V2,
                &grant().to_bytes().expect("a payload"),
                &super::vector_set::key_a(),
            )),
            invalid("version"),
        ),
    ));
    let with_votes = decided(vec![entry("ann", None)]);
    v.push((
        "v2_vote_with_unknown_field",
        vector(
            "a signed payload of version 2 whose vote carries a field votes do not have",
            json(&sign_envelope(
                APPROVAL_PAYLOAD_TYPE_V2,
                &edited_text(&with_votes, |t| {
                    t.replace(r#""envelope":null"#, r#""envelope":null,"weight":2"#)
                }),
                &super::vector_set::key_a(),
            )),
            invalid("payload"),
        ),
    ));
    v.push((
        "v2_vote_without_envelope_field",
        vector(
            "a signed payload of version 2 whose vote leaves out `envelope` (it must be present, null when unsigned)",
            json(&sign_envelope(
                APPROVAL_PAYLOAD_TYPE_V2,
                &edited_text(&with_votes, |t| t.replace(r#","envelope":null"#, "")),
                &super::vector_set::key_a(),
            )),
            invalid("payload"),
        ),
    ));
    // ---- vote envelopes on their own, and a denial of version 2 ----
    v.push((
        "vote_envelope_cli_key",
        Vector {
            vote: Some(vote_vector(&ann_vote, valid_vote("ann", "person:ann:1"))),
            ..requiring(
                "ann's vote on its own: the DSSE envelope of type application/vnd.lev.vote+json; version=1 that `lev respond` signs with her `lev key init` key (Ed25519 over the PAE of the payload below), carried by a decision of version 2 that needs one signed vote",
                signed(&decided(vec![entry("ann", Some(&ann_vote))])),
                1,
                authorized(ARGS),
            )
        },
    ));
    let mut edited = ann_vote.clone();
    {
        let mut vote = vote_payload("ann", &binding());
        vote.issued_at += time::Duration::seconds(1);
        edited.payload = encode_base64(&vote.to_bytes().expect("a vote"));
    }
    v.push((
        "vote_envelope_payload_edited",
        Vector {
            vote: Some(vote_vector(
                &edited,
                VoteVerdict::Invalid {
                    error: "not_signed".into(),
                },
            )),
            ..requiring(
                "ann's vote with its issued_at moved by one second after she signed it: the PAE below is not what her signature covers, so the vote is not hers, and the decision carrying it has no signed vote",
                signed(&decided(vec![entry("ann", Some(&edited))])),
                1,
                not_authorized("votes"),
            )
        },
    ));
    let deny_vote = sign_vote(
        &VotePayload::for_call(
            &binding(),
            false,
            "once",
            "",
            "ann",
            at(&shifted(ISSUED_AT, -40)),
        ),
        &ann(),
        "person:ann:1",
    )
    .expect("a vote");
    v.push((
        "v2_denial",
        Vector {
            vote: Some(vote_vector(&deny_vote, valid_vote("ann", "person:ann:1"))),
            ..requiring(
                "a denial of version 2 carrying ann's own signed deny: genuine, and it authorizes nothing, however many signed votes are required",
                signed(&ApprovalPayload {
                    approved: false,
                    covered_capabilities: vec![],
                    reason: "not on a shared runner".into(),
                    ..decided(vec![PayloadVote {
                        approved: false,
                        ..entry("ann", Some(&deny_vote))
                    }])
                }),
                1,
                not_authorized("denied"),
            )
        },
    ));
}
