//! System test of the hints of pg_idgen's errors: every name a HINT gives (a function, a setting,
//! a table or one of its columns) exists, so that no hint sends the user to something that is not
//! there.
//!
//! The hints are read from the source (src/): in Rust, the hint argument of `errors::raise()` (its
//! fourth), of `set_hint()` and of `invalid_with_hint()` (its fifth), a `let` that binds a `hint`, and
//! the body of a function whose name ends in `_hint`; in SQL, each `HINT = …` of a `RAISE`. A hint
//! built at run time contributes its literal parts. The names in a hint are its lower-case words
//! with an underscore (`seq_space_create`, `max_worker_processes`) and the `pg_idgen.*` settings;
//! quoted values (`'key_column'`) and format placeholders are not names.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use pg_idgen_system_tests::manual::repository;
use pg_idgen_system_tests::started_cluster;

/// A hint found in the source: where, and its literal text.
#[derive(Debug)]
struct Hint {
    place: String,
    text: String,
}

/// A token of Rust source, with its line: what the hint finder needs of the language.
#[derive(Debug, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    Punct(char),
}

/// Rust source as tokens, without comments; string literals (plain, raw, byte and C strings) with
/// their text, char literals and lifetimes dropped.
fn rust_tokens(source: &str) -> Vec<(usize, Token)> {
    let chars: Vec<char> = source.chars().collect();
    let mut tokens = Vec::new();
    let (mut i, mut line) = (0, 1);
    let count_lines = |from: usize, to: usize, chars: &[char]| chars[from..to].iter().filter(|&&c| c == '\n').count();
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let (start, mut depth) = (i, 0);
            loop {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            line += count_lines(start, i, &chars);
        } else if c == '"' || ((c == 'r' || c == 'b' || c == 'c') && string_starts(&chars, i)) {
            let start = i;
            let (text, end) = read_string(&chars, i);
            tokens.push((line, Token::Str(text)));
            i = end;
            line += count_lines(start, end, &chars);
        } else if c == '\'' {
            // A char literal ('a', '\n', '\u{1F600}'), or a lifetime ('a, 'static): skipped.
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push((line, Token::Ident(chars[start..i].iter().collect())));
        } else {
            tokens.push((line, Token::Punct(c)));
            i += 1;
        }
    }
    tokens
}

/// Whether a string literal with a prefix (r"", r#""#, b"", br"", c"", cr"") starts at `i`.
fn string_starts(chars: &[char], i: usize) -> bool {
    if i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_') {
        return false;
    }
    let mut j = i;
    if matches!(chars[j], 'b' | 'c') {
        j += 1;
    }
    if chars.get(j) == Some(&'r') {
        j += 1;
        while chars.get(j) == Some(&'#') {
            j += 1;
        }
    }
    j > i && chars.get(j) == Some(&'"')
}

/// Reads the string literal at `i`: its text (escapes kept as written, but a line continuation
/// dropped) and the index after it.
fn read_string(chars: &[char], mut i: usize) -> (String, usize) {
    let mut hashes = 0;
    let mut raw = false;
    while chars[i] != '"' {
        match chars[i] {
            'r' => raw = true,
            '#' => hashes += 1,
            _ => {}
        }
        i += 1;
    }
    i += 1;
    let mut text = String::new();
    loop {
        let c = chars[i];
        if raw && c == '"' && (0..hashes).all(|k| chars.get(i + 1 + k) == Some(&'#')) {
            return (text, i + 1 + hashes);
        }
        if !raw && c == '"' {
            return (text, i + 1);
        }
        if !raw && c == '\\' {
            if chars[i + 1] == '\n' {
                i += 2;
                while chars[i].is_whitespace() {
                    i += 1;
                }
                continue;
            }
            text.push(chars[i + 1]);
            i += 2;
            continue;
        }
        text.push(c);
        i += 1;
    }
}

/// The tokens of the argument list that opens at `open` (a `(`), split at its top-level commas,
/// and the index after its `)`.
fn arguments(tokens: &[(usize, Token)], open: usize) -> (Vec<&[(usize, Token)]>, usize) {
    let mut depth = 0;
    let mut start = open + 1;
    let mut args = Vec::new();
    for (k, (_, token)) in tokens.iter().enumerate().skip(open) {
        match token {
            Token::Punct('(' | '[' | '{') => depth += 1,
            Token::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    args.push(&tokens[start..k]);
                    return (args, k + 1);
                }
            }
            Token::Punct(',') if depth == 1 => {
                args.push(&tokens[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    (args, tokens.len())
}

fn literals(tokens: &[(usize, Token)]) -> String {
    tokens.iter().filter_map(|(_, t)| if let Token::Str(s) = t { Some(s.as_str()) } else { None }).collect::<Vec<_>>().join(" ")
}

/// What the Rust files define that a hint argument may name instead of writing its text: each
/// function's parameters (a function with a parameter `hint` passes it on), `let` bindings per file,
/// constants, and the bodies of functions whose name ends in `_hint`.
#[derive(Default)]
struct Definitions {
    /// Function name → the position of its parameter `hint`.
    hint_parameter: std::collections::BTreeMap<String, usize>,
    /// (file, binding) → the literals of its `let` statement.
    lets: std::collections::BTreeMap<(String, String), String>,
    /// Constant or `*_hint` function → its literals.
    globals: std::collections::BTreeMap<String, String>,
}

/// The index of the token that closes the bracket opened at `open`.
fn closing(tokens: &[(usize, Token)], open: usize) -> usize {
    let mut depth = 0;
    for (k, (_, token)) in tokens.iter().enumerate().skip(open) {
        match token {
            Token::Punct('(' | '[' | '{') => depth += 1,
            Token::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

/// The index of the `;` that ends the statement going on at `from`, outside brackets.
fn statement_end(tokens: &[(usize, Token)], from: usize) -> usize {
    let mut depth = 0;
    for (k, (_, token)) in tokens.iter().enumerate().skip(from) {
        match token {
            Token::Punct('(' | '[' | '{') => depth += 1,
            Token::Punct(')' | ']' | '}') => depth -= 1,
            Token::Punct(';') if depth == 0 => return k,
            _ => {}
        }
    }
    tokens.len()
}

impl Definitions {
    fn read(&mut self, file: &str, tokens: &[(usize, Token)]) {
        for (k, (_, token)) in tokens.iter().enumerate() {
            let Token::Ident(word) = token else { continue };
            let name = match tokens.get(k + 1) {
                Some((_, Token::Ident(name))) => name.clone(),
                _ => continue,
            };
            match word.as_str() {
                "fn" => {
                    let Some(open) = (k..tokens.len()).find(|&j| tokens[j].1 == Token::Punct('(')) else { continue };
                    let (parameters, after) = arguments(tokens, open);
                    if let Some(position) = parameters.iter().position(|p| p.first().is_some_and(|(_, t)| *t == Token::Ident("hint".into()))) {
                        self.hint_parameter.insert(name.clone(), position);
                    }
                    if name.ends_with("_hint") {
                        if let Some(body) = (after..tokens.len()).find(|&j| tokens[j].1 == Token::Punct('{')) {
                            self.globals.insert(name, literals(&tokens[body..closing(tokens, body)]));
                        }
                    }
                }
                "const" | "static" => {
                    self.globals.insert(name, literals(&tokens[k..statement_end(tokens, k)]));
                }
                _ => {}
            }
        }
        // `let` statements: every binding of the pattern, with the literals of the whole statement.
        for (k, (_, token)) in tokens.iter().enumerate() {
            if *token != Token::Ident("let".into()) {
                continue;
            }
            let end = statement_end(tokens, k);
            let equals = (k..end).find(|&j| tokens[j].1 == Token::Punct('=')).unwrap_or(end);
            let text = literals(&tokens[equals..end]);
            for (_, t) in &tokens[k + 1..equals] {
                if let Token::Ident(binding) = t {
                    self.lets.insert((file.to_string(), binding.clone()), text.clone());
                }
            }
        }
    }

    /// The text of a hint argument: its literals, or what the names it is made of stand for.
    fn text_of(&self, file: &str, argument: &[(usize, Token)]) -> String {
        let written = literals(argument);
        if !written.is_empty() {
            return written;
        }
        let mut parts = Vec::new();
        for (_, token) in argument {
            let Token::Ident(name) = token else { continue };
            if let Some(text) = self.lets.get(&(file.to_string(), name.clone())).or_else(|| self.globals.get(name)) {
                parts.push(text.clone());
            }
        }
        parts.join(" ")
    }
}

/// The hints of the Rust files: the argument given for a parameter `hint` (of `errors::raise()`
/// and of every function that passes one on), and of `set_hint()`.
fn rust_hints(files: &[(String, String)]) -> Vec<Hint> {
    let tokenized: Vec<(String, Vec<(usize, Token)>)> = files.iter().map(|(name, source)| (name.clone(), rust_tokens(source))).collect();
    let mut definitions = Definitions::default();
    definitions.hint_parameter.insert("set_hint".into(), 0);
    for (file, tokens) in &tokenized {
        definitions.read(file, tokens);
    }
    let mut hints = Vec::new();
    for (file, tokens) in &tokenized {
        for (k, (line, token)) in tokens.iter().enumerate() {
            let Token::Ident(name) = token else { continue };
            let Some(&position) = definitions.hint_parameter.get(name) else { continue };
            let is_definition = k > 0 && tokens[k - 1].1 == Token::Ident("fn".into());
            if is_definition || !matches!(tokens.get(k + 1), Some((_, Token::Punct('(')))) {
                continue;
            }
            let (args, _) = arguments(tokens, k + 1);
            if let Some(argument) = args.get(position) {
                let text = definitions.text_of(file, argument);
                if !text.trim().is_empty() {
                    hints.push(Hint { place: format!("{file}:{line}"), text });
                }
            }
        }
    }
    hints
}

/// The hints of an SQL file: each `HINT = …` up to the `,` or `;` that ends it, its string
/// literals.
fn sql_hints(file: &str, source: &str) -> Vec<Hint> {
    let chars: Vec<char> = source.chars().collect();
    let mut hints = Vec::new();
    let mut i = 0;
    while let Some(at) = find(&chars, i, "HINT") {
        let line = chars[..at].iter().filter(|&&c| c == '\n').count() + 1;
        let mut j = at + 4;
        while j < chars.len() && chars[j].is_whitespace() {
            j += 1;
        }
        if chars.get(j) != Some(&'=') {
            i = at + 4;
            continue;
        }
        let (mut depth, mut parts) = (0, Vec::new());
        j += 1;
        while j < chars.len() {
            match chars[j] {
                '\'' => {
                    let mut text = String::new();
                    j += 1;
                    while j < chars.len() {
                        if chars[j] == '\'' && chars.get(j + 1) == Some(&'\'') {
                            text.push('\'');
                            j += 2;
                        } else if chars[j] == '\'' {
                            break;
                        } else {
                            text.push(chars[j]);
                            j += 1;
                        }
                    }
                    parts.push(text);
                }
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' | ';' if depth == 0 => break,
                _ => {}
            }
            j += 1;
        }
        hints.push(Hint { place: format!("{file}:{line}"), text: parts.join(" ") });
        i = j;
    }
    hints
}

fn find(chars: &[char], from: usize, needle: &str) -> Option<usize> {
    let needle: Vec<char> = needle.chars().collect();
    (from..chars.len().saturating_sub(needle.len() - 1)).find(|&i| chars[i..i + needle.len()] == needle[..])
}

/// The names a hint gives: its lower-case words with an underscore, and `pg_idgen.*` settings;
/// not quoted values, not format placeholders (`{…}`, `%s`).
fn names_in(hint: &str) -> Vec<String> {
    let chars: Vec<char> = hint.chars().collect();
    let mut text = String::new();
    let mut i = 0;
    while i < chars.len() {
        let before = if i > 0 { chars[i - 1] } else { ' ' };
        match chars[i] {
            // A quote that opens a value (not an apostrophe inside a word): skipped to its end.
            '\'' if !before.is_alphanumeric() => {
                i += 1;
                let closes = |i: usize| chars[i] == '\'' && !chars.get(i + 1).is_some_and(|c| c.is_alphanumeric());
                while i < chars.len() && !closes(i) {
                    i += 1;
                }
            }
            '{' => {
                while i < chars.len() && chars[i] != '}' {
                    i += 1;
                }
            }
            '%' => i += 1,
            c => text.push(c),
        }
        i += 1;
    }
    let mut names = Vec::new();
    let mut word = String::new();
    for c in text.chars().chain([' ']) {
        if c.is_alphanumeric() || c == '_' || (c == '.' && !word.is_empty()) {
            word.push(c);
            continue;
        }
        let name = word.trim_end_matches('.').to_string();
        word.clear();
        let is_setting = name.starts_with("pg_idgen.");
        let is_snake = name.contains('_') && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.');
        if is_setting || is_snake {
            names.push(name);
        }
    }
    names
}

fn source_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            source_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs" || e == "sql") {
            found.push(path);
        }
    }
}

/// Every hint of src/.
fn hints_of_the_source() -> Vec<Hint> {
    let root = repository();
    let mut files = Vec::new();
    source_files(&root.join("src"), &mut files);
    files.sort();
    let mut rust = Vec::new();
    let mut hints = Vec::new();
    for path in files {
        let source = fs::read_to_string(&path).unwrap();
        let name = path.strip_prefix(&root).unwrap().display().to_string();
        if name.ends_with(".rs") {
            rust.push((name, source));
        } else {
            hints.extend(sql_hints(&name, &source));
        }
    }
    hints.extend(rust_hints(&rust));
    hints
}

/// Claim: every name that a hint of pg_idgen's errors gives — a function, a setting, a table, a
/// column, a schema — exists on a server that preloads pg_idgen and has it created, so no hint
/// sends the user to something that is not there. The reading of the source finds the hints of
/// every kind of site (more than 60 of them), so a hint cannot go unread.
#[test]
fn every_name_a_hint_gives_exists() {
    let hints = hints_of_the_source();
    assert!(hints.len() > 60, "only {} hints found in src/: is the reading of the source broken?\n{hints:#?}", hints.len());

    let cluster = started_cluster("hints", &["pg_idgen.node_id = 1"]);
    let mut db = cluster.connect();
    let known: BTreeSet<String> = db
        .query(
            "SELECT proname::text FROM pg_proc
             UNION SELECT name FROM pg_settings
             UNION SELECT relname::text FROM pg_class
             UNION SELECT nspname::text FROM pg_namespace
             UNION SELECT extname::text FROM pg_extension
             UNION SELECT a.attname::text FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid
                    WHERE c.relnamespace IN ('public'::regnamespace, 'pg_catalog'::regnamespace) AND a.attnum > 0
             UNION SELECT unnest(proargnames)::text FROM pg_proc
                    WHERE pronamespace IN ('public'::regnamespace, 'idgen_internal'::regnamespace)",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    let mut unknown = Vec::new();
    for hint in &hints {
        for name in names_in(&hint.text) {
            let last = name.rsplit('.').next().unwrap_or(&name);
            let qualified_known = name.contains('.') && !name.starts_with("pg_idgen.") && known.contains(last);
            if !known.contains(&name) && !qualified_known {
                unknown.push(format!("{}: `{name}` in the hint \"{}\"", hint.place, hint.text));
            }
        }
    }
    assert!(unknown.is_empty(), "hints name what does not exist:\n{}", unknown.join("\n"));
}

/// Claim: the reading of the source finds a hint at each kind of site, and of a hint the names
/// only, not its quoted values or placeholders; a name that does not exist would be reported.
#[test]
fn hints_are_found_where_they_are_written() {
    let rust = r##"
        // errors::raise(code, "a", None, Some("not_in_a_comment()"));
        pub fn raise(code: C, message: String, detail: Option<String>, hint: Option<&str>) -> ! { todo!() }
        errors::raise(PgSqlErrorCode::X, format!("m {x}"), Some("d".into()), Some("Call seq_space_create(space)."));
        report.set_hint(format!("Correct {} in postgresql.conf", name));
        fn invalid_with_hint(level: L, name: &CStr, value: &str, detail: &str, hint: &str) -> ! { todo!() }
        invalid_with_hint(level, c"x", &v, &d, "Raise pg_idgen.max_tags.");
        let (clock, hint) = match p { A => ("c", "Set pg_idgen.clock_step_policy."), };
        raise(code, m, None, Some(hint));
        const CREATE_TAG: &str = "Create it with segment_create(tag).";
        fn unknown(tag: &[u8], hint: Option<&str>) -> ! { todo!() }
        unknown(b"t", Some(table::CREATE_TAG));
        fn write_hint() -> String { format!(r#"Free space for {FILE}; see no_such_thing."#) }
        fn fail(level: L, message: String, hint: String) -> ! { todo!() }
        fail(level, message, write_hint());
        let lifetime: &'static str = "not a hint";
    "##;
    let found: Vec<String> = rust_hints(&[("x.rs".into(), rust.into())]).into_iter().map(|h| h.text).collect();
    assert_eq!(
        found,
        [
            "Call seq_space_create(space).",
            "Correct {} in postgresql.conf",
            "Raise pg_idgen.max_tags.",
            "c Set pg_idgen.clock_step_policy.",
            "Create it with segment_create(tag).",
            "Free space for {FILE}; see no_such_thing."
        ]
    );
    let sql = "RAISE EXCEPTION 'x' USING ERRCODE = 'a', HINT = pg_catalog.format('Drop it with segment_drop(%L), it''s %s.', tag);";
    let found: Vec<String> = sql_hints("x.sql", sql).into_iter().map(|h| h.text).collect();
    assert_eq!(found, ["Drop it with segment_drop(%L), it's %s."]);
    assert_eq!(
        names_in("Use seq_fill('space', 'key_column') or pg_idgen.node_id; the server's max_worker_processes, pg_idgen_status().clock_worker_pid {table_name}."),
        ["seq_fill", "pg_idgen.node_id", "max_worker_processes", "pg_idgen_status", "clock_worker_pid"]
    );
}
