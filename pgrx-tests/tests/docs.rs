//! System test of the manual (README.md and docs/): its links lead somewhere, and its references
//! name everything the extension creates.

use std::collections::BTreeSet;
use std::path::Path;

use pg_idgen_system_tests::manual::{manual_pages, page_name, prose_lines, read, repository, split_code_spans};
use pg_idgen_system_tests::started_cluster;

/// GitHub's anchor of a heading: lowercase; a space becomes `-`; letters, digits, `-` and `_`
/// stay; everything else (punctuation, backticks, arrows) is dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown text: each heading's slug, a repeated one numbered `-1`, `-2`, … as
/// GitHub numbers them.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim().trim_end_matches('#'));
        let mut anchor = base.clone();
        let mut n = 0;
        while anchors.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        anchors.insert(anchor);
    }
    anchors
}

/// The targets of a line's links and images, `[text](target)` and `![alt](target)`, outside code
/// spans.
fn link_targets(line: &str) -> Vec<String> {
    let (_, text) = split_code_spans(line);
    let mut targets = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        targets.push(after[..end].trim().to_string());
        rest = &after[end..];
    }
    targets
}

/// Claim: every relative link and image of README.md and docs/*.md leads to a file that exists,
/// and a `#anchor` to a heading of that Markdown file (or of the page itself) under GitHub's
/// rule for anchors. Links to http(s) and mailto addresses are not followed.
#[test]
fn every_relative_link_of_the_manual_resolves() {
    let root = repository();
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in manual_pages() {
        let text = read(&page);
        let name = page.strip_prefix(&root).unwrap().display().to_string();
        for (number, line) in prose_lines(&text) {
            for target in link_targets(line) {
                if ["http://", "https://", "mailto:"].iter().any(|scheme| target.starts_with(scheme)) {
                    continue;
                }
                checked += 1;
                let (file, anchor) = match target.split_once('#') {
                    Some((file, anchor)) => (file, Some(anchor)),
                    None => (target.as_str(), None),
                };
                let path = if file.is_empty() { page.clone() } else { page.parent().unwrap().join(file) };
                let place = format!("{name}:{number}: ({target})");
                if !path.exists() {
                    broken.push(format!("{place}: no such file"));
                    continue;
                }
                let Some(anchor) = anchor else { continue };
                if path.extension().is_none_or(|e| e != "md") {
                    broken.push(format!("{place}: an anchor into a file that is not Markdown"));
                } else if !anchors(&read(&path)).contains(anchor) {
                    broken.push(format!("{place}: that page has no heading whose anchor is #{anchor}"));
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} relative links found: is the scan of the manual broken?");
    assert!(broken.is_empty(), "{} of {checked} relative links of the manual lead nowhere:\n{}", broken.len(), broken.join("\n"));
}

/// The code spans of a Markdown file outside fenced code blocks.
fn code_spans_of(path: &Path) -> Vec<String> {
    prose_lines(&read(path)).iter().flat_map(|(_, line)| split_code_spans(line).0).collect()
}

/// Claim: on a cluster with pg_idgen preloaded and created, every function, aggregate and type that
/// `CREATE EXTENSION` makes a member of the extension is named in docs/functions.md, and every
/// setting `pg_idgen.*` in docs/settings.md. "Named" means a code span (outside fenced blocks):
/// for a function or an aggregate, one that begins with its signature as PostgreSQL writes it
/// (`oid::regprocedure`, e.g. `id_decode(bigint)`; `, ` between arguments is read as `,`), so
/// each overload needs its own entry; for a type, one that is exactly its name (`objectid`); for a
/// setting, one that is exactly its name (`pg_idgen.node_id`). A test of the test: delete one
/// entry and this fails, naming it.
#[test]
fn the_references_name_every_function_aggregate_type_and_setting() {
    let cluster = started_cluster("docs", &[]);
    let mut db = cluster.connect();
    // Left out: functions in the schema idgen_internal, helpers that the conversions call and that
    // are for no one else (docs/security.md says so); types PostgreSQL makes on its own beside a
    // member — the array type of each type, and the row type of each table — which are not members
    // of the extension anyway but would be if that ever changed.
    let rows = db
        .query(
            "WITH members AS (
                 SELECT d.classid, d.objid FROM pg_depend AS d
                  WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
                    AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_idgen'))
             SELECT CASE p.prokind WHEN 'a' THEN 'aggregate' ELSE 'function' END, p.oid::regprocedure::text
               FROM members AS m JOIN pg_proc AS p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid
               JOIN pg_namespace AS n ON n.oid = p.pronamespace
              WHERE n.nspname <> 'idgen_internal'
             UNION ALL
             SELECT 'type', t.typname::text
               FROM members AS m JOIN pg_type AS t ON m.classid = 'pg_type'::regclass AND t.oid = m.objid
              WHERE t.typcategory <> 'A' AND t.typrelid = 0
             UNION ALL
             SELECT 'setting', name FROM pg_settings WHERE name LIKE 'pg_idgen.%'
             ORDER BY 1, 2",
            &[],
        )
        .unwrap();
    let objects: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let count = |kind: &str| objects.iter().filter(|(k, _)| k == kind).count();
    assert!(count("function") > 50 && count("aggregate") >= 2 && count("type") >= 1 && count("setting") > 20, "too few objects found: {objects:?}");
    assert!(objects.iter().all(|(_, name)| !name.contains('.') || name.starts_with("pg_idgen.")), "a schema-qualified signature: {objects:?}");

    let root = repository();
    let functions: Vec<String> = code_spans_of(&root.join("docs/functions.md")).iter().map(|span| span.replace(", ", ",")).collect();
    let settings = code_spans_of(&root.join("docs/settings.md"));
    let mut missing = Vec::new();
    for (kind, name) in &objects {
        let named = match kind.as_str() {
            "function" | "aggregate" => functions.iter().any(|span| span.starts_with(name.as_str())),
            "type" => functions.iter().any(|span| span == name),
            _ => settings.iter().any(|span| span == name),
        };
        if !named {
            let page = if kind == "setting" { "docs/settings.md" } else { "docs/functions.md" };
            missing.push(format!("{kind} `{name}` is not in {page}"));
        }
    }
    assert!(missing.is_empty(), "the references lag behind the extension:\n{}", missing.join("\n"));
}

/// Claim: the demo's "where to read next" (scripts/demo.sql, which `./dev run` shows) names every
/// page of the manual, so that a page added later is not left out of it.
#[test]
fn the_demo_names_every_page_of_the_manual() {
    let demo = read(&repository().join("scripts/demo.sql"));
    let missing: Vec<String> =
        manual_pages().iter().map(|page| page_name(page)).filter(|name| !demo.contains(&format!("\\echo '  {name} "))).collect();
    assert!(missing.is_empty(), "scripts/demo.sql does not name these pages in its \"where to read next\": {missing:?}");
}
