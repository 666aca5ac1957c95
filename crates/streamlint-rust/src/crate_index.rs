//! What the files of a crate tell each other: the structs and aliases they declare
//! ([`CrateTypes`], read before any file is lowered) and what their functions do to the streams
//! and slices they are given ([`CrateSummaries`], read from each file's lowering), so that a
//! method in one file sees its struct's fields declared in another, and a call sees a helper
//! defined in another file.
//!
//! Declarations are known by name alone, without modules: a name that two files declare
//! differently (two backends' `Device`, two modules' `fn launch`) is known in neither.

use aho_corasick::AhoCorasick;
use rustc_hash::FxHashMap;
use syn::visit::Visit;

use crate::lower::Summary;
use crate::model::{type_kind, TypeKind};
use crate::{skim, StructFields};

/// The GPU-typed fields of the structs the files of a crate declare, by struct name, so that a
/// method in one file sees the fields its struct declares in another. A name that two files
/// declare with different fields (two crates' `Device`) is known in neither.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CrateTypes {
    fields: FxHashMap<String, Option<Vec<(String, TypeKind)>>>,
    /// Type aliases of GPU types (`type Queue = Arc<CudaStream>;`), by name.
    aliases: FxHashMap<String, Option<TypeKind>>,
}

impl CrateTypes {
    /// The structs `source` declares with GPU-typed fields, and its aliases of GPU types. Each
    /// item is parsed on its own: the file as a whole is parsed only when it is lowered.
    pub fn of_file(source: &str) -> CrateTypes {
        let (struct_items, alias_items) = skim::gpu_items(source);
        let mut aliases = FxHashMap::default();
        for item in alias_items {
            if let Ok(t) = syn::parse_str::<syn::ItemType>(item) {
                if let Some(kind) = type_kind(&t.ty) {
                    aliases.insert(t.ident.to_string(), kind);
                }
            }
        }
        let mut found = StructFields {
            aliases,
            ..StructFields::default()
        };
        for item in struct_items {
            if let Ok(s) = syn::parse_str::<syn::ItemStruct>(item) {
                found.visit_item_struct(&s);
            }
        }
        // Spans of these parses would shift the next file's.
        proc_macro2::extra::invalidate_current_thread_spans();
        CrateTypes {
            fields: known(found.fields),
            aliases: known(found.aliases),
        }
    }

    /// Add another file's structs and aliases.
    pub fn merge(&mut self, other: CrateTypes) {
        merge_declarations(&mut self.fields, other.fields);
        merge_declarations(&mut self.aliases, other.aliases);
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Vec<(String, TypeKind)>> {
        self.fields.get(name)?.as_ref()
    }

    /// The aliases every file that declares them agrees on.
    pub(crate) fn known_aliases(&self) -> impl Iterator<Item = (&str, TypeKind)> {
        self.aliases
            .iter()
            .filter_map(|(name, kind)| Some((name.as_str(), (*kind)?)))
    }
}

/// One file's declarations, each known.
fn known<V>(declared: FxHashMap<String, V>) -> FxHashMap<String, Option<V>> {
    declared.into_iter().map(|(k, v)| (k, Some(v))).collect()
}

/// Declarations by name: one declared differently in two files is known in neither (`None`).
fn merge_declarations<V: PartialEq>(
    into: &mut FxHashMap<String, Option<V>>,
    from: FxHashMap<String, Option<V>>,
) {
    for (name, declared) in from {
        match into.get(&name) {
            Some(known) if *known != declared => {
                into.insert(name, None);
            }
            Some(_) => {}
            None => {
                into.insert(name, declared);
            }
        }
    }
}

/// What the functions of a crate's files do for their callers, by the name a call reaches them
/// with: a free function by its name (`copy_into`, whatever module path the call spells), a
/// method by its type and name (`Loader::upload`, for `self.upload(..)` in its `impl`), and a
/// method by its name alone (`.upload`, for `loader.upload(..)` on a value whose type the
/// lowering does not know, trait methods and generic receivers among them) when every type of
/// the crate that defines a method of that name agrees on what it does.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CrateSummaries {
    by_key: FxHashMap<String, Option<Summary>>,
}

impl CrateSummaries {
    /// Record what `key`'s function does; two functions of one key that differ make it unknown.
    pub(crate) fn declare(&mut self, key: String, summary: Summary) {
        merge_declarations(
            &mut self.by_key,
            FxHashMap::from_iter([(key, Some(summary))]),
        );
    }

    /// Add another file's functions.
    pub fn merge(&mut self, other: CrateSummaries) {
        merge_declarations(&mut self.by_key, other.by_key);
    }

    /// What a call in this file may reach: this file's own functions (`self`), then the crate's
    /// (`crate_summaries`). A method reached by name alone may be another type's: the file's
    /// and the crate's must agree on it.
    pub(crate) fn with_the_crates(&self, crate_summaries: &CrateSummaries) -> CrateSummaries {
        let mut by_key = self.by_key.clone();
        let by_name_alone = crate_summaries
            .by_key
            .iter()
            .filter(|(key, _)| key.starts_with('.'))
            .map(|(key, summary)| (key.clone(), summary.clone()));
        merge_declarations(&mut by_key, by_name_alone.collect());
        for (key, summary) in &crate_summaries.by_key {
            by_key.entry(key.clone()).or_insert_with(|| summary.clone());
        }
        CrateSummaries { by_key }
    }

    /// The summaries worth applying at a call: known, and doing something a call follows.
    pub(crate) fn useful(&self) -> impl Iterator<Item = (&str, &Summary)> {
        self.by_key.iter().filter_map(|(key, summary)| {
            let summary = summary.as_ref().filter(|s| !s.is_empty())?;
            Some((key.as_str(), summary))
        })
    }

    /// The names calls spell for these summaries, for [`Callees::called_from`].
    pub fn callees(&self) -> Callees {
        let mut by_name: FxHashMap<String, Vec<String>> = FxHashMap::default();
        for (key, _) in self.useful() {
            by_name
                .entry(callee_name(key).to_string())
                .or_default()
                .push(key.to_string());
        }
        let (names, keys): (Vec<String>, Vec<Vec<String>>) = by_name.into_iter().unzip();
        let scan = AhoCorasick::new(&names).ok();
        Callees { names, keys, scan }
    }
}

/// The crate's summarized functions by the name a call spells (made once for a run), with an
/// automaton that finds all those names in a text in one pass.
pub struct Callees {
    names: Vec<String>,
    /// Each name's keys, in the order of `names`.
    keys: Vec<Vec<String>>,
    scan: Option<AhoCorasick>,
}

impl Callees {
    /// Does `source`, whose own functions are `own`, call a function another file of the crate
    /// summarizes? (Its name appears as an identifier; the file's own definitions of that name
    /// do not count.) Only such files are lowered a second time, with the crate's summaries.
    pub fn called_from(&self, source: &str, own: &CrateSummaries) -> bool {
        let foreign = |name: usize| self.keys[name].iter().any(|k| !own.by_key.contains_key(k));
        if !(0..self.names.len()).any(foreign) {
            return false;
        }
        let Some(scan) = &self.scan else {
            return true;
        };
        let bytes = source.as_bytes();
        let part_of_identifier = |at: Option<&u8>| {
            at.is_some_and(|&b| b == b'_' || b.is_ascii_alphanumeric() || b >= 0x80)
        };
        scan.find_overlapping_iter(source).any(|m| {
            let before = m.start().checked_sub(1).and_then(|i| bytes.get(i));
            !part_of_identifier(before)
                && !part_of_identifier(bytes.get(m.end()))
                && foreign(m.pattern().as_usize())
        })
    }
}

/// The name a call spells for a summary's key (`Loader::upload` and `.upload` are called as
/// `upload`).
pub(crate) fn callee_name(key: &str) -> &str {
    key.rsplit([':', '.']).next().unwrap_or(key)
}

/// The key of a method's summary by its type and name (`Engine::upload`), so that methods of
/// two types with one name stay apart.
pub(crate) fn method_key(ty: &str, method: &str) -> String {
    format!("{ty}::{method}")
}

/// The key of a method's summary by its name alone, for receivers of unknown type.
pub(crate) fn method_name_key(method: &str) -> String {
    format!(".{method}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crates_structs_come_from_every_file_and_conflicts_know_nothing() {
        let engine = "use cudarc::driver::CudaStream;\n/// The engine (a `struct` of {braces}).\npub(crate) struct Engine {\n    /// queue (for uploads)\n    pub q: Arc<CudaStream>,\n    n: usize,\n}\npub struct Pair(Arc<CudaStream>, usize);\nstruct Plain { n: usize }\n";
        let structs = CrateTypes::of_file(engine);
        assert_eq!(
            structs.get("Engine"),
            Some(&vec![("q".to_string(), TypeKind::Stream)])
        );
        assert_eq!(
            structs.get("Pair"),
            Some(&vec![("0".to_string(), TypeKind::Stream)])
        );
        assert_eq!(structs.get("Plain"), None);
        // Another crate's `Engine` with other fields: neither is known.
        let mut all = structs.clone();
        all.merge(CrateTypes::of_file("struct Engine { s: CudaSlice<f32> }\n"));
        assert_eq!(all.get("Engine"), None);
        assert!(all.get("Pair").is_some());
        // The same declaration seen twice is still known.
        let mut twice = structs.clone();
        twice.merge(CrateTypes::of_file(engine));
        assert!(twice.get("Engine").is_some());
    }

    #[test]
    fn aliases_of_gpu_types_name_them_in_fields_and_across_files() {
        let types = CrateTypes::of_file(
            "pub type Queue = Arc<CudaStream>;\ntype Output = Self;\nstruct Pair { q: Queue, n: usize }\n",
        );
        let aliases: Vec<_> = types.known_aliases().collect();
        assert_eq!(aliases, [("Queue", TypeKind::Stream)]);
        assert_eq!(
            types.get("Pair"),
            Some(&vec![("q".to_string(), TypeKind::Stream)])
        );
        let mut both = types.clone();
        both.merge(CrateTypes::of_file("type Queue = CudaSlice<f32>;\n"));
        assert_eq!(both.known_aliases().count(), 0);
    }

    /// The crate's summaries of `files`, each lowered on its own.
    fn summaries_of(files: &[&str]) -> CrateSummaries {
        let mut all = CrateSummaries::default();
        for file in files {
            let lowered = crate::lower_source_in(
                file,
                streamlint_graph::Deadline::NONE,
                &CrateTypes::default(),
                &CrateSummaries::default(),
            );
            all.merge(lowered.unwrap().summaries);
        }
        all
    }

    const HELPER: &str = "pub fn upload(s: &CudaStream, h: &[f32], d: &mut CudaSlice<f32>) -> R {\n    s.memcpy_htod(h, d)\n}\n";

    #[test]
    fn a_file_is_lowered_again_only_when_it_calls_another_files_function() {
        let crate_summaries = summaries_of(&[HELPER]);
        let own = summaries_of(&["fn other(s: &CudaStream) {}\n"]);
        let callees = crate_summaries.callees();
        assert!(callees.called_from("fn f() { ops::upload(&s, &h, &mut d); }", &own));
        assert!(!callees.called_from("fn f() { uploaded(); }", &own));
        // The file that defines it calls its own.
        let helper_own = summaries_of(&[HELPER]);
        assert!(!callees.called_from(HELPER, &helper_own));
    }

    #[test]
    fn functions_two_files_define_differently_are_unknown() {
        let other = "pub fn upload(s: &CudaStream, h: &[f32], d: &mut CudaSlice<f32>) -> R {\n    Ok(())\n}\n";
        let same_twice = summaries_of(&[HELPER, HELPER]);
        assert_eq!(same_twice.useful().count(), 1);
        assert_eq!(summaries_of(&[HELPER, other]).useful().count(), 0);
    }

    #[test]
    fn methods_are_known_by_type_and_by_name_when_every_type_agrees() {
        let method = |ty: &str, body: &str| {
            format!("impl {ty} {{\n    fn put(&self, s: &CudaStream, h: &[f32], d: &mut CudaSlice<f32>) -> R {{ {body} }}\n}}\n")
        };
        let one = summaries_of(&[&method("Loader", "s.memcpy_htod(h, d)")]);
        let keys: Vec<&str> = one.useful().map(|(k, _)| k).collect();
        assert!(
            keys.contains(&"Loader::put") && keys.contains(&".put"),
            "{keys:?}"
        );
        // A second type's `put` that does nothing: `x.put(..)` may be either.
        let two = summaries_of(&[
            &method("Loader", "s.memcpy_htod(h, d)"),
            &method("Mock", "Ok(())"),
        ]);
        let keys: Vec<&str> = two.useful().map(|(k, _)| k).collect();
        assert_eq!(keys, ["Loader::put"]);
    }
}
