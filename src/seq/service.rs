//! The sections of per-key sequences as a service of the database worker (`SECTIONS`): from this
//! database's tables (`raise::LocalSections`), or leased from the segment authority
//! (`leased::LeasedSections`, with `pg_idgen.seq_sections = authority`).

use std::ffi::CStr;

use pgrx::pg_sys;

use super::leased::LeasedSections;
use super::raise::LocalSections;
use crate::settings;
use crate::worker::{Service, Serving};

/// The sections of per-key sequences, as the database worker serves them.
pub struct Sections;

pub static SECTIONS: Sections = Sections;

impl Service for Sections {
    fn describe(&self) -> String {
        let segments = &settings::config().segments;
        match segments.authority.as_ref().filter(|_| segments.seq_leased) {
            Some(authority) => {
                format!("the sections of per-key sequences leased from the segment authority ({})", crate::remote::describe_conninfo(authority))
            }
            None => "the sections of per-key sequences from its tables".into(),
        }
    }

    fn start(&self) -> Box<dyn Serving> {
        let segments = &settings::config().segments;
        match segments.authority.as_ref().filter(|_| segments.seq_leased) {
            Some(authority) => Box::new(LeasedSections::new(authority)),
            None => Box::new(LocalSections),
        }
    }

    fn retire_database(&self, database: pg_sys::Oid) {
        super::cache::retire_database(database);
    }

    fn cached_tables(&self) -> &'static [&'static CStr] {
        super::spaces::CACHED_TABLES
    }
}
