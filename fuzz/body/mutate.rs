//! The stable smoke tests' mutator (not a fuzz target): a seed, then a few
//! byte edits (overwrite, insert, remove, truncate), as a proptest strategy.
//! Shared by every crate whose tests run a fuzz body on stable.

use proptest::prelude::*;

/// One of `seeds`, with 1 to `max_edits - 1` edits.
pub fn mutated(seeds: Vec<Vec<u8>>, max_edits: usize) -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::sample::select(seeds),
        proptest::collection::vec((any::<usize>(), any::<u8>(), 0u8..4), 1..max_edits),
    )
        .prop_map(|(mut bytes, edits)| {
            for (i, b, op) in edits {
                let at = i % (bytes.len() + 1);
                match op {
                    0 if at < bytes.len() => bytes[at] = b,
                    1 => bytes.insert(at, b),
                    2 if at < bytes.len() => {
                        bytes.remove(at);
                    }
                    _ => bytes.truncate(at),
                }
            }
            bytes
        })
}

/// The committed inputs of fuzz target `target`: its corpus
/// (`fuzz/corpus/TARGET/`, what `cargo fuzz` found and `cmin` kept) and its
/// regressions (`fuzz/regressions/TARGET/`, inputs that once failed). The
/// corpus must be there: a smoke test that found none would prove nothing.
pub fn committed(target: &str) -> Vec<Vec<u8>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut inputs = Vec::new();
    for dir in ["corpus", "regressions"] {
        let dir = root.join(dir).join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if let Ok(bytes) = std::fs::read(entry.path()) {
                inputs.push(bytes);
            }
        }
    }
    assert!(
        !inputs.is_empty(),
        "no committed corpus for fuzz target {target} under {}",
        root.display()
    );
    inputs
}
