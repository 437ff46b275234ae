//! Write lev-approval's test vectors to `crates/lev-approval/tests/vectors/`.
//!
//! Run: `cargo run -p lev-approval --example gen_vectors`. The output is
//! deterministic; `tests/all.rs` checks the committed files against it.

#![allow(clippy::expect_used, clippy::unwrap_used)]

#[path = "../tests/all/vector_set.rs"]
mod vector_set;
#[path = "../tests/all/vector_votes.rs"]
mod vector_votes;

use std::collections::BTreeSet;
use std::path::Path;

fn main() -> std::io::Result<()> {
    if std::env::args().any(|a| a == "--es256-message") {
        println!(
            "{}",
            lev_approval::encode_base64(&vector_votes::es256_message())
        );
        return Ok(());
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(vector_set::DIR);
    std::fs::create_dir_all(&dir)?;
    let vectors = vector_set::generate();
    let mut names = BTreeSet::new();
    for (name, vector) in &vectors {
        assert!(names.insert(format!("{name}.json")), "{name} made twice");
        let got = vector_set::evaluate(vector);
        assert_eq!(got, vector.expect, "{name}: the verifier disagrees");
        if let Some(vote) = &vector.vote {
            assert_eq!(
                vector_set::evaluate_vote(vector).as_ref(),
                Some(&vote.expect),
                "{name}: the vote verifier disagrees"
            );
            vector_set::check_vote_bytes(vote).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        std::fs::write(
            dir.join(format!("{name}.json")),
            vector_set::to_file_text(vector),
        )?;
    }
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
        if file.ends_with(".json") && !names.contains(file) {
            std::fs::remove_file(&path)?;
            eprintln!("removed stale {}", path.display());
        }
    }
    eprintln!(
        "wrote {} vectors to {} (`{}`)",
        vectors.len(),
        dir.display(),
        vector_set::REGENERATE
    );
    Ok(())
}
