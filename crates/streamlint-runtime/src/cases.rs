//! The runtime cases: ordinary fixture files named `{bad,good}_runtime_<name>.{py,rs}` under
//! `fixtures/<language>/<RULE>/`. Being fixtures, the fixture harness checks their static verdict
//! (their `streamlint-expect` markers); being runtime cases, `streamlint validate` runs them. The
//! Python ones are found on disk; the Rust ones are compiled into this crate
//! ([`crate::rust_cases`]) and must match the files on disk.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The language a case is written in.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    Python,
    Rust,
}

impl Language {
    /// The folder under `fixtures/` and the file extension.
    fn folder_and_extension(self) -> (&'static str, &'static str) {
        match self {
            Language::Python => ("python", "py"),
            Language::Rust => ("rust", "rs"),
        }
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.folder_and_extension().0)
    }
}

/// Whether the case has the hazard (`bad`) or the same code with the fix (`good`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    Bad,
    Good,
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Variant::Bad => "bad",
            Variant::Good => "good",
        })
    }
}

/// What a case is, from where its file is.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct CaseId {
    pub language: Language,
    /// The rule folder the case is in (`SL001`).
    pub rule: String,
    /// The file name without the variant, the `runtime_` marker and the extension.
    pub name: String,
    pub variant: Variant,
}

impl CaseId {
    /// The case a repository-relative path names (`fixtures/python/SL001/bad_runtime_x.py`),
    /// or `None` for any other file.
    pub fn from_path(path: &Path) -> Option<CaseId> {
        let parts: Vec<&str> = path.iter().filter_map(|p| p.to_str()).collect();
        let [.., "fixtures", folder, rule, file] = parts.as_slice() else {
            return None;
        };
        let language = [Language::Python, Language::Rust]
            .into_iter()
            .find(|l| l.folder_and_extension().0 == *folder)?;
        let stem = file.strip_suffix(&format!(".{}", language.folder_and_extension().1))?;
        let (variant, name) = if let Some(name) = stem.strip_prefix("bad_runtime_") {
            (Variant::Bad, name)
        } else {
            (Variant::Good, stem.strip_prefix("good_runtime_")?)
        };
        let is_rule = rule.len() == 5
            && rule.starts_with("SL")
            && rule[2..].bytes().all(|b| b.is_ascii_digit());
        (is_rule && !name.is_empty()).then(|| CaseId {
            language,
            rule: rule.to_string(),
            name: name.to_string(),
            variant,
        })
    }

    /// The path of the case's file, relative to the repository root.
    pub fn path(&self) -> PathBuf {
        let (folder, extension) = self.language.folder_and_extension();
        PathBuf::from("fixtures")
            .join(folder)
            .join(&self.rule)
            .join(format!(
                "{}_runtime_{}.{extension}",
                self.variant, self.name
            ))
    }
}

impl fmt::Display for CaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} {}",
            self.language, self.rule, self.name, self.variant
        )
    }
}

/// Every runtime case of `language` on disk under `root/fixtures`, sorted.
pub fn on_disk(root: &Path, language: Language) -> std::io::Result<Vec<CaseId>> {
    let base = root
        .join("fixtures")
        .join(language.folder_and_extension().0);
    let mut out = Vec::new();
    for rule in std::fs::read_dir(&base)? {
        let rule = rule?.path();
        if !rule.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&rule)? {
            let file = file?.path();
            let relative = file.strip_prefix(root).unwrap_or(&file);
            if let Some(id) = CaseId::from_path(relative) {
                out.push(id);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Cases whose other variant is missing: every bad case needs the same code with the fix, and
/// every good case the hazard it fixes.
pub fn unpaired(cases: &[CaseId]) -> Vec<&CaseId> {
    let mut variants: BTreeMap<(Language, &str, &str), Vec<Variant>> = BTreeMap::new();
    for c in cases {
        variants
            .entry((c.language, &c.rule, &c.name))
            .or_default()
            .push(c.variant);
    }
    cases
        .iter()
        .filter(|c| variants[&(c.language, c.rule.as_str(), c.name.as_str())].len() != 2)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(path: &str) -> Option<CaseId> {
        CaseId::from_path(Path::new(path))
    }

    #[test]
    fn a_runtime_fixture_names_its_case() {
        let c = id("fixtures/python/SL001/bad_runtime_side_features_del.py").unwrap();
        assert_eq!(c.language, Language::Python);
        assert_eq!(c.rule, "SL001");
        assert_eq!(c.name, "side_features_del");
        assert_eq!(c.variant, Variant::Bad);
        assert_eq!(
            c.path(),
            Path::new("fixtures/python/SL001/bad_runtime_side_features_del.py")
        );
        let r = id("/abs/repo/fixtures/rust/SL010/good_runtime_guard.rs").unwrap();
        assert_eq!((r.language, r.variant), (Language::Rust, Variant::Good));
        assert_eq!(r.to_string(), "rust SL010 guard good");
    }

    #[test]
    fn other_files_are_not_cases() {
        for path in [
            "fixtures/python/SL001/bad_docs_pattern.py",
            "fixtures/python/SL001/bad_runtime_.py",
            "fixtures/python/SL001/bad_runtime_x.rs",
            "fixtures/rust/SL001/good_runtime_x.py",
            "fixtures/python/misc/bad_runtime_x.py",
            "fixtures/python/SL01/bad_runtime_x.py",
            "fixtures/go/SL001/bad_runtime_x.go",
            "src/SL001/bad_runtime_x.py",
            "bad_runtime_x.py",
        ] {
            assert_eq!(id(path), None, "{path}");
        }
    }

    #[test]
    fn a_case_without_its_other_variant_is_unpaired() {
        let cases: Vec<CaseId> = [
            "fixtures/python/SL001/bad_runtime_a.py",
            "fixtures/python/SL001/good_runtime_a.py",
            "fixtures/python/SL001/bad_runtime_b.py",
            "fixtures/python/SL002/good_runtime_a.py",
            "fixtures/rust/SL001/good_runtime_a.rs",
        ]
        .iter()
        .map(|p| id(p).unwrap())
        .collect();
        let lonely: Vec<String> = unpaired(&cases).iter().map(|c| c.to_string()).collect();
        assert_eq!(
            lonely,
            [
                "python SL001 b bad",
                "python SL002 a good",
                "rust SL001 a good"
            ]
        );
    }

    #[test]
    fn the_repository_has_paired_cases_in_both_languages() {
        let root = crate::repository_root();
        for language in [Language::Python, Language::Rust] {
            let cases = on_disk(&root, language).unwrap();
            assert!(
                cases.len() >= 12,
                "{language}: only {} runtime cases",
                cases.len()
            );
            assert!(unpaired(&cases).is_empty(), "{:?}", unpaired(&cases));
        }
    }

    /// Python SL001–SL007 and Rust SL001, SL002, SL003, SL005, SL006, SL007 and SL010 have
    /// cases: the rules whose hazard shows on a GPU.
    #[test]
    fn every_observable_rule_has_a_case() {
        let root = crate::repository_root();
        let rules = |language| -> Vec<String> {
            let mut r: Vec<String> = on_disk(&root, language)
                .unwrap()
                .into_iter()
                .map(|c| c.rule)
                .collect();
            r.dedup();
            r
        };
        assert_eq!(
            rules(Language::Python),
            ["SL001", "SL002", "SL003", "SL004", "SL005", "SL006", "SL007"]
        );
        assert_eq!(
            rules(Language::Rust),
            ["SL001", "SL002", "SL003", "SL005", "SL006", "SL007", "SL010"]
        );
    }
}
