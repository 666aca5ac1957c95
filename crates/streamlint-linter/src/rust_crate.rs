//! The Rust files of a project kept in memory between lints, for the language server: what each
//! declares ([`CrateTypes`]) and what its functions do for callers ([`CrateSummaries`]), so that
//! an open Rust file is lowered with the crate's other files in view, as `streamlint check`
//! lowers it, without reading the crate again at each keystroke.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rayon::prelude::*;
use streamlint_graph::Deadline;
use streamlint_rules::Finding;
use streamlint_rust::{CrateSummaries, CrateTypes};

use crate::run::{load, Loaded};
use crate::workspace::text_digest;
use crate::{judge, worth_parsing, Language, Settings};

/// What the crate keeps of one Rust file with GPU code.
#[derive(PartialEq)]
struct Entry {
    types: CrateTypes,
    summaries: CrateSummaries,
}

#[derive(Default)]
pub(crate) struct RustFiles {
    files: HashMap<PathBuf, (Entry, u64)>,
    /// Every file's declarations and summaries together: made when a check first needs them,
    /// dropped when a file's change changes them.
    merged: OnceLock<(CrateTypes, CrateSummaries)>,
}

impl RustFiles {
    /// Read the Rust files among `paths`: first what each declares, then, with the crate's
    /// declarations, what each one's functions do.
    pub(crate) fn scan(paths: &[PathBuf], settings: &Settings) -> RustFiles {
        let texts: Vec<(PathBuf, String)> = paths
            .par_iter()
            .filter(|p| Language::of(p) == Some(Language::Rust))
            .filter_map(|path| match load(path, settings, false) {
                Loaded::Text(t) => Some((path.clone(), t.source)),
                _ => None,
            })
            .collect();
        let mut types = CrateTypes::default();
        for (_, text) in &texts {
            types.merge(CrateTypes::of_file(text));
        }
        let files = texts
            .par_iter()
            .map(|(path, text)| {
                let entry = entry(text, &types, settings);
                (path.clone(), (entry, text_digest(text)))
            })
            .collect();
        RustFiles {
            files,
            merged: OnceLock::new(),
        }
    }

    fn merged(&self) -> &(CrateTypes, CrateSummaries) {
        self.merged.get_or_init(|| {
            let mut types = CrateTypes::default();
            let mut summaries = CrateSummaries::default();
            for (entry, _) in self.files.values() {
                types.merge(entry.types.clone());
                summaries.merge(entry.summaries.clone());
            }
            (types, summaries)
        })
    }

    /// Check `source` as the Rust file at `path`, seeing the crate's other files.
    pub(crate) fn check(&self, source: &str, settings: &Settings) -> Vec<Finding> {
        if !worth_parsing(Language::Rust, source.as_bytes(), settings) {
            return Vec::new();
        }
        // The lowering takes the file's own declarations, as they are now, over the kept ones.
        let (types, summaries) = self.merged();
        let deadline = Deadline::after(settings.file_time_limit);
        let lowered = streamlint_rust::lower_source_in(source, deadline, types, summaries)
            .map(|f| f.bodies)
            .map_err(|e| (e.offset, e.message));
        let mut decided = judge(source, Language::Rust, lowered, settings);
        crate::disciplines::settle_alone(&mut decided, Some(source));
        decided.findings
    }

    /// Read the Rust file at `path` again, from `text` or from the disk. Returns whether what
    /// the other files see of it changed.
    pub(crate) fn update(&mut self, path: &Path, text: Option<&str>, settings: &Settings) -> bool {
        let text = match text {
            Some(text) => Some(text.to_string()),
            None => match load(path, settings, false) {
                Loaded::Text(t) => Some(t.source),
                _ => None,
            },
        };
        let digest = text.as_deref().map(text_digest);
        if digest.is_some() && self.files.get(path).map(|(_, d)| *d) == digest {
            return false;
        }
        let entry = text
            .as_deref()
            .map(|text| (entry(text, &self.merged().0, settings), text_digest(text)));
        let before = self.files.get(path).map(|(e, _)| e);
        let changed = before != entry.as_ref().map(|(e, _)| e);
        match entry {
            Some(entry) => self.files.insert(path.to_path_buf(), entry),
            None => self.files.remove(path),
        };
        if changed {
            self.merged = OnceLock::new();
        }
        changed
    }

    /// Does the project keep the Rust file at `path`?
    pub(crate) fn holds(&self, path: &Path) -> bool {
        self.files.contains_key(path)
    }
}

/// What the crate keeps of a file with this text, its structs seen with the crate's `types`.
fn entry(text: &str, types: &CrateTypes, settings: &Settings) -> Entry {
    let summaries = if worth_parsing(Language::Rust, text.as_bytes(), settings) {
        let deadline = Deadline::after(settings.file_time_limit);
        streamlint_rust::lower_source_in(text, deadline, types, &CrateSummaries::default())
            .map(|f| f.summaries)
            .unwrap_or_default()
    } else {
        CrateSummaries::default()
    };
    Entry {
        types: CrateTypes::of_file(text),
        summaries,
    }
}
