//! A test of the source itself: how the modules of `src/` name each other (`crate::…` and
//! `super::…` paths), so that each layer can be read, tested and changed without the ones above it.
//!
//! - No circle among the modules (each file a module: `segment::ranges`, `settings::parse`), nor
//!   among the top-level ones (a folder and the modules its files name).
//! - Every module is in one of the layers of `LAYERS`, and names no module of a layer above its own.
//! - The modules of the pure layer do not use pgrx (PostgreSQL's server API): plain `#[test]`s test
//!   them, and they stay that way.
//!
//! Not counted: `lib.rs`, which wires them all; this file (its examples name modules in strings);
//! a folder's `mod.rs` naming its own parts (it declares them); test modules (from `#[cfg(test)]`
//! or `#[cfg(any(test` on), which may name what they test with.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, lowest first: each module's layer is that of the longest entry that names it or a
/// folder above it.
const LAYERS: [(&str, &[&str]); 5] = [
    (
        "pure: no PostgreSQL server API",
        &[
            "base32",
            "clock::tick",
            "families",
            "layout",
            "mark::file_format",
            "mask::ff1",
            "objectid::id",
            "remote",
            "seq::mix",
            "seqlock",
            "settings::parse",
            "uuid7::bytes",
            "worker::backoff",
        ],
    ),
    (
        "the server's services, wrapped: errors, settings, shared memory, tables, remote status",
        &["authority_call", "c_function", "clock", "errors", "random", "remote::status", "settings", "shmem", "sigterm", "tables"],
    ),
    ("the engine of time-based ids and its durable marks; the database worker", &["engine", "mark", "worker"]),
    (
        "families, SQL functions and workers",
        &["clock_worker", "compose", "decode", "mask", "migrate", "node", "objectid", "segment", "seq", "snowflake", "status", "text_form", "uuid7"],
    ),
    ("the database worker's services, declared", &["services"]),
];

/// Every module of `src/` (its path, `a::b`) and the file that holds it.
fn modules(src: &Path) -> BTreeMap<String, std::path::PathBuf> {
    let mut found = BTreeMap::new();
    let mut files = vec![src.to_path_buf()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|entry| entry.unwrap().path()));
            continue;
        }
        if path.extension().is_none_or(|ext| ext != "rs") || path == src.join("lib.rs") || path == src.join("module_graph.rs") {
            continue;
        }
        let mut parts: Vec<String> = path.strip_prefix(src).unwrap().with_extension("").iter().map(|p| p.to_str().unwrap().to_string()).collect();
        if parts.last().is_some_and(|last| last == "mod") {
            parts.pop();
        }
        found.insert(parts.join("::"), path);
    }
    found
}

/// A file's code: without its test modules and its comments (which may name any module).
fn code_of(text: &str) -> String {
    let end = ["#[cfg(test)]", "#[cfg(any(test"].iter().filter_map(|marker| text.find(marker)).min().unwrap_or(text.len());
    text[..end].lines().map(|line| line.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// The paths after each `prefix::` of the code, as their segments: `prefix::a::b` and each path of
/// `prefix::{a, b::c}`.
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let segments = |path: &str| -> Vec<String> {
        path.trim()
            .split("::")
            .map(|s| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>())
            .take_while(|s| !s.is_empty())
            .collect()
    };
    let mut found = Vec::new();
    let marker = format!("{prefix}::");
    for (at, _) in code.match_indices(&marker) {
        // Only a whole word: `super::` must not match inside `my_super::`.
        if code[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[at + marker.len()..];
        match rest.strip_prefix('{') {
            Some(group) => {
                // The group's top-level paths: split at commas outside nested braces.
                let (mut depth, mut start) = (0, 0);
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            found.push(segments(&group[start..i]));
                            break;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            found.push(segments(&group[start..i]));
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
            }
            None => found.push(segments(rest)),
        }
    }
    found.retain(|path| !path.is_empty() && path[0] != "self");
    found
}

/// The module a path names: its longest prefix that is a module, else `fallback`.
fn module_named(modules: &BTreeMap<String, std::path::PathBuf>, base: &[String], path: &[String]) -> Option<String> {
    let full: Vec<String> = base.iter().chain(path).cloned().collect();
    (1..=full.len()).rev().map(|n| full[..n].join("::")).find(|candidate| modules.contains_key(candidate))
}

/// Every module and the modules its code names.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules(src);
    let mut graph = BTreeMap::new();
    for (module, path) in &modules {
        let code = code_of(&std::fs::read_to_string(path).unwrap());
        let parts: Vec<String> = module.split("::").map(String::from).collect();
        let parent = &parts[..parts.len() - 1];
        let mut named = BTreeSet::new();
        for path in paths_after(&code, "crate") {
            named.extend(module_named(&modules, &[], &path));
        }
        for path in paths_after(&code, "super") {
            // `super::x` in module `a::b` is `a::x`, or `a` itself when `x` is one of its items.
            named.extend(module_named(&modules, parent, &path).or_else(|| (!parent.is_empty()).then(|| parent.join("::"))));
        }
        named.retain(|m| m != module && !m.starts_with(&format!("{module}::")));
        graph.insert(module.clone(), named);
    }
    graph
}

/// The same graph between top-level modules (folders as one).
fn top_level(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeMap<String, BTreeSet<String>> {
    let top = |m: &str| m.split("::").next().unwrap().to_string();
    let mut folded: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, named) in graph {
        let entry = folded.entry(top(module)).or_default();
        entry.extend(named.iter().map(|m| top(m)).filter(|m| *m != top(module)));
    }
    folded
}

/// A circle of the graph, as the modules along it (the first repeated at the end), if any.
fn find_circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(module: &str, graph: &BTreeMap<String, BTreeSet<String>>, done: &mut BTreeSet<String>, path: &mut Vec<String>) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|m| m == module) {
            let mut circle = path[at..].to_vec();
            circle.push(module.to_string());
            return Some(circle);
        }
        if !done.insert(module.to_string()) {
            return None;
        }
        path.push(module.to_string());
        for next in graph.get(module).into_iter().flatten() {
            if let Some(circle) = visit(next, graph, done, path) {
                return Some(circle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|module| visit(module, graph, &mut done, &mut Vec::new()))
}

/// The layer of a module (its index in `LAYERS`), if any entry covers it.
fn layer_of(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .enumerate()
        .flat_map(|(layer, (_, entries))| entries.iter().map(move |entry| (layer, *entry)))
        .filter(|(_, entry)| module == *entry || module.starts_with(&format!("{entry}::")))
        .max_by_key(|(_, entry)| entry.len())
        .map(|(layer, _)| layer)
}

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_module_names_a_module_that_names_it_back() {
    let graph = module_graph(&src());
    assert!(graph.len() > 40 && graph["engine"].contains("shmem") && graph["mark::wal"].contains("mark::start"), "the graph was read: {graph:?}");
    if let Some(circle) = find_circle(&graph) {
        panic!("modules in a circle: {}", circle.join(" -> "));
    }
    let top = top_level(&graph);
    if let Some(circle) = find_circle(&top) {
        panic!("top-level modules in a circle: {}", circle.join(" -> "));
    }
    // The database worker's two services meet only in `services`, which lists them.
    assert!(!top["seq"].contains("segment") && !top["segment"].contains("seq"), "{:?} {:?}", top["seq"], top["segment"]);
    assert!(top["services"].contains("worker") && !top["worker"].contains("segment") && !top["worker"].contains("seq"));
}

#[test]
fn no_module_names_one_of_a_layer_above_its_own() {
    let graph = module_graph(&src());
    let mut wrong = Vec::new();
    for (module, named) in &graph {
        let Some(layer) = layer_of(module) else {
            wrong.push(format!("{module} is in no layer of LAYERS"));
            continue;
        };
        for other in named {
            if layer_of(other).is_some_and(|other_layer| other_layer > layer) {
                wrong.push(format!("{module} ({}) names {other} ({})", LAYERS[layer].0, LAYERS[layer_of(other).unwrap()].0));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_pure_layer_does_not_use_pgrx() {
    let modules = modules(&src());
    let pure: Vec<&String> = modules.keys().filter(|m| layer_of(m) == Some(0)).collect();
    assert!(pure.len() >= 10, "{pure:?}");
    for module in pure {
        let code = code_of(&std::fs::read_to_string(&modules[module]).unwrap());
        assert!(!code.contains("pgrx") && !code.contains("pg_sys"), "{module} is in the pure layer but uses pgrx");
    }
}

#[test]
fn a_circle_is_found() {
    let named = |pairs: &[(&str, &str)]| -> BTreeMap<String, BTreeSet<String>> {
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, to) in pairs {
            graph.entry(from.to_string()).or_default().insert(to.to_string());
        }
        graph
    };
    assert_eq!(find_circle(&named(&[("a", "b"), ("b", "c"), ("a", "c")])), None);
    assert_eq!(find_circle(&named(&[("a", "b"), ("b", "c"), ("c", "a")])).map(|c| c.len()), Some(4));
    assert_eq!(top_level(&named(&[("a::x", "a::y"), ("a::y", "b")])), named(&[("a", "b")]));
    let paths = |code: &str, prefix: &str| paths_after(code, prefix).into_iter().map(|p| p.join("::")).collect::<Vec<_>>();
    assert_eq!(
        paths("use crate::engine::Generator;\nuse crate::{clock, errors::raise, shmem::{self, X}};\nlet s = crate::settings::config();", "crate"),
        ["engine::Generator", "clock", "errors::raise", "shmem", "settings::config"]
    );
    assert_eq!(paths("use super::slot::{slots, Slot};\nlet x = my_super::y;", "super"), ["slot"]);
    assert_eq!(code_of("use crate::a; // crate::b\n#[cfg(test)]\nmod tests { use crate::c; }"), "use crate::a; ");
    assert_eq!(layer_of("settings::parse"), Some(0));
    assert_eq!(layer_of("settings::load"), Some(1));
    assert_eq!(layer_of("segment::next"), Some(3));
    assert_eq!(layer_of("worker::backoff"), Some(0));
    assert_eq!(layer_of("worker::pool"), Some(2));
}
