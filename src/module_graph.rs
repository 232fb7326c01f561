//! A test of the source itself: the modules of `src/` name each other (`crate::…` paths) without a
//! circle, so each layer can be read, tested and changed without the ones above it. `lib.rs`, which
//! wires them all, is not counted, nor is this file (its examples name modules in strings); neither
//! are the parts of one module's folder among themselves.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every top-level module of `src/` and the top-level modules its files name.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph = BTreeMap::new();
    let mut files = vec![src.to_path_buf()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|entry| entry.unwrap().path()));
            continue;
        }
        if path.extension().is_none_or(|ext| ext != "rs") || path == src.join("lib.rs") || path == src.join("module_graph.rs") {
            continue;
        }
        let first = path.strip_prefix(src).unwrap().components().next().unwrap().as_os_str().to_str().unwrap();
        let module = first.trim_end_matches(".rs").to_string();
        let named: &mut BTreeSet<String> = graph.entry(module.clone()).or_default();
        named.extend(named_modules(&std::fs::read_to_string(&path).unwrap()).into_iter().filter(|m| *m != module));
    }
    graph
}

/// The top-level modules a file's code names: `crate::a::…` and each path of `crate::{a, b::…}`.
/// Comments are left out: they may name any module.
fn named_modules(text: &str) -> BTreeSet<String> {
    let code: String = text.lines().map(|line| line.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    let mut named = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        match rest.strip_prefix('{') {
            Some(group) => {
                // The group's top-level paths: split at commas outside nested braces.
                let (mut depth, mut start) = (0, 0);
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            named.insert(first_segment(&group[start..i]));
                            break;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            named.insert(first_segment(&group[start..i]));
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
            }
            None => {
                named.insert(first_segment(rest));
            }
        }
    }
    named.retain(|m| !m.is_empty() && m != "self");
    named
}

fn first_segment(path: &str) -> String {
    path.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
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

#[test]
fn no_module_names_a_module_that_names_it_back() {
    let graph = module_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(graph.len() > 20 && graph["engine"].contains("shmem"), "the graph was read: {graph:?}");
    if let Some(circle) = find_circle(&graph) {
        panic!("modules in a circle: {}", circle.join(" -> "));
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
    assert_eq!(
        named_modules("use crate::engine::Generator;\nuse crate::{clock, errors::raise, shmem::{self, X}}; // crate::node\nlet s = crate::settings::config();"),
        ["clock", "engine", "errors", "settings", "shmem"].map(String::from).into()
    );
}
