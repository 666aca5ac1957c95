//! The Rust files of a project kept in memory between lints, for the language server: what each
//! declares ([`CrateTypes`]) and what its functions do for callers ([`CrateSummaries`]), so that
//! an open Rust file is lowered with the crate's other files in view, as `streamlint check`
//! lowers it, without reading the crate again at each keystroke.
//!
//! As in a run, a file is first lowered with the crate's types alone (what it does for the other
//! files comes from that lowering), and lowered again with the crate's summaries only when it
//! calls a function another file summarizes. The lowering made when the editor's text is taken
//! in serves the lint of that text that follows.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use rayon::prelude::*;
use streamlint_graph::Deadline;
use streamlint_rules::Finding;
use streamlint_rust::{Callees, CrateSummaries, CrateTypes, LoweredFile};

use crate::run::{load, Loaded};
use crate::workspace::text_digest;
use crate::{judge, worth_parsing, Language, Settings};

/// What the crate keeps of one Rust file with GPU code.
#[derive(PartialEq)]
struct Entry {
    types: CrateTypes,
    summaries: CrateSummaries,
}

/// Every file's declarations and summaries together, and the names calls reach them by.
struct Merged {
    types: CrateTypes,
    summaries: CrateSummaries,
    callees: Callees,
}

#[derive(Default)]
pub(crate) struct RustFiles {
    files: HashMap<PathBuf, (Entry, u64)>,
    /// Made when a check first needs it, dropped when a file's change changes what it holds.
    merged: OnceLock<Merged>,
    /// The lowering of the text last taken in from the editor (its path and digest), for the
    /// lint of that text.
    last: Mutex<Option<(PathBuf, u64, LoweredFile)>>,
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
                let entry = entry(text, lowered_alone(text, &types, settings).as_ref());
                (path.clone(), (entry, text_digest(text)))
            })
            .collect();
        RustFiles {
            files,
            ..RustFiles::default()
        }
    }

    fn merged(&self) -> &Merged {
        self.merged.get_or_init(|| {
            let mut types = CrateTypes::default();
            let mut summaries = CrateSummaries::default();
            for (entry, _) in self.files.values() {
                types.merge(entry.types.clone());
                summaries.merge(entry.summaries.clone());
            }
            let callees = summaries.callees();
            Merged {
                types,
                summaries,
                callees,
            }
        })
    }

    /// Check `source` as the Rust file at `path`, seeing the crate's other files.
    pub(crate) fn check(&self, path: &Path, source: &str, settings: &Settings) -> Vec<Finding> {
        if !worth_parsing(Language::Rust, source.as_bytes(), settings) {
            return Vec::new();
        }
        let merged = self.merged();
        let digest = text_digest(source);
        let kept = self
            .last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .filter(|(p, d, _)| p == path && *d == digest)
            .map(|(.., lowered)| lowered);
        let lowered = match kept {
            Some(f) if !merged.callees.called_from(source, &f.summaries) => Ok(f.bodies),
            // The lowering takes the file's own declarations, as they are now, over the kept ones.
            _ => streamlint_rust::lower_source_in(
                source,
                Deadline::after(settings.file_time_limit),
                &merged.types,
                &merged.summaries,
            )
            .map(|f| f.bodies)
            .map_err(|e| (e.offset, e.message)),
        };
        let mut decided = judge(source, Language::Rust, lowered, settings);
        crate::disciplines::settle_alone(&mut decided, Some(source));
        decided.findings
    }

    /// Read the Rust file at `path` again, from `text` (the editor's) or from the disk. Returns
    /// whether what the other files see of it changed.
    pub(crate) fn update(&mut self, path: &Path, text: Option<&str>, settings: &Settings) -> bool {
        let from_editor = text.is_some();
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
        let entry = text.as_deref().map(|text| {
            let lowered = lowered_alone(text, &self.merged().types, settings);
            let entry = entry(text, lowered.as_ref());
            let digest = text_digest(text);
            if let (true, Some(lowered)) = (from_editor, lowered) {
                let last = self.last.get_mut().unwrap_or_else(|e| e.into_inner());
                *last = Some((path.to_path_buf(), digest, lowered));
            }
            (entry, digest)
        });
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

/// A file lowered with the crate's `types` alone, as a run first lowers it (`None` when it has
/// no GPU code or does not parse).
fn lowered_alone(text: &str, types: &CrateTypes, settings: &Settings) -> Option<LoweredFile> {
    if !worth_parsing(Language::Rust, text.as_bytes(), settings) {
        return None;
    }
    let deadline = Deadline::after(settings.file_time_limit);
    streamlint_rust::lower_source_in(text, deadline, types, &CrateSummaries::default()).ok()
}

/// What the crate keeps of a file with this text and this lowering.
fn entry(text: &str, lowered: Option<&LoweredFile>) -> Entry {
    Entry {
        types: CrateTypes::of_file(text),
        summaries: lowered.map(|f| f.summaries.clone()).unwrap_or_default(),
    }
}
