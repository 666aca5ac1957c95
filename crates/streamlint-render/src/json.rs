//! JSON output: an array in ruff's shape (`code`, `message`, `filename`, `location`,
//! `end_location`, `fix`, `url`) plus `name`, `severity` and `related`. The object of one
//! finding is shared with the JSON-lines format, so that both stay the same shape.

use std::io::{self, Write};

use serde_json::{json, Value};
use streamlint_rules::{rule, Finding};

use crate::{rule_url, FileFindings, LineIndex};

pub fn render(files: &[FileFindings<'_>], out: &mut dyn Write) -> io::Result<()> {
    let mut items = Vec::new();
    for file in files {
        let index = LineIndex::new(file.source);
        items.extend(file.findings.iter().map(|f| finding(file, &index, f)));
    }
    serde_json::to_writer_pretty(&mut *out, &items)?;
    writeln!(out)
}

/// The JSON object of one finding of `file`; `index` is the line index of its source.
pub(crate) fn finding(file: &FileFindings<'_>, index: &LineIndex<'_>, f: &Finding) -> Value {
    let loc = |offset: u32| {
        let p = index.position(offset);
        json!({"row": p.row, "column": p.column})
    };
    let related: Vec<Value> = f
        .labels
        .iter()
        .map(|l| json!({"message": l.message, "location": loc(l.span.start), "end_location": loc(l.span.end)}))
        .collect();
    json!({
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
    })
}
