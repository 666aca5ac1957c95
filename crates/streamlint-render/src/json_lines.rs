//! JSON lines: the `json` format's object of each finding, compact, one per line. Consumers can
//! stream it (`jq -c`, log shippers, `grep SL001`) without reading a whole array first, and
//! concatenated runs stay valid.

use std::io::{self, Write};

use crate::{json, FileFindings, LineIndex};

pub fn render(files: &[FileFindings<'_>], out: &mut dyn Write) -> io::Result<()> {
    for file in files {
        let index = LineIndex::new(file.source);
        for f in file.findings {
            serde_json::to_writer(&mut *out, &json::finding(file, &index, f))?;
            writeln!(out)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::Value;
    use streamlint_graph::Span;
    use streamlint_rules::{Finding, Severity};

    use crate::FileFindings;

    #[test]
    fn each_line_is_the_json_formats_object() {
        let finding = |code, start| Finding {
            code,
            severity: Severity::Error,
            message: "line\nbreak".into(),
            span: Span::new(start, start + 1),
            labels: Vec::new(),
            help: None,
            fix: None,
        };
        let findings = [finding("SL001", 0), finding("SL003", 2)];
        let files = [FileFindings {
            path: "a.py",
            source: "x\ny\n",
            findings: &findings,
        }];
        let mut lines = Vec::new();
        super::render(&files, &mut lines).unwrap();
        let mut array = Vec::new();
        crate::json::render(&files, &mut array).unwrap();
        let lines = String::from_utf8(lines).unwrap();
        let parsed: Vec<Value> = lines
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(parsed.len(), 2, "{lines}");
        assert_eq!(
            Value::Array(parsed),
            serde_json::from_slice::<Value>(&array).unwrap()
        );
    }
}
