//! The documentation that is derived from the rule pages stays in step with them.

mod support;

use support::repo_root;

/// The front matter value `key` of a rule page.
fn front(page: &str, key: &str) -> String {
    let block = page.split("---").nth(1).unwrap_or_default();
    block
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| panic!("front matter key `{key}` is missing"))
}

/// docs/rules.md as the rule pages say it should read.
fn rule_index() -> String {
    let mut pages: Vec<_> = std::fs::read_dir(repo_root().join("rules"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    let mut out = String::from(
        "# Rules\n\n\
         <!-- Generated from the front matter of rules/*.md; `tests/docs.rs` checks it. -->\n\n\
         | code | name | severity | languages | what it finds |\n\
         |---|---|---|---|---|\n",
    );
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        let code = front(&text, "code");
        let languages = front(&text, "languages");
        let languages = languages.trim_matches(['[', ']']);
        out.push_str(&format!(
            "| [{code}](../rules/{code}.md) | {} | {} | {} | {} |\n",
            front(&text, "name"),
            front(&text, "severity"),
            languages,
            front(&text, "summary"),
        ));
    }
    out.push_str(
        "\nSL900 and SL901 are about the run itself: a file that could not be checked (every other \
         file still is), and a suppression comment that suppresses nothing.\n",
    );
    out
}

#[test]
fn the_rule_index_matches_the_rule_pages() {
    let path = repo_root().join("docs/rules.md");
    let expected = rule_index();
    if std::env::var_os("STREAMLINT_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &expected).unwrap();
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "docs/rules.md is out of date with rules/*.md; regenerate it with \
         `STREAMLINT_UPDATE_DOCS=1 cargo test --release --test docs`"
    );
}

#[test]
fn every_rule_page_is_in_the_catalogue() {
    for rule in streamlint_rules::RULES
        .iter()
        .filter(|r| r.code.starts_with("SL0"))
    {
        let page = repo_root().join("rules").join(format!("{}.md", rule.code));
        assert!(page.is_file(), "{} has no page", rule.code);
        let text = std::fs::read_to_string(page).unwrap();
        assert_eq!(front(&text, "name"), rule.name);
    }
}
