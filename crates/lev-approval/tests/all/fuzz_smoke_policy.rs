//! The `policy` fuzz target's body (`fuzz/body/policy.rs`) over the example
//! policy and a few thousand mutations of it, on stable Rust: no policy file
//! makes the parser or the policy's answers panic.

#[path = "../../../../fuzz/body/policy.rs"]
mod body;

use proptest::prelude::*;

fn seeds() -> Vec<Vec<u8>> {
    let example =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/policy.toml");
    vec![
        std::fs::read(example).unwrap(),
        br#"default = "ask"
[[rule]]
tool = "shell"
args = { "/argv/0" = "^git$", "/argv/1" = "^(status|log)$" }
decision = "allow"
"#
        .to_vec(),
        br#"[sandbox_modes]
"read-only" = ["fs-read"]
[[tool]]
name = "shell"
requires = ["proc-exec"]
"#
        .to_vec(),
        // A quorum (SPEC section 13): groups, approvers, escalation, signed votes.
        br#"[groups]
oncall = ["ann", "bob", "carol"]
leads = ["dana"]
[[tool]]
name = "drop_*"
approvals = 3
[[rule]]
tool = "deploy*"
decision = "ask"
approvals = 2
approvers = ["group:oncall", "erin"]
escalate_after_s = 600
escalate_to = ["group:leads"]
require_signed_votes = true
"#
        .to_vec(),
    ]
}

/// The seeds and the committed corpus (`fuzz/corpus/policy/`, what `cargo
/// fuzz` found and kept, and `fuzz/regressions/policy/`).
fn seeds_and_corpus() -> Vec<Vec<u8>> {
    let mut all = seeds();
    all.extend(crate::mutate::committed("policy"));
    all
}

#[test]
fn the_committed_corpus_never_panics() {
    for input in crate::mutate::committed("policy") {
        body::run(&input);
    }
}

#[test]
fn the_seeds_are_policies() {
    for (i, seed) in seeds().iter().enumerate() {
        assert!(body::run(seed), "seed {i} does not parse");
    }
}

fn mutated() -> impl Strategy<Value = Vec<u8>> {
    crate::mutate::mutated(seeds_and_corpus(), 6)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn mutated_policies_never_panic(data in mutated()) {
        body::run(&data);
    }

    #[test]
    fn toml_shaped_text_never_panics(data in "[\\[\\]a-z_.=\" \n0-9^$()|*+?\\\\-]{0,300}") {
        body::run(data.as_bytes());
    }
}
