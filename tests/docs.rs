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

/// Every link to this repository in `text`, as the path it names inside the repository.
fn repository_paths(text: &str) -> Vec<String> {
    let prefix = format!("{}/blob/main/", streamlint_render::REPOSITORY_URL);
    text.match_indices(&prefix)
        .map(|(at, _)| {
            text[at + prefix.len()..]
                .split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ')' | '<' | '>'))
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// No output format links to a page that does not exist: every rule link in every format, on
/// findings of every code (the fixtures hold each), in the rule list and on each rule's page.
#[test]
fn every_link_in_every_output_leads_to_a_page() {
    let fixtures = repo_root().join("fixtures");
    let fixtures = fixtures.to_str().unwrap();
    let mut outputs = Vec::new();
    for &format in streamlint_render::Format::NAMES {
        let (_, out, _) =
            support::run(&["check", "--isolated", "--output-format", format, fixtures]);
        outputs.push((format.to_string(), out));
    }
    let (_, rules, _) = support::run(&["rules", "--output-format", "json"]);
    outputs.push(("rules".into(), rules));
    for rule in streamlint_rules::RULES.iter().chain(streamlint_rules::META) {
        let (_, page, _) = support::run(&["rule", rule.code]);
        outputs.push((format!("rule {}", rule.code), page));
    }
    let mut codes_linked = std::collections::BTreeSet::new();
    for (what, out) in &outputs {
        for path in repository_paths(out) {
            assert!(
                repo_root().join(&path).is_file(),
                "{what} links to {path}, which does not exist"
            );
            if let Some(code) = path.strip_prefix("rules/") {
                codes_linked.insert(code.trim_end_matches(".md").to_string());
            }
        }
    }
    for rule in streamlint_rules::RULES.iter().chain(streamlint_rules::META) {
        assert!(
            codes_linked.contains(rule.code),
            "no output links to the page of {}",
            rule.code
        );
    }
}

/// Relative links in the README and the documentation lead to files of the repository.
#[test]
fn relative_links_in_the_documentation_lead_to_files() {
    let mut pages = vec![repo_root().join("README.md")];
    for dir in ["docs", "rules"] {
        for entry in std::fs::read_dir(repo_root().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|x| x == "md") {
                pages.push(path);
            }
        }
    }
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        for (at, _) in text.match_indices("](") {
            let target = text[at + 2..].split(')').next().unwrap_or_default();
            let target = target.split('#').next().unwrap_or_default();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let resolved = page.parent().unwrap().join(target);
            assert!(
                resolved.exists(),
                "{} links to {target}, which does not exist",
                page.display()
            );
        }
    }
}
