//! The mark file's format, which is also the payload of pg_idgen's WAL records: a format line,
//! then one line per field. Pure text and arithmetic: no PostgreSQL, no shared memory.
//!
//! ```text
//! pg_idgen mark 1
//! mark_us snowflake 1763800000123456
//! mark_us objectid 1763800000123456
//! mark_us uuid7 1763800000123456
//! snowflake_layout twitter 41 10 12 1 1735689600000000
//! node_id 7
//! snowflake_made true
//! ```

use crate::families::{self, COUNT as FAMILIES, FAMILIES as REGISTRY};
use crate::layout::{Layout, Preset};

/// The first line of the file format; a later format gets a new number.
pub const FORMAT_LINE: &str = "pg_idgen mark 1";
/// The families every file of format 1 names; their marks may not be missing. A family added to the
/// registry later may be (see `parse`).
const FAMILIES_OF_FORMAT_1: [&str; 3] = ["snowflake", "objectid", "uuid7"];
/// The line a data directory made by pg_upgrade gets instead of a mark (see `mark::read_at_start`).
pub const MADE_BY_PG_UPGRADE: &str = "made_by_pg_upgrade";
/// The snowflake family's mark: the one the record's layout and node id are about.
pub const SNOWFLAKE: usize = families::SNOWFLAKE.index;

/// What a mark file or WAL record says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MarkRecord {
    /// One mark per family, in registry order (`families::FAMILIES`).
    pub marks_us: [i64; FAMILIES],
    /// The snowflake layout in use; None in a file of version 0.2, which did not say.
    pub layout: Option<Layout>,
    pub node_id: Option<u32>,
    /// Whether snowflake ids may have been made under this data directory: true once a node id
    /// was set (snowflake ids need one) or a snowflake floor was advanced; then it stays true.
    pub snowflake_made: bool,
}

impl MarkRecord {
    /// The later of two records, family by family (a crash between writing the two copies leaves
    /// one newer; either is durable).
    pub fn later(&self, other: &MarkRecord) -> MarkRecord {
        // The layout of the later snowflake mark: that copy was written last (ties: the main file).
        let newer = if self.marks_us[SNOWFLAKE] >= other.marks_us[SNOWFLAKE] { self } else { other };
        MarkRecord {
            marks_us: std::array::from_fn(|i| self.marks_us[i].max(other.marks_us[i])),
            snowflake_made: self.snowflake_made || other.snowflake_made,
            ..*newer
        }
    }

    pub fn latest_us(&self) -> i64 {
        self.marks_us.iter().copied().max().unwrap_or(0)
    }

    /// A record of version 0.2: one mark for all.
    pub fn version02(mark_us: i64) -> MarkRecord {
        MarkRecord { marks_us: [mark_us; FAMILIES], layout: None, node_id: None, snowflake_made: true }
    }

    pub fn to_text(self) -> String {
        let mut text = format!("{FORMAT_LINE}\n");
        for (family, mark_us) in REGISTRY.iter().zip(self.marks_us) {
            text += &format!("mark_us {} {mark_us}\n", family.key);
        }
        if let Some(l) = self.layout {
            text +=
                &format!("snowflake_layout {} {} {} {} {} {}\n", l.preset.name(), l.time_bits, l.node_bits, l.sequence_bits, l.unit_ms, l.epoch_us);
        }
        text += &format!("node_id {}\n", self.node_id.map_or("unset".into(), |n| n.to_string()));
        text += &format!("snowflake_made {}\n", self.snowflake_made);
        text
    }
}

/// What one copy of the file holds.
#[derive(Debug, PartialEq)]
pub enum FileContent {
    Missing,
    Damaged(String),
    Record(MarkRecord),
    /// Version 0.2's format, a bare number: one file, no copy, no layout.
    Version02(MarkRecord),
    /// Written by a start under pg_upgrade into a data directory that had no mark: the ids the
    /// old cluster made are unknown until its file is copied in.
    MadeByPgUpgrade,
}

impl FileContent {
    /// A file of version 0.2 beside another copy is taken as a record like any other.
    pub fn without_version(self) -> FileContent {
        match self {
            FileContent::Version02(record) => FileContent::Record(record),
            other => other,
        }
    }
}

/// Parses the file format (also the payload of a WAL record). A bare number is version 0.2's
/// format: the mark alone.
pub fn parse(text: &str) -> FileContent {
    let damaged = || FileContent::Damaged(text.trim().chars().take(80).collect());
    if let Ok(mark_us) = text.trim().parse::<i64>() {
        return FileContent::Version02(MarkRecord::version02(mark_us));
    }
    let mut lines = text.lines();
    if lines.next() != Some(FORMAT_LINE) {
        return damaged();
    }
    let (mut marks_us, mut layout, mut node_id, mut snowflake_made) = ([None; FAMILIES], None, None, None);
    for line in lines {
        let mut words = line.split_whitespace();
        let (Some(key), values) = (words.next(), words.collect::<Vec<_>>()) else { continue };
        match (key, values.as_slice()) {
            (MADE_BY_PG_UPGRADE, []) => return FileContent::MadeByPgUpgrade,
            ("mark_us", [key, v]) => match (families::by_key(key), v.parse::<i64>()) {
                (Some(family), Ok(mark_us)) => marks_us[family.index] = Some(mark_us),
                // An unknown family: the file of a later version, which made ids this one cannot
                // place; or a value that is not a number.
                _ => return damaged(),
            },
            ("snowflake_layout", [preset, time, node, sequence, unit, epoch]) => {
                let number = |v: &str| v.parse::<u64>().ok();
                layout = match (Preset::from_name(preset), number(time), number(node), number(sequence), number(unit), epoch.parse().ok()) {
                    (Some(preset), Some(t), Some(n), Some(s), Some(unit_ms), Some(epoch_us)) => {
                        match Layout::new(preset, t as u32, n as u32, s as u32, unit_ms, epoch_us) {
                            Ok(layout) => Some(layout),
                            Err(_) => return damaged(),
                        }
                    }
                    _ => return damaged(),
                }
            }
            ("node_id", ["unset"]) => node_id = Some(None),
            ("node_id", [v]) => match v.parse::<u32>() {
                Ok(n) => node_id = Some(Some(n)),
                Err(_) => return damaged(),
            },
            ("snowflake_made", [v]) => snowflake_made = v.parse::<bool>().ok(),
            _ => return damaged(),
        }
    }
    match (marks_us, node_id, snowflake_made) {
        (marks_us, Some(node_id), Some(snowflake_made))
            if FAMILIES_OF_FORMAT_1.iter().all(|key| families::by_key(key).is_some_and(|f| marks_us[f.index].is_some())) =>
        {
            // A family added later is missing from a file written before it existed: it has made
            // no ids under this data directory, so its mark is the beginning of time.
            let marks_us = marks_us.map(|mark_us| mark_us.unwrap_or_default());
            FileContent::Record(MarkRecord { marks_us, layout, node_id, snowflake_made })
        }
        _ => damaged(),
    }
}

#[cfg(test)]
mod tests {
    use super::{parse, FileContent, MarkRecord, FAMILIES};
    use crate::layout::{Layout, Preset};

    #[test]
    fn a_record_round_trips_through_the_file_format() {
        let layout =
            Layout { preset: Preset::Sonyflake, time_bits: 39, node_bits: 16, sequence_bits: 8, unit_ms: 10, epoch_us: 1_735_689_600_000_000 };
        // Marks that differ family by family, whatever the registry holds.
        let marks_us = std::array::from_fn(|i| 1_763_800_000_123_456 + i as i64 * 1_000_000_007);
        for record in [
            MarkRecord { marks_us, layout: Some(layout), node_id: Some(7), snowflake_made: true },
            MarkRecord { marks_us: [5; FAMILIES], layout: None, node_id: None, snowflake_made: false },
        ] {
            assert_eq!(parse(&record.to_text()), FileContent::Record(record));
        }
        assert_eq!(parse("1763800000123456\n"), FileContent::Version02(MarkRecord::version02(1_763_800_000_123_456)), "version 0.2's bare number");
        let bad_bits = "pg_idgen mark 1\nmark_us snowflake 5\nmark_us objectid 5\nmark_us uuid7 5\nsnowflake_layout twitter 70 10 12 1 0\nnode_id 1\nsnowflake_made true\n";
        assert!(matches!(parse(bad_bits), FileContent::Damaged(_)), "a layout that cannot be");
        assert!(matches!(parse("not a time"), FileContent::Damaged(_)));
        let bad_node = "pg_idgen mark 1\nmark_us snowflake 5\nmark_us objectid 5\nmark_us uuid7 5\nnode_id 7x\nsnowflake_made true\n";
        assert!(matches!(parse(bad_node), FileContent::Damaged(_)), "a node id that is not a number");
        assert!(matches!(parse("pg_idgen mark 1\nmark_us snowflake 5\n"), FileContent::Damaged(_)), "fields missing");
        let unknown_family =
            "pg_idgen mark 1\nmark_us snowflake 5\nmark_us objectid 5\nmark_us uuid7 5\nmark_us ulid 5\nnode_id 7\nsnowflake_made true\n";
        assert!(matches!(parse(unknown_family), FileContent::Damaged(_)), "a family this version does not know");
        let bad_mark = "pg_idgen mark 1\nmark_us snowflake 5x\nmark_us objectid 5\nmark_us uuid7 5\nnode_id 7\nsnowflake_made true\n";
        assert!(matches!(parse(bad_mark), FileContent::Damaged(_)), "a mark that is not a number");
        assert!(matches!(parse("pg_idgen mark 2\nmark_us snowflake 5\n"), FileContent::Damaged(_)), "a later format");
        assert_eq!(parse("pg_idgen mark 1\nmade_by_pg_upgrade\n"), FileContent::MadeByPgUpgrade);
    }
}
