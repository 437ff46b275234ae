//! lev-server's floors, kept: every module of `src/` sits on the floor
//! ARCHITECTURE.md's table gives it ("lev-server's floors"), and imports
//! only from its own floor or below, with no import loop between the
//! table's modules. The table is read out of ARCHITECTURE.md, so the
//! document and the code cannot drift: a module missing from the table, an
//! entry no module matches, an upward import and a loop all fail here.
//!
//! An import is any `crate::` path in a file (its tests included) and any
//! `super::` path outside its tests, resolved to the deepest module of
//! `src/` it names; a module's floor is the floor of the table's longest
//! entry that is it or holds it (`slack::config` before `slack`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The table's heading in ARCHITECTURE.md.
const HEADING: &str = "lev-server's floors";

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The floor table: module path (`lib` for the crate root) to floor.
fn read_table(doc: &str) -> BTreeMap<String, u32> {
    let mut lines = doc.lines();
    lines
        .by_ref()
        .find(|l| l.starts_with('#') && l.contains(HEADING))
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no heading naming {HEADING:?}"));
    let mut table = BTreeMap::new();
    for line in lines.take_while(|l| !l.starts_with('#')) {
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').collect();
        let [floor, module, ..] = cells.as_slice() else {
            continue;
        };
        let Ok(floor) = floor.trim().parse::<u32>() else {
            continue; // the header row and its rule
        };
        for name in module.split(',') {
            let name = name.trim().trim_matches('`').trim_end_matches('/');
            assert!(!name.is_empty(), "an empty module name in the row {line:?}");
            let old = table.insert(name.to_owned(), floor);
            assert!(old.is_none(), "{name} is in the table twice");
        }
    }
    assert!(!table.is_empty(), "the table under {HEADING:?} has no rows");
    table
}

/// Every `.rs` file under `dir`, as (module path, text).
fn modules(src: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            modules(src, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            let name = if parts == ["lib"] {
                "lib".to_owned()
            } else {
                parts.join("::")
            };
            out.insert(name, std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// `text` without its line comments (doc comments name modules freely).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            // `://` in a string (a URL) is no comment.
            Some(i) if !l[..i].ends_with(':') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The paths after each `prefix` in `code`: `crate::a::b` gives `[a, b]`,
/// `crate::{a::b, c}` gives `[a, b]` and `[c]`.
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = code[from..].find(prefix).map(|i| i + from) {
        from = i + prefix.len();
        if i > 0 && (is_ident(bytes[i - 1]) || bytes[i - 1] == b':') {
            continue; // `foo_crate::`, or `super::super::` counted once
        }
        let rest = &code[from..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                out.push(segments(item.trim()));
            }
        } else {
            out.push(segments(rest));
        }
    }
    out.retain(|p| !p.is_empty());
    out
}

/// The leading `a::b::c` of `text`, stopping at anything else.
fn segments(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        let end = rest
            .bytes()
            .position(|b| !is_ident(b))
            .unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        out.push(rest[..end].to_owned());
        match rest[end..].strip_prefix("::") {
            Some(more) => rest = more,
            None => break,
        }
    }
    out
}

/// The deepest module of `known` that `path` (from the crate root) names;
/// `lib` for an item of the root.
fn resolve(known: &BTreeMap<String, String>, path: &[String]) -> String {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|m| known.contains_key(m))
        .unwrap_or_else(|| "lib".to_owned())
}

/// The module's table entry: the longest entry that is it or holds it.
fn entry_of<'t>(table: &'t BTreeMap<String, u32>, module: &str) -> Option<(&'t str, u32)> {
    let parts: Vec<&str> = module.split("::").collect();
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("::"))
        .find_map(|m| table.get_key_value(&m))
        .map(|(k, v)| (k.as_str(), *v))
}

/// Each module's imports, as the modules they resolve to.
fn imports(known: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for (module, text) in known {
        let code = code_of(text);
        let mut targets: BTreeSet<String> = paths_after(&code, "crate::")
            .iter()
            .map(|p| resolve(known, p))
            .collect();
        // `super::` outside the tests: relative to the file's own module.
        let outside_tests = code.split("#[cfg(test)]").next().unwrap_or_default();
        let here: Vec<String> = if module == "lib" {
            Vec::new()
        } else {
            module.split("::").map(str::to_owned).collect()
        };
        for path in paths_after(outside_tests, "super::") {
            let mut base = here.clone();
            let mut path = path.as_slice();
            base.pop();
            while path.first().is_some_and(|s| s == "super") {
                base.pop();
                path = &path[1..];
            }
            base.extend(path.iter().cloned());
            targets.insert(resolve(known, &base));
        }
        targets.remove(module);
        out.insert(module.clone(), targets);
    }
    out
}

/// The problems of the code against the table, one line each.
fn check(table: &BTreeMap<String, u32>, known: &BTreeMap<String, String>) -> Vec<String> {
    let mut problems = Vec::new();
    for module in known.keys() {
        if entry_of(table, module).is_none() {
            problems.push(format!(
                "{module} is missing from ARCHITECTURE.md's table ({HEADING}): give it a floor"
            ));
        }
    }
    for name in table.keys() {
        let holds = known
            .keys()
            .any(|m| m == name || m.starts_with(&format!("{name}::")));
        if !holds {
            problems.push(format!(
                "{name} is in ARCHITECTURE.md's table ({HEADING}) but no module of src/ is: \
                 remove its row"
            ));
        }
    }
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (module, targets) in imports(known) {
        let Some((from, floor)) = entry_of(table, &module) else {
            continue;
        };
        for target in &targets {
            let Some((to, target_floor)) = entry_of(table, target) else {
                continue;
            };
            if target_floor > floor {
                problems.push(format!(
                    "{module} (floor {floor}) imports {target} (floor {target_floor}), a floor \
                     above it"
                ));
            }
            if from != to {
                edges.entry(from).or_default().insert(to);
            }
        }
    }
    if let Some(cycle) = find_cycle(&edges) {
        problems.push(format!(
            "an import loop between the table's modules: {}",
            cycle.join(" -> ")
        ));
    }
    problems
}

/// A loop in `edges`, if there is one, as the modules along it.
fn find_cycle<'a>(edges: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Option<Vec<&'a str>> {
    fn visit<'a>(
        node: &'a str,
        edges: &BTreeMap<&'a str, BTreeSet<&'a str>>,
        done: &mut BTreeSet<&'a str>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<&'a str>> {
        if let Some(i) = path.iter().position(|n| *n == node) {
            let mut cycle = path[i..].to_vec();
            cycle.push(node);
            return Some(cycle);
        }
        if !done.insert(node) {
            return None;
        }
        path.push(node);
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, done, path) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|n| visit(n, edges, &mut done, &mut Vec::new()))
}

#[test]
fn every_module_imports_only_its_floor_and_below() {
    let dir = manifest_dir();
    let doc = std::fs::read_to_string(dir.join("../../ARCHITECTURE.md")).unwrap();
    let table = read_table(&doc);
    let mut known = BTreeMap::new();
    modules(&dir.join("src"), &dir.join("src"), &mut known);
    let problems = check(&table, &known);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The check itself: an upward import, a loop on one floor, a module the
/// table lacks and a row no module matches are each found.
#[test]
fn the_floor_check_finds_what_it_is_for() {
    let table = read_table(
        "### lev-server's floors\n| Floor | Module | Role |\n|---|---|---|\n\
         | 0 | `low`, `mid::pure` | x |\n| 1 | `mid`, `side` | y |\n| 2 | `lib`, `gone` | z |\n",
    );
    let known: BTreeMap<String, String> = [
        ("lib", "mod low;"),
        ("low", "use crate::mid::X;"),
        ("mid", "use crate::side::Y;"),
        ("mid::pure", "use super::super::low::Z;"),
        ("side", "fn f() { crate::mid::g() }"),
        ("extra", ""),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let problems = check(&table, &known).join("\n");
    assert!(
        problems.contains("low (floor 0) imports mid (floor 1)"),
        "{problems}"
    );
    assert!(problems.contains("import loop"), "{problems}");
    assert!(problems.contains("extra is missing"), "{problems}");
    assert!(
        problems.contains("gone is in ARCHITECTURE.md's table"),
        "{problems}"
    );
    assert!(!problems.contains("mid::pure (floor"), "{problems}");
}
