//! The manual's pages (README.md and docs/*.md) as the system tests read them: which files they are,
//! their prose apart from their fenced code, and the code spans of a line.

use std::fs;
use std::path::{Path, PathBuf};

/// The repository's root. Why not the working directory: cargo runs a test in its package's
/// directory (`pgrx-tests/`), and anyone may run the binary from elsewhere.
pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("pgrx-tests/ lies inside the repository").to_path_buf()
}

/// The manual's pages: README.md and every docs/*.md, sorted.
pub fn manual_pages() -> Vec<PathBuf> {
    let root = repository();
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// A page's name relative to the repository (`docs/segments.md`).
pub fn page_name(page: &Path) -> String {
    page.strip_prefix(repository()).unwrap_or(page).display().to_string()
}

pub fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The lines of a Markdown text outside fenced code blocks (where `#` starts a shell comment, not a
/// heading, and brackets are code), with their numbers from 1.
pub fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push((index + 1, line));
        }
    }
    lines
}

/// A line's inline code spans (a run of backticks up to the next run of the same length), and the
/// line with each of them replaced by `CODE`.
pub fn split_code_spans(line: &str) -> (Vec<String>, String) {
    let chars: Vec<char> = line.chars().collect();
    let mut spans = Vec::new();
    let mut rest = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            rest.push(chars[i]);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|&&c| c == '`').count();
        let body_start = i + run;
        let mut j = body_start;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let closing = chars[j..].iter().take_while(|&&c| c == '`').count();
                if closing == run {
                    close = Some(j);
                    break;
                }
                j += closing;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                let body: String = chars[body_start..end].iter().collect();
                // CommonMark strips one space at each end of a span that has one at both.
                let body = if body.len() > 1 && body.starts_with(' ') && body.ends_with(' ') { body[1..body.len() - 1].to_string() } else { body };
                spans.push(body);
                rest.push_str("CODE");
                i = end + run;
            }
            None => {
                // A lone backtick run is text.
                rest.extend(&chars[i..body_start]);
                i = body_start;
            }
        }
    }
    (spans, rest)
}
