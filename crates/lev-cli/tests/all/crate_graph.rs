//! ARCHITECTURE.md's crate graph is the workspace's: every arrow it draws
//! is a dependency in a crate's `Cargo.toml` and every dependency between
//! lev's crates is drawn, and each crate depends only on crates of a lower
//! layer of its table.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Each workspace crate's lev dependencies (`[dependencies]` only).
fn from_manifests() -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(root().join("crates")).unwrap() {
        let manifest = entry.unwrap().path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        let table: toml::Table = toml::from_str(&text).unwrap();
        let name = table["package"]["name"].as_str().unwrap().to_owned();
        let deps = table
            .get("dependencies")
            .and_then(toml::Value::as_table)
            .map(|deps| {
                deps.keys()
                    .filter(|k| k.starts_with("lev-"))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        out.insert(name, deps);
    }
    out
}

/// The crate graph's code block and layer table in ARCHITECTURE.md.
fn from_architecture() -> (BTreeMap<String, BTreeSet<String>>, BTreeMap<String, usize>) {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let start = text
        .find("Every arrow between lev's")
        .expect("ARCHITECTURE.md names every arrow between lev's crates");
    let block = text[start..].split("```").nth(1).unwrap();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut current = String::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let rest = match line.split_once("──▶") {
            Some((from, rest)) if !from.trim().is_empty() => {
                current = from.split_whitespace().next().unwrap().to_owned();
                rest
            }
            _ => line,
        };
        let deps = graph.entry(current.clone()).or_default();
        deps.extend(
            rest.split([',', ' '])
                .filter(|w| w.starts_with("lev-"))
                .map(str::to_owned),
        );
    }
    let section = text[start..].split("\n## ").next().unwrap();
    let mut layers = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Ok(layer) = cells[1].parse::<usize>() else {
            continue;
        };
        let names = cells[2].split('`').skip(1).step_by(2);
        for name in names.filter(|n| n.starts_with("lev-") && !n.contains(' ')) {
            layers.insert(name.to_owned(), layer);
        }
    }
    (graph, layers)
}

#[test]
fn architecture_draws_every_arrow_between_crates() {
    let manifests = from_manifests();
    let (drawn, layers) = from_architecture();
    assert_eq!(
        drawn, manifests,
        "ARCHITECTURE.md's crate graph (left) differs from the crates' [dependencies] (right)"
    );
    for (name, deps) in &manifests {
        let layer = layers
            .get(name)
            .unwrap_or_else(|| panic!("{name} has no layer in ARCHITECTURE.md's table"));
        for dep in deps {
            assert!(
                layers[dep] < *layer,
                "{name} (layer {layer}) depends on {dep} (layer {})",
                layers[dep]
            );
        }
    }
}
