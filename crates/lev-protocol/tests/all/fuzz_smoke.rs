//! The `protocol` fuzz target's body (`fuzz/body/protocol.rs`) over the
//! committed fixtures and a few thousand random and mutated inputs, so CI
//! checks on stable Rust what `cargo fuzz run protocol` checks at length: no
//! input makes a decoder panic.

#![allow(clippy::unwrap_used)] // a test that cannot read its fixtures has failed

#[path = "../../../../fuzz/body/protocol.rs"]
mod body;
#[path = "../../../../fuzz/body/mutate.rs"]
mod mutate;

use proptest::prelude::*;

/// The corpus: every committed fixture, and hook events.
fn seeds() -> Vec<Vec<u8>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut seeds = Vec::new();
    for dir in std::fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap().path();
        for file in std::fs::read_dir(&dir).unwrap() {
            seeds.push(std::fs::read(file.unwrap().path()).unwrap());
        }
    }
    seeds.extend([
        br#"{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Bash","tool_input":{"command":"ls"}}"#.to_vec(),
        br#"{"hook_event_name":"PermissionRequest","session_id":"s","tool_name":"Write","tool_input":{"file_path":"/tmp/x","content":"hi"},"permission_mode":"default"}"#.to_vec(),
        br#"{"request_id":"ir_1","approved":false,"scope":"once","feedback":"use --dry-run"}"#.to_vec(),
        br#"{"request_id":"ir_1","choice_index":2}"#.to_vec(),
        br#"{"a":1,"a":2}"#.to_vec(),
    ]);
    seeds
}

/// The seeds and the committed corpus (`fuzz/corpus/protocol/`, what `cargo
/// fuzz` found and kept, and `fuzz/regressions/protocol/`).
fn seeds_and_corpus() -> Vec<Vec<u8>> {
    let mut all = seeds();
    all.extend(mutate::committed("protocol"));
    all
}

#[test]
fn the_committed_corpus_never_panics() {
    for input in mutate::committed("protocol") {
        body::run(&input);
    }
}

#[test]
fn the_seeds_reach_every_decoder() {
    let mut reached = body::Reached::default();
    for seed in seeds() {
        let r = body::run(&seed);
        reached.strict_json |= r.strict_json;
        reached.client_msg |= r.client_msg;
        reached.hook_event |= r.hook_event;
        reached.valid_request |= r.valid_request;
        reached.valid_response |= r.valid_response;
    }
    assert!(
        reached.strict_json
            && reached.client_msg
            && reached.hook_event
            && reached.valid_request
            && reached.valid_response,
        "a decoder no seed reaches: {reached:?}"
    );
}

fn mutated() -> impl Strategy<Value = Vec<u8>> {
    mutate::mutated(seeds_and_corpus(), 8)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        body::run(&data);
    }

    #[test]
    fn mutated_fixtures_never_panic(data in mutated()) {
        body::run(&data);
    }

    #[test]
    fn random_json_shaped_text_never_panics(data in r#"[{}\[\]":,0-9a-zA-Z_=+/ -]{0,300}"#) {
        body::run(data.as_bytes());
    }
}
