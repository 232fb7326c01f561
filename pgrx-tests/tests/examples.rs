//! System test of the manual's examples: every SQL example of README.md and docs/*.md runs, page by
//! page in the order a reader meets them, and gives what its page shows.
//!
//! How a page is read (the rules the pages are written by):
//! - **Examples.** Each fenced ```` ```sql ```` block, statement by statement: a statement ends at a
//!   line whose code (before a trailing `--` comment) ends in `;` or `\gx`, or is a psql
//!   meta-command (`\x on`). Also each inline example of the prose: a code span that begins with
//!   `SELECT ` and either ends in `;` or is followed by ` → ` and a code span, its shown result.
//! - **Shown output.** The `--` lines right under a statement, with no blank line between, are its
//!   output as psql prints it: rows (the header and its dashes may be left out), `column | value`
//!   lines of `\gx`, and messages (`NOTICE:`, `WARNING:`, `ERROR:`, `DETAIL:`, `HINT:`; not psql's
//!   `LINE n:` and `^` lines, which point into the statement). A comment that explains goes above a
//!   statement, at the end of its line, or after a blank line.
//! - **Comparison.** Where a page shows rows, the rows are compared, cell by cell (their alignment
//!   is not); where it shows messages, the messages are. A statement that shows no output must not
//!   fail: an ERROR or WARNING that the page does not show fails the test. What must vary from run
//!   to run is left out by one rule, [`Judge::varies`].
//! - **Not run.** A block whose first line is `-- not run: REASON` is skipped; the reader sees the
//!   reason in the block.
//! - **Setup.** Each page runs in a fresh database, with pg_idgen created, of a fresh cluster of its
//!   own that preloads it with `pg_idgen.node_id = 1` (the settings the README's installation
//!   gives; what one page makes, another never sees), in one psql session per run of consecutive
//!   examples, with `PGTZ=UTC`. A page declares more in an HTML comment that starts
//!   `<!-- examples:`, one item a line:
//!   - `extension: none` — the page's database starts without pg_idgen (the page creates it);
//!   - `role: NAME` — a role the page grants to (created if missing);
//!   - `server: SETTING = VALUE` — the page's server has these settings instead of the node id
//!     (pg_idgen is preloaded all the same); it starts when the page's first example runs there;
//!   - `ready: QUERY` — on that server, the examples wait (up to 90 s) until QUERY returns true;
//!   - `second server: HOST, database NAME` — a block whose first line is `-- at HOST` runs there,
//!     in database NAME (created empty). `host=HOST` in a setting or statement is the second
//!     server's socket, and is written back as `host=HOST` in what comes out.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pg_idgen_system_tests::manual::{manual_pages, page_name, prose_lines, read, split_code_spans};
use pg_idgen_system_tests::{bin, scaled, Client, Cluster};

/// The marker psql echoes before each statement, followed by the statement's number in its run.
const MARK: &str = "@@pg_idgen example ";

/// Where an example runs: the page's server, or the second server the page declares.
#[derive(Clone, Debug, PartialEq)]
enum Place {
    Main,
    Second,
}

#[derive(Debug)]
struct Example {
    line: usize,
    place: Place,
    statement: String,
    /// The `--` lines under it, without their `--`.
    shown: Vec<String>,
}

/// What a page's `<!-- examples: … -->` comment declares.
#[derive(Debug, Default)]
struct Setup {
    without_extension: bool,
    roles: Vec<String>,
    /// Settings of the page's server; empty: `pg_idgen.node_id = 1`.
    settings: Vec<String>,
    ready: Option<String>,
    /// The second server's host name and database.
    second: Option<(String, String)>,
}

#[derive(Debug, Default)]
struct Page {
    name: String,
    setup: Setup,
    examples: Vec<Example>,
    /// Blocks marked `-- not run: …`: their line and reason.
    not_run: Vec<(usize, String)>,
    /// What the page gets wrong in its form (a statement without its end, an unknown setup item).
    malformed: Vec<String>,
}

/// The code of a line before a trailing `--` comment (one outside quotes).
fn code_part(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let bytes: Vec<char> = line.chars().collect();
    let mut offset = 0;
    for (i, &c) in bytes.iter().enumerate() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '-' && bytes.get(i + 1) == Some(&'-') => return &line[..offset],
            None => {}
        }
        offset += c.len_utf8();
    }
    line
}

fn is_comment(line: &str) -> bool {
    line.trim_start().starts_with("--")
}

/// The text of a comment line after its `--` (and one space).
fn comment_text(line: &str) -> String {
    let text = line.trim_start().trim_start_matches("--");
    text.strip_prefix(' ').unwrap_or(text).to_string()
}

impl Page {
    fn parse(name: &str, text: &str) -> Page {
        let mut page = Page { name: name.to_string(), ..Page::default() };
        page.read_setup(text);
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        let prose: BTreeMap<usize, &str> = prose_lines(text).into_iter().collect();
        while i < lines.len() {
            let line = lines[i];
            let fence = line.trim_start();
            if let Some(language) = fence.strip_prefix("```") {
                let indent = line.len() - fence.len();
                let start = i + 1;
                let mut end = start;
                while end < lines.len() && !lines[end].trim_start().starts_with("```") {
                    end += 1;
                }
                if language.trim() == "sql" {
                    let body: Vec<&str> = lines[start..end].iter().map(|l| if l.len() >= indent { &l[indent..] } else { l.trim_start() }).collect();
                    page.read_block(start + 1, &body);
                }
                i = end + 1;
                continue;
            }
            if let Some(prose_line) = prose.get(&(i + 1)) {
                page.read_inline(i + 1, prose_line);
            }
            i += 1;
        }
        page
    }

    /// Reads the setup comment: a line that begins `<!-- examples:`, up to the `-->` after it.
    fn read_setup(&mut self, text: &str) {
        const OPENS: &str = "<!-- examples:";
        let Some(start) = text
            .lines()
            .scan(0, |offset, line| {
                let at = *offset;
                *offset += line.len() + 1;
                Some((at, line))
            })
            .find(|(_, line)| line.starts_with(OPENS))
            .map(|(at, _)| at)
        else {
            return;
        };
        let rest = &text[start + OPENS.len()..];
        let Some(end) = rest.find("-->") else {
            self.malformed.push("the <!-- examples: comment has no end".into());
            return;
        };
        for item in rest[..end].lines().map(str::trim).filter(|l| !l.is_empty()) {
            let Some((key, value)) = item.split_once(':') else {
                self.malformed.push(format!("setup item without a key: {item}"));
                continue;
            };
            let value = value.trim().to_string();
            match key.trim() {
                "extension" if value == "none" => self.setup.without_extension = true,
                "role" => self.setup.roles.push(value),
                "server" => self.setup.settings.push(value),
                "ready" => self.setup.ready = Some(value),
                "second server" => match value.split_once(", database ") {
                    Some((host, database)) => self.setup.second = Some((host.trim().into(), database.trim().into())),
                    None => self.malformed.push(format!("second server: write `HOST, database NAME`, not {value}")),
                },
                other => self.malformed.push(format!("unknown setup item `{other}`")),
            }
        }
    }

    /// Reads the statements of a ```sql block whose first line is line `first` of the page.
    fn read_block(&mut self, first: usize, body: &[&str]) {
        let head = body.iter().find(|l| !l.trim().is_empty()).map(|l| l.trim()).unwrap_or("");
        if let Some(reason) = head.strip_prefix("-- not run:") {
            self.not_run.push((first, reason.trim().to_string()));
            return;
        }
        let mut place = Place::Main;
        if let Some(at) = head.strip_prefix("-- at ") {
            match &self.setup.second {
                Some((host, _)) if at.split([' ', ',', ':']).next() == Some(host.as_str()) => place = Place::Second,
                _ => self.malformed.push(format!("line {first}: `-- at {at}` names no second server of the page's setup")),
            }
        }
        let mut statement: Vec<&str> = Vec::new();
        let mut statement_line = 0;
        // Whether the `--` lines that follow are the output of the last statement.
        let mut collecting = false;
        for (offset, &line) in body.iter().enumerate() {
            let number = first + offset;
            if collecting && is_comment(line) {
                self.examples.last_mut().unwrap().shown.push(comment_text(line));
                continue;
            }
            collecting = false;
            if line.trim().is_empty() || (statement.is_empty() && is_comment(line)) {
                continue;
            }
            if statement.is_empty() {
                statement_line = number;
            }
            statement.push(line);
            let code = code_part(line).trim_end();
            if code.ends_with(';') || code.ends_with("\\gx") || (statement.len() == 1 && code.starts_with('\\')) {
                self.examples.push(Example { line: statement_line, place: place.clone(), statement: statement.join("\n"), shown: Vec::new() });
                statement.clear();
                collecting = true;
            }
        }
        if !statement.is_empty() {
            self.malformed.push(format!("line {statement_line}: a statement without its `;`: {}", statement.join(" ")));
        }
    }

    /// Reads the inline examples of a prose line.
    fn read_inline(&mut self, number: usize, line: &str) {
        let (spans, rest) = split_code_spans(line);
        let between: Vec<&str> = rest.split("CODE").collect();
        for (k, span) in spans.iter().enumerate() {
            if !span.starts_with("SELECT ") {
                continue;
            }
            let arrow = between.get(k + 1).is_some_and(|text| text.trim() == "→") && k + 1 < spans.len();
            if arrow {
                self.examples.push(Example { line: number, place: Place::Main, statement: statement_of(span), shown: vec![spans[k + 1].clone()] });
            } else if span.ends_with(';') {
                self.examples.push(Example { line: number, place: Place::Main, statement: span.clone(), shown: Vec::new() });
            }
        }
    }
}

/// An inline statement, with the `;` it may leave out.
fn statement_of(span: &str) -> String {
    if span.ends_with(';') {
        span.to_string()
    } else {
        format!("{span};")
    }
}

/// A line of output, or of shown output, as compared.
#[derive(Debug, PartialEq)]
enum Output {
    /// A message: its level and text, with runs of spaces made one.
    Message(String),
    /// A row, or a header, or a `column | value` line: its cells, trimmed.
    Cells(Vec<String>),
}

const LEVELS: &[&str] = &["NOTICE:", "WARNING:", "ERROR:", "DETAIL:", "HINT:", "INFO:"];

fn is_message(line: &str) -> bool {
    LEVELS.iter().any(|level| line.trim_start().starts_with(level))
}

/// psql's `LINE n: …` and `^` lines under an error, which point into the statement: left out of
/// the comparison, as the page may leave them out.
fn is_pointer(line: &str) -> bool {
    let line = line.trim();
    line == "^" || line.strip_prefix("LINE ").is_some_and(|rest| rest.split(':').next().is_some_and(all_digits))
}

/// A line of dashes (`----+----`) under a header, or `-[ RECORD 1 ]---` of `\gx`.
fn is_rule(line: &str) -> bool {
    let line = line.trim();
    line.starts_with("-[ RECORD ") || (!line.is_empty() && line.chars().all(|c| c == '-' || c == '+'))
}

/// The lines to compare of some psql output (or of what a page shows), and whether its first line is
/// a header (a rule follows it).
fn outputs(lines: &[String]) -> (Vec<Output>, bool) {
    let header = lines.iter().filter(|l| !is_message(l)).nth(1).is_some_and(|l| is_rule(l) && !l.trim().starts_with("-["));
    let mut out = Vec::new();
    for line in lines {
        if line.trim().is_empty() || is_rule(line) || is_pointer(line) {
            continue;
        }
        if is_message(line) {
            out.push(Output::Message(line.split_whitespace().collect::<Vec<_>>().join(" ")));
        } else {
            out.push(Output::Cells(line.split('|').map(|cell| cell.trim().to_string()).collect()));
        }
    }
    (out, header)
}

/// Whether an ERROR or a WARNING came out.
fn failed(actual: &[Output]) -> bool {
    actual.iter().any(|o| matches!(o, Output::Message(m) if m.starts_with("ERROR:") || m.starts_with("WARNING:")))
}

/// Compares what a page shows with what came out; Err says how they differ.
fn compare(shown: &[String], actual: &[String], varies: &mut dyn FnMut(&str, &str) -> bool) -> Result<(), String> {
    let (shown, _) = outputs(shown);
    let (actual, header) = outputs(actual);
    let messages =
        |o: &[Output]| -> Vec<String> { o.iter().filter_map(|x| if let Output::Message(m) = x { Some(m.clone()) } else { None }).collect() };
    let rows =
        |o: &[Output]| -> Vec<Vec<String>> { o.iter().filter_map(|x| if let Output::Cells(c) = x { Some(c.clone()) } else { None }).collect() };
    let (shown_messages, actual_messages) = (messages(&shown), messages(&actual));
    let (shown_rows, actual_rows) = (rows(&shown), rows(&actual));
    if shown_messages.is_empty() && shown_rows.is_empty() {
        return if failed(&actual) { Err("it fails, and the page shows no output".into()) } else { Ok(()) };
    }
    if (!shown_messages.is_empty() || failed(&actual)) && shown_messages != actual_messages {
        return Err(format!("messages differ: the page shows {shown_messages:?}, psql printed {actual_messages:?}"));
    }
    if !shown_rows.is_empty() {
        let mut same = |candidate: &[Vec<String>]| {
            candidate.len() == shown_rows.len()
                && candidate.iter().zip(&shown_rows).all(|(a, s)| a.len() == s.len() && a.iter().zip(s).all(|(a, s)| a == s || varies(s, a)))
        };
        let without_header = if header && !actual_rows.is_empty() { &actual_rows[1..] } else { &actual_rows[..] };
        if !same(&actual_rows) && !same(without_header) {
            return Err(format!("rows differ: the page shows {shown_rows:?}, psql printed {actual_rows:?}"));
        }
    }
    Ok(())
}

/// The kinds of value that may have been made by this run.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Time,
    Snowflake,
    ObjectId,
    Uuid,
    Base32(usize),
    Number,
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn lower_hex(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `2026-11-22 14:30:07.263+00`: a date, a time, an optional fraction and offset.
fn is_timestamp(s: &str) -> bool {
    let Some((date, time)) = s.split_once(' ') else { return false };
    let date: Vec<&str> = date.split('-').collect();
    let date_ok =
        date.len() == 3 && (4..=5).contains(&date[0].len()) && date.iter().all(|p| all_digits(p)) && date[1].len() == 2 && date[2].len() == 2;
    let clock = time.get(..8).unwrap_or("");
    let clock_ok = clock.len() == 8 && clock.split(':').all(|p| p.len() == 2 && all_digits(p)) && clock.matches(':').count() == 2;
    let tail = time.get(8..).unwrap_or("");
    let (fraction, offset) = match tail.find(['+', '-']) {
        Some(at) => tail.split_at(at),
        None => (tail, ""),
    };
    let fraction_ok = fraction.is_empty() || (fraction.starts_with('.') && all_digits(&fraction[1..]));
    let offset_ok = offset.is_empty() || offset[1..].split(':').all(|p| p.len() == 2 && all_digits(p));
    date_ok && clock_ok && fraction_ok && offset_ok
}

fn kind_of(value: &str) -> Option<Kind> {
    const CROCKFORD: &str = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    if is_timestamp(value) {
        Some(Kind::Time)
    } else if all_digits(value) && value.len() >= 15 && value.len() <= 19 {
        Some(Kind::Snowflake)
    } else if all_digits(value) && value.len() <= 7 {
        Some(Kind::Number)
    } else if value.len() == 24 && lower_hex(value) {
        Some(Kind::ObjectId)
    } else if value.len() == 36 && value.char_indices().all(|(i, c)| if [8, 13, 18, 23].contains(&i) { c == '-' } else { lower_hex(&c.to_string()) })
    {
        Some(Kind::Uuid)
    } else if [13, 20, 26].contains(&value.len()) && value.chars().all(|c| CROCKFORD.contains(c)) {
        Some(Kind::Base32(value.len()))
    } else {
        None
    }
}

/// Tells what must vary from run to run, on the server the examples ran on.
struct Judge {
    db: Client,
    /// The server's postmaster, whose children are the server's processes.
    postmaster: u32,
}

impl Judge {
    /// The one rule for what must vary: a shown value stands for the value that came out
    /// - where the page elides it: the shown value ends in `…`, and the value that came out begins
    ///   with what precedes it (the random part of an id made from a given time); or
    /// - where this run made it, and the page shows a value of the same kind: a time within a day of
    ///   the run; a snowflake id, ObjectId or UUID (or its base32 text) whose time is; or the process
    ///   id of one of the server's processes (a child of its postmaster: workers that connect to no
    ///   database are not in `pg_stat_activity`).
    ///
    /// Anything else, the time decoded from a given id included, must come out as shown.
    fn varies(&mut self, shown: &str, actual: &str) -> bool {
        if let Some(prefix) = shown.strip_suffix('…') {
            return actual.len() > prefix.len() && actual.starts_with(prefix);
        }
        let Some(kind) = kind_of(actual) else { return false };
        if kind_of(shown) != Some(kind) {
            return false;
        }
        let time = match kind {
            Kind::Time => "$1::text::timestamptz",
            Kind::Snowflake => "(id_decode($1::text::bigint)).ts",
            Kind::ObjectId => "(id_decode($1::text::objectid)).ts",
            Kind::Uuid => "(id_decode($1::text::uuid)).ts",
            Kind::Base32(13) => "(id_decode(snowflake_from_base32($1::text))).ts",
            Kind::Base32(20) => "(id_decode(objectid_from_base32($1::text))).ts",
            Kind::Base32(_) => "(id_decode(uuid_from_base32($1::text))).ts",
            Kind::Number => return parent_of(actual) == Some(self.postmaster),
        };
        let query = format!("SELECT abs(extract(epoch FROM {time} - now())) < 86400");
        self.db.query_one(&query, &[&actual]).is_ok_and(|row| row.get::<_, bool>(0))
    }
}

/// The parent of process `pid` (`/proc/PID/stat`, its fourth field), if there is such a process.
fn parent_of(pid: &str) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (second field) is in parentheses and may hold spaces.
    stat.rsplit_once(") ")?.1.split_whitespace().nth(1)?.parse().ok()
}

impl Judge {
    fn new(cluster: &Cluster, database: &str) -> Judge {
        let pid_file = fs::read_to_string(cluster.data_file("postmaster.pid")).expect("postmaster.pid");
        let postmaster = pid_file.lines().next().and_then(|l| l.trim().parse().ok()).expect("the postmaster's pid");
        Judge { db: cluster.connect_to(database), postmaster }
    }
}

/// A server the examples of a page run on, and its database.
struct Server<'a> {
    cluster: &'a Cluster,
    database: String,
    /// `host=HOST` and what it stands for on this machine: the second server's socket.
    host: Option<(String, String)>,
}

impl Server<'_> {
    /// Runs statements in one psql session; what psql printed for each, in order.
    fn run(&self, statements: &[&str]) -> Vec<Vec<String>> {
        let mut script = String::from("\\set SHOW_CONTEXT never\n\\pset footer off\n");
        for (n, statement) in statements.iter().enumerate() {
            script.push_str(&format!("\\echo '{MARK}{n}'\n{}\n", self.to_machine(statement)));
        }
        let dir = self.cluster.dir.join("examples");
        fs::create_dir_all(&dir).unwrap();
        let (input, output) = (dir.join("input.sql"), dir.join("output.txt"));
        fs::write(&input, script).unwrap();
        let out = fs::File::create(&output).unwrap();
        // Why one file for both streams, as pg_regress does: psql prints rows to stdout and messages
        // to stderr, and a statement's output is both, in the order they came.
        let status = Command::new(bin("psql"))
            .args(["-X", "-q", "-h", &self.cluster.socket_dir(), "-p", &self.cluster.port.to_string(), "-U", "postgres", "-d", &self.database])
            .env("PGTZ", "UTC")
            .stdin(fs::File::open(&input).unwrap())
            .stdout(Stdio::from(out.try_clone().unwrap()))
            .stderr(Stdio::from(out))
            .status()
            .expect("psql");
        assert!(status.success(), "psql failed to run: {}", read(&output));
        let text = self.to_shown(&read(&output));
        let mut per_statement: Vec<Vec<String>> = Vec::new();
        for line in text.lines() {
            if line.starts_with(MARK) {
                per_statement.push(Vec::new());
            } else if let Some(current) = per_statement.last_mut() {
                current.push(line.to_string());
            }
        }
        assert_eq!(per_statement.len(), statements.len(), "psql's output lost a statement's marker:\n{text}");
        per_statement
    }

    fn to_machine(&self, text: &str) -> String {
        to_machine(&self.host, text)
    }

    /// psql's output as the page shows it: this machine's address back to the page's host name.
    fn to_shown(&self, text: &str) -> String {
        match &self.host {
            Some((name, here)) => text.replace(here.as_str(), &format!("host={name}")),
            None => text.to_string(),
        }
    }
}

/// `text` with `host=HOST` written as the second server's socket, where the page has one.
fn to_machine(host: &Option<(String, String)>, text: &str) -> String {
    match host {
        Some((name, here)) => text.replace(&format!("host={name}"), here),
        None => text.to_string(),
    }
}

/// A database of its own for a page, named after it.
fn database_for(page: &str) -> String {
    let stem = Path::new(page).file_stem().unwrap().to_string_lossy().to_lowercase();
    format!("examples_{}", stem.replace(['-', '.'], "_"))
}

fn create_database(cluster: &Cluster, database: &str, with_extension: bool) {
    let mut db = cluster.connect();
    db.batch_execute(&format!("DROP DATABASE IF EXISTS {database}")).unwrap();
    db.batch_execute(&format!("CREATE DATABASE {database}")).unwrap();
    if with_extension {
        cluster.connect_to(database).batch_execute("CREATE EXTENSION pg_idgen").unwrap();
    }
}

fn create_roles(cluster: &Cluster, roles: &[String]) {
    for role in roles {
        cluster.connect().batch_execute(&format!("DO $$ BEGIN CREATE ROLE {role}; EXCEPTION WHEN duplicate_object THEN NULL; END $$")).unwrap();
    }
}

/// Starts a cluster that preloads pg_idgen with `settings`.
fn preloaded(name: &str, settings: &[String]) -> Cluster {
    let cluster = Cluster::init(name);
    let mut lines = vec!["shared_preload_libraries = 'pg_idgen'".to_string()];
    lines.extend(settings.iter().cloned());
    cluster.configure(&lines.iter().map(String::as_str).collect::<Vec<_>>());
    cluster.start();
    cluster
}

/// What running a page found: its failures, and how many examples ran and were compared.
#[derive(Default)]
struct Outcome {
    failures: Vec<String>,
    ran: usize,
    compared: usize,
}

/// Runs a page's examples on a cluster of its own (and the second server it declares).
fn run_page(page: &Page) -> Outcome {
    let mut outcome = Outcome { failures: page.malformed.iter().map(|m| format!("{}: {m}", page.name)).collect(), ..Outcome::default() };
    if page.examples.is_empty() {
        return outcome;
    }
    let database = database_for(&page.name);
    let slug = database.trim_start_matches("examples_").to_string();
    let second = page.setup.second.as_ref().map(|(host, db)| {
        let cluster = Cluster::init(&format!("examples-{slug}-second"));
        cluster.configure(&[]);
        cluster.start();
        create_database(&cluster, db, false);
        create_roles(&cluster, &page.setup.roles);
        (host.clone(), cluster, db.clone())
    });
    let host = second.as_ref().map(|(name, cluster, _)| (name.clone(), format!("host={} port={}", cluster.socket_dir(), cluster.port)));
    // The page's own server, started when its first example runs (after the second server's).
    let mut own: Option<Cluster> = None;
    let mut judges: BTreeMap<bool, Judge> = BTreeMap::new();
    let mut i = 0;
    while i < page.examples.len() {
        let place = page.examples[i].place.clone();
        let mut end = i;
        while end < page.examples.len() && page.examples[end].place == place {
            end += 1;
        }
        let run = &page.examples[i..end];
        let server = match place {
            Place::Second => {
                let (_, cluster, db) = second.as_ref().unwrap();
                Server { cluster, database: db.clone(), host: host.clone() }
            }
            Place::Main => {
                if own.is_none() {
                    let settings: Vec<String> = if page.setup.settings.is_empty() {
                        vec!["pg_idgen.node_id = 1".into()]
                    } else {
                        page.setup.settings.iter().map(|s| to_machine(&host, s)).collect()
                    };
                    let cluster = preloaded(&format!("examples-{slug}"), &settings);
                    create_roles(&cluster, &page.setup.roles);
                    create_database(&cluster, &database, !page.setup.without_extension);
                    if let Some(ready) = &page.setup.ready {
                        wait_until(&mut cluster.connect_to(&database), ready);
                    }
                    own = Some(cluster);
                }
                Server { cluster: own.as_ref().unwrap(), database: database.clone(), host: host.clone() }
            }
        };
        let statements: Vec<&str> = run.iter().map(|e| e.statement.as_str()).collect();
        let printed = server.run(&statements);
        let judge = judges.entry(place == Place::Second).or_insert_with(|| Judge::new(server.cluster, &server.database));
        for (example, actual) in run.iter().zip(&printed) {
            outcome.ran += 1;
            if !example.shown.is_empty() {
                outcome.compared += 1;
            }
            if let Err(how) = compare(&example.shown, actual, &mut |s, a| judge.varies(s, a)) {
                outcome.failures.push(format!(
                    "{}:{}: {}\n  {how}\n  shown:\n{}\n  psql printed:\n{}",
                    page.name,
                    example.line,
                    example.statement.replace('\n', "\n    "),
                    indent(&example.shown),
                    indent(actual)
                ));
            }
        }
        i = end;
    }
    outcome
}

fn indent(lines: &[String]) -> String {
    lines.iter().map(|l| format!("    | {l}")).collect::<Vec<_>>().join("\n")
}

/// Polls `query` until it returns true, for at most 90 s.
fn wait_until(db: &mut Client, query: &str) {
    let deadline = Instant::now() + scaled(Duration::from_secs(90));
    loop {
        if db.query_one(query, &[]).is_ok_and(|row| row.get::<_, Option<bool>>(0) == Some(true)) {
            return;
        }
        assert!(Instant::now() < deadline, "the page's server was not ready in 90 s: {query}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Claim: every SQL example of README.md and docs/*.md (a page added later included) runs, page by
/// page in reading order, each page in a fresh database of a fresh cluster that preloads pg_idgen
/// (with the settings and servers the page declares), and gives exactly the output its page shows, apart from what must
/// vary by the one rule of `Judge::varies`; a statement that shows no output does not fail. Before
/// that, the rule itself: it accepts an id and a time made now for the ones a page shows, and refuses
/// a wrong decoded time, a wrong number and a wrong prefix, so the comparison can fail.
#[test]
fn every_example_of_the_manual_runs_and_shows_what_comes_out() {
    let rule = preloaded("examples-rule", &["pg_idgen.node_id = 1".to_string()]);
    create_database(&rule, "examples_judge", true);
    let mut judge = Judge::new(&rule, "examples_judge");
    let made: String = judge.db.query_one("SELECT snowflake_next()::text", &[]).unwrap().get(0);
    let made_uuid: String = judge.db.query_one("SELECT uuid_v7_next()::text", &[]).unwrap().get(0);
    let now: String = judge.db.query_one("SELECT now()::text", &[]).unwrap().get(0);
    assert!(judge.varies("250039022221529134", &made), "a snowflake id made now stands for the one shown");
    assert!(judge.varies("017f22e2-79b0-7cc3-98c4-dc0c0c07398f", &made_uuid), "a UUIDv7 made now too");
    assert!(judge.varies("2026-11-22 14:30:07.263+00", &now.replace("-00", "+00")), "a time of the run too: {now}");
    assert!(!judge.varies("2025-01-01 00:00:01+00", "2025-01-01 00:00:02+00"), "a time decoded from a given id is compared");
    assert!(!judge.varies("250039022221529134", "250039022221529135"), "an id not made now is compared");
    assert!(!judge.varies("17189", "1"), "a number that is no pid of the server is compared");
    let worker: String = judge.db.query_one("SELECT clock_worker_pid::text FROM pg_idgen_status()", &[]).unwrap().get(0);
    assert!(judge.varies("17189", &worker), "the pid of the server's clock worker stands for the one shown");
    assert!(!judge.varies("695735a5…", "695735a6a1b2c3d4e5f60718"), "an elided value keeps its prefix");
    assert!(compare(&["ERROR:  x".into()], &["ERROR:  y".into()], &mut |_, _| false).is_err(), "messages are compared");
    drop(judge);
    drop(rule);

    let mut failures = Vec::new();
    let (mut ran, mut compared, mut skipped) = (0, 0, 0);
    for path in manual_pages() {
        let name = page_name(&path);
        let page = Page::parse(&name, &read(&path));
        let outcome = run_page(&page);
        println!("{name}: {} examples run, {} of them compared, {} blocks not run", outcome.ran, outcome.compared, page.not_run.len());
        for (line, reason) in &page.not_run {
            println!("  {name}:{line}: not run: {reason}");
        }
        ran += outcome.ran;
        compared += outcome.compared;
        skipped += page.not_run.len();
        failures.extend(outcome.failures);
    }
    println!("in all: {ran} examples run, {compared} compared, {skipped} blocks not run");
    assert!(ran > 60 && compared > 20, "only {ran} examples found ({compared} compared): is the scan of the manual broken?");
    assert!(failures.is_empty(), "{} examples of the manual fail:\n\n{}", failures.len(), failures.join("\n\n"));
}

/// Claim: the reading of a page splits statements where a reader would, takes the `--` lines under
/// a statement as its output and a comment after a blank line as prose, honours `-- not run:`, and
/// the comparison leaves out the header and alignment but no row, cell or message.
#[test]
fn a_page_is_read_as_its_reader_reads_it() {
    let text = "<!-- examples:\nrole: app\n-->\n\n```sql\n-- prose\nSELECT 1,\n       2;   -- a remark\n--  a | b\n-- ---+---\n--  1 | 2\n\n-- more prose\nCREATE TABLE t (x int);\n\\x on\nSELECT 'a;--' AS s \\gx\n-- s | a;--\n```\n\n```sql\n-- not run: needs a cluster of its own\nSELECT 3;\n```\n\nInline: `SELECT 4` → `4`, and `SELECT 5;`.\n";
    let page = Page::parse("t.md", text);
    assert!(page.malformed.is_empty(), "{:?}", page.malformed);
    assert_eq!(page.setup.roles, ["app"]);
    let statements: Vec<&str> = page.examples.iter().map(|e| e.statement.as_str()).collect();
    assert_eq!(
        statements,
        ["SELECT 1,\n       2;   -- a remark", "CREATE TABLE t (x int);", "\\x on", "SELECT 'a;--' AS s \\gx", "SELECT 4;", "SELECT 5;"]
    );
    assert_eq!(page.examples[0].shown, [" a | b", "---+---", " 1 | 2"]);
    assert!(page.examples[1].shown.is_empty(), "prose after a blank line is no output");
    assert_eq!(page.examples[3].shown, ["s | a;--"]);
    assert_eq!(page.examples[4].shown, ["4"]);
    assert_eq!(page.not_run, [(21, "needs a cluster of its own".to_string())]);

    let psql: Vec<String> = [" a | b ", "---+---", " 1 | 2"].map(String::from).to_vec();
    let mut never = |_: &str, _: &str| false;
    assert!(compare(&page.examples[0].shown, &psql, &mut never).is_ok());
    assert!(compare(&["1 | 2".into()], &psql, &mut never).is_ok(), "the header may be left out");
    assert!(compare(&["1 | 3".into()], &psql, &mut never).is_err(), "a cell is compared");
    assert!(compare(&["a | b".into()], &psql, &mut never).is_err(), "no row may be left out");
    assert!(compare(&[], &["ERROR:  boom".into()], &mut never).is_err(), "an error must be shown");
    assert!(
        compare(&["NOTICE:  done".into()], &["NOTICE:  done".into(), " f ".into(), "---".into(), " ".into()], &mut never).is_ok(),
        "messages alone compare messages"
    );
}
