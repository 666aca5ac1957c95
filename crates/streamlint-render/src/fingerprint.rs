//! Fingerprints: identities of findings that survive edits elsewhere in the file, so that code
//! scanning matches a finding of today's run with yesterday's (keeping its alert, its dismissal,
//! its history) instead of closing one alert and opening another whenever a line is inserted
//! above. A fingerprint is built from what moves with the code, not from line numbers: the rule,
//! the file, the trimmed text of the finding's line, and which of the file's identical lines it
//! is. The hash is FNV-1a, written out here because it must never change between releases or
//! platforms (the standard library's hasher may).

use std::collections::HashMap;

/// Hands out the fingerprints of one file's findings, in the order they are reported.
pub(crate) struct Fingerprints<'a> {
    /// The file's lines as the line index counts them (split at `\n`), trimmed.
    lines: Vec<&'a str>,
    /// Findings fingerprinted so far, per (rule, row): two findings of one rule on one line
    /// must not share an identity.
    on_line: HashMap<(&'static str, usize), usize>,
}

impl<'a> Fingerprints<'a> {
    pub(crate) fn new(source: &'a str) -> Self {
        Fingerprints {
            lines: source.split('\n').map(str::trim).collect(),
            on_line: HashMap::new(),
        }
    }

    /// The fingerprint of the next finding of rule `code` on one-based line `row` of the file
    /// at `path` (a path that is the same on every checkout: relative to the repository root).
    /// Its shape, `<hash>:<occurrence>`, is the one code scanning uses for the
    /// `primaryLocationLineHash` it computes itself.
    pub(crate) fn next(&mut self, code: &'static str, path: &str, row: usize) -> String {
        let text = self.lines.get(row.saturating_sub(1)).copied().unwrap_or("");
        let occurrence = self
            .lines
            .iter()
            .take(row.saturating_sub(1))
            .filter(|l| **l == text)
            .count();
        let repeat = self.on_line.entry((code, row)).or_insert(0);
        let hash = fnv1a(&[
            code.as_bytes(),
            path.as_bytes(),
            text.as_bytes(),
            repeat.to_string().as_bytes(),
        ]);
        *repeat += 1;
        format!("{hash:016x}:{occurrence}")
    }
}

/// 64-bit FNV-1a of the parts, each followed by a byte that UTF-8 never contains, so that
/// moving text from one part to the next changes the hash.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    for part in parts {
        for &byte in part.iter().chain(&[0xff]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(PRIME);
        }
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "x = a()\n    del y\nz = b()\ndel y\n";

    #[test]
    fn inserting_lines_above_keeps_fingerprints() {
        let before = Fingerprints::new(SOURCE).next("SL001", "a.py", 4);
        let edited = format!("import os\n\n{SOURCE}");
        let after = Fingerprints::new(&edited).next("SL001", "a.py", 6);
        assert_eq!(before, after);
    }

    #[test]
    fn identical_lines_are_told_apart_by_occurrence() {
        let mut prints = Fingerprints::new(SOURCE);
        let first = prints.next("SL001", "a.py", 2);
        let second = prints.next("SL001", "a.py", 4);
        assert_ne!(first, second);
        assert_eq!(
            first.split(':').next(),
            second.split(':').next(),
            "same text, same hash"
        );
        assert!(
            first.ends_with(":0") && second.ends_with(":1"),
            "{first} {second}"
        );
    }

    #[test]
    fn rule_path_text_and_repeats_all_count() {
        let print = |code, path, row| Fingerprints::new(SOURCE).next(code, path, row);
        let base = print("SL001", "a.py", 1);
        assert_ne!(base, print("SL003", "a.py", 1));
        assert_ne!(base, print("SL001", "b.py", 1));
        assert_ne!(base, print("SL001", "a.py", 3));
        let mut prints = Fingerprints::new(SOURCE);
        assert_ne!(
            prints.next("SL001", "a.py", 1),
            prints.next("SL001", "a.py", 1)
        );
    }

    #[test]
    fn the_hash_is_fnv1a() {
        // The published 64-bit FNV-1a test vector for "a" (before our separator byte).
        let mut hash = 0xcbf2_9ce4_8422_2325_u64;
        hash ^= u64::from(b'a');
        hash = hash.wrapping_mul(0x100_0000_01b3);
        assert_eq!(hash, 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(&[b"a"]), (hash ^ 0xff).wrapping_mul(0x100_0000_01b3));
    }
}
