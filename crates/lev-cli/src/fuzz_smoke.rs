//! The `codex` and `mcp` fuzz targets' bodies (`fuzz/body/codex.rs`,
//! `fuzz/body/mcp.rs`) on stable Rust: over their committed corpora and a
//! few thousand mutations, so CI checks what `cargo fuzz run`
//! checks at length. (lev-cli is a binary: the bodies reach its modules from
//! inside.)

#[path = "../../../fuzz/body/codex.rs"]
mod codex_body;
#[path = "../../../fuzz/body/mcp.rs"]
mod mcp_body;
#[path = "../../../fuzz/body/mutate.rs"]
mod mutate;

use proptest::prelude::*;

/// The committed corpus: seeds as Codex 0.171 and MCP clients send them
/// (approval requests, hook events with an approver's edit on the second
/// line, argvs, command lines; both MCP eras' openings, the two tools'
/// calls, a cancellation), and what `cargo fuzz` found and kept.
fn all_codex() -> Vec<Vec<u8>> {
    mutate::committed("codex")
}

fn all_mcp() -> Vec<Vec<u8>> {
    mutate::committed("mcp")
}

#[test]
fn the_codex_seeds_and_corpus_reach_every_decoder() {
    let mut reached = codex_body::Reached::default();
    for input in all_codex() {
        let r = codex_body::run(&input);
        reached.mapped |= r.mapped;
        reached.hook_call |= r.hook_call;
        reached.rewritten |= r.rewritten;
        reached.simple |= r.simple;
    }
    assert!(
        reached.mapped && reached.hook_call && reached.rewritten && reached.simple,
        "a decoder no input reaches: {reached:?}"
    );
}

#[test]
fn the_mcp_seeds_and_corpus_reach_every_decoder() {
    let mut reached = mcp_body::Reached::default();
    for input in all_mcp() {
        let r = mcp_body::run(&input);
        reached.message |= r.message;
        reached.opens |= r.opens;
        reached.approval_prompt |= r.approval_prompt;
        reached.ask_human |= r.ask_human;
    }
    assert!(
        reached.message && reached.opens && reached.approval_prompt && reached.ask_human,
        "a decoder no input reaches: {reached:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn codex_mutations_never_break_a_promise(data in mutate::mutated(all_codex(), 8)) {
        codex_body::run(&data);
    }

    #[test]
    fn mcp_mutations_never_panic(data in mutate::mutated(all_mcp(), 8)) {
        mcp_body::run(&data);
    }

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        codex_body::run(&data);
        mcp_body::run(&data);
    }
}
