//! JSON output: an array in ruff's shape (`code`, `message`, `filename`, `location`,
//! `end_location`, `fix`, `url`) plus `name`, `severity` and `related`.

use std::io::{self, Write};

use serde_json::{json, Value};
use streamlint_rules::rule;

use crate::{rule_url, FileFindings, LineIndex};

pub fn render(files: &[FileFindings<'_>], out: &mut dyn Write) -> io::Result<()> {
    let mut items = Vec::new();
    for file in files {
        let index = LineIndex::new(file.source);
        let loc = |offset: u32| {
            let p = index.position(offset);
            json!({"row": p.row, "column": p.column})
        };
        for f in file.findings {
            let related: Vec<Value> = f
                .labels
                .iter()
                .map(|l| json!({"message": l.message, "location": loc(l.span.start), "end_location": loc(l.span.end)}))
                .collect();
            items.push(json!({
                "code": f.code,
                "name": rule(f.code).map(|r| r.name),
                "severity": f.severity.as_str(),
                "message": f.message,
                "filename": file.path,
                "location": loc(f.span.start),
                "end_location": loc(f.span.end),
                "fix": f.fix.as_ref().map(|fix| {
                    let edits: Vec<Value> = fix
                        .text_edits(file.source)
                        .iter()
                        .map(|e| json!({"content": e.content, "location": loc(e.start as u32), "end_location": loc(e.end as u32)}))
                        .collect();
                    json!({"message": fix.message, "applicability": fix.applicability.as_str(), "edits": edits})
                }),
                "help": f.help,
                "url": rule_url(f.code),
                "related": related,
            }));
        }
    }
    serde_json::to_writer_pretty(&mut *out, &items)?;
    writeln!(out)
}
