//! The `notify` fuzz target's body (`fuzz/body/notify.rs`) on stable Rust,
//! over Slack-shaped seeds (a click, a modal submission, signature headers)
//! and every interaction fixture of lev-protocol rendered for Slack, then a
//! few thousand mutations of them: nothing panics, and rendered messages
//! stay within Slack's limits.

#[path = "../../../../fuzz/body/notify.rs"]
mod body;

use proptest::prelude::*;

fn form(json: &str) -> Vec<u8> {
    let mut out = b"payload=".to_vec();
    for b in json.bytes() {
        if b.is_ascii_alphanumeric() {
            out.push(b);
        } else {
            out.extend_from_slice(format!("%{b:02X}").as_bytes());
        }
    }
    out
}

fn seeds() -> Vec<Vec<u8>> {
    let mut seeds = vec![
        form(
            r#"{"type":"block_actions","user":{"id":"U1"},"trigger_id":"t","response_url":"https://hooks.slack.com/x","channel":{"id":"C1"},"actions":[{"action_id":"approve_once","value":"ir_1"}]}"#,
        ),
        form(
            r#"{"type":"view_submission","user":{"id":"U1"},"view":{"callback_id":"lev_deny_feedback","private_metadata":"ir_1","state":{"values":{"feedback":{"text":{"type":"plain_text_input","value":"no"}}}}}}"#,
        ),
        b"1531420618\nv0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503\ntoken=xyz&team_id=T1".to_vec(),
        b"1614265330\nv1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=\n{\"test\": 2432232314}".to_vec(),
    ];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../lev-protocol/tests/fixtures/interaction");
    for entry in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let interaction: serde_json::Value = serde_json::from_str(&text).unwrap();
        let view = serde_json::json!({ "request": interaction });
        seeds.push(view.to_string().into_bytes());
    }
    seeds
}

/// The seeds and the committed corpus (`fuzz/corpus/notify/`, what `cargo
/// fuzz` found and kept, and `fuzz/regressions/notify/`).
fn seeds_and_corpus() -> Vec<Vec<u8>> {
    let mut all = seeds();
    all.extend(crate::mutate::committed("notify"));
    all
}

#[test]
fn the_committed_corpus_never_panics() {
    for input in crate::mutate::committed("notify") {
        body::run(&input);
    }
}

#[test]
fn the_seeds_decode() {
    let seeds = seeds();
    assert!(body::run(&seeds[0]), "a click");
    assert!(body::run(&seeds[1]), "a submission");
    for seed in &seeds[2..] {
        body::run(seed);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn mutations_never_panic(data in crate::mutate::mutated(seeds_and_corpus(), 8)) {
        body::run(&data);
    }

    #[test]
    fn any_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        body::run(&data);
    }
}
