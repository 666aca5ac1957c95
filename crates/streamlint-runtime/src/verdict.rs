//! The static verdict of a case: the codes streamlint reports on its file, with no
//! configuration, exactly as the fixture harness checks it.

use std::path::Path;

use streamlint_linter::{check_source, Settings};

/// The rule codes found in `source` (read from `path`), sorted, each once.
pub fn static_findings(path: &Path, source: &str) -> Vec<String> {
    let mut codes: Vec<String> = check_source(path, source, &Settings::default())
        .into_iter()
        .map(|f| f.code.to_string())
        .collect();
    codes.sort();
    codes.dedup();
    codes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cases::{on_disk, Language, Variant};
    use crate::rust_cases::RUST_CASES;

    /// The static-verdict column: every bad case is flagged with its rule, every good case is
    /// clean.
    #[test]
    fn bad_cases_are_flagged_with_their_rule_and_good_cases_are_clean() {
        let root = crate::repository_root();
        let mut checked = 0;
        let python = on_disk(&root, Language::Python).unwrap();
        let python = python.iter().map(|c| {
            let text = std::fs::read_to_string(root.join(c.path())).unwrap();
            (c.clone(), text)
        });
        let rust = RUST_CASES.iter().map(|c| {
            let id = crate::cases::CaseId::from_path(c.path().as_ref()).unwrap();
            (id, c.source.to_string())
        });
        for (id, text) in python.chain(rust) {
            let codes = static_findings(&id.path(), &text);
            match id.variant {
                Variant::Bad => assert!(codes.contains(&id.rule), "{id}: {codes:?}"),
                Variant::Good => assert!(codes.is_empty(), "{id}: {codes:?}"),
            }
            checked += 1;
        }
        assert!(checked >= 26, "{checked}");
    }

    /// Two findings of one rule give its code once; codes come sorted.
    #[test]
    fn codes_are_sorted_and_reported_once() {
        let source = "import torch\n\n\ndef f(n):\n    main = torch.cuda.current_stream()\n    side = torch.cuda.Stream()\n    a = torch.empty(n, device=\"cuda\")\n    b = torch.empty(n, device=\"cuda\")\n    side.wait_stream(main)\n    with torch.cuda.stream(side):\n        a.fill_(1.0)\n        b.fill_(2.0)\n    main.wait_stream(side)\n    with torch.cuda.stream(side):\n        a.fill_(3.0)\n        b.fill_(4.0)\n    return (a * b).sum()\n";
        assert_eq!(
            static_findings(Path::new("f.py"), source),
            ["SL001", "SL003"]
        );
    }
}
