//! `streamlint rules` and `streamlint rule CODE`: the catalogue, for people and for tools.

use std::io::{self, Write};

use serde_json::json;
use streamlint_render::rule_url;
use streamlint_rules::{rule, META, RULES};

/// One rule's page; exit 2 for an unknown rule.
pub fn print_rule(code: &str, stdout: &mut dyn Write, stderr: &mut dyn Write) -> io::Result<i32> {
    match rule(code) {
        Some(r) => writeln!(stdout, "{}", r.page().trim_end()).map(|_| 0),
        None => writeln!(
            stderr,
            "error: no rule named `{code}`; `streamlint rules` lists them"
        )
        .map(|_| 2),
    }
}

/// Every rule, the codes about the run itself (SL900, SL901) last: a table, or a JSON array with
/// each rule's page for tools that show it.
pub fn print_rules(format: &str, stdout: &mut dyn Write) -> io::Result<i32> {
    if format == "json" {
        let rules: Vec<_> = RULES
            .iter()
            .chain(META)
            .map(|r| {
                json!({
                    "code": r.code,
                    "name": r.name,
                    "severity": r.severity.as_str(),
                    "summary": r.summary(),
                    "url": rule_url(r.code),
                    "explanation": r.page(),
                })
            })
            .collect();
        serde_json::to_writer_pretty(&mut *stdout, &rules)?;
        writeln!(stdout)?;
        return Ok(0);
    }
    for r in RULES.iter().chain(META) {
        writeln!(
            stdout,
            "{}  {:<28} {:<7} {}",
            r.code,
            r.name,
            r.severity.as_str(),
            r.summary()
        )?;
    }
    Ok(0)
}
