//! Findings as LSP diagnostics: the rule's code linking to its page, the help as a second
//! paragraph of the message, and the secondary labels as related locations in the document.

use lsp_types::{
    CodeDescription, Diagnostic, DiagnosticRelatedInformation, DiagnosticSeverity, DiagnosticTag,
    Location, NumberOrString, Uri,
};
use streamlint_rules::{Finding, Severity, UNUSED_SUPPRESSION};

use crate::caps::ClientCaps;
use crate::positions::LineIndex;

/// What every diagnostic of this server says it comes from.
pub const SOURCE: &str = "streamlint";

pub fn diagnostic(
    finding: &Finding,
    uri: &Uri,
    index: &LineIndex<'_>,
    caps: &ClientCaps,
) -> Diagnostic {
    let range = |start: u32, end: u32| index.range(start as usize, end as usize, caps.encoding);
    let mut message = finding.message.clone();
    if let Some(help) = &finding.help {
        message.push_str("\n\n");
        message.push_str(help);
    }
    let related = if caps.related_information {
        let related = finding
            .labels
            .iter()
            .map(|label| DiagnosticRelatedInformation {
                location: Location::new(uri.clone(), range(label.span.start, label.span.end)),
                message: label.message.clone(),
            });
        Some(related.collect::<Vec<_>>()).filter(|r| !r.is_empty())
    } else {
        // The locations would be lost: say them in the message.
        for label in &finding.labels {
            let line = range(label.span.start, label.span.end).start.line + 1;
            message.push_str(&format!("\nline {line}: {}", label.message));
        }
        None
    };
    let unnecessary = caps.diagnostic_tags && finding.code == UNUSED_SUPPRESSION.code;
    Diagnostic {
        range: range(finding.span.start, finding.span.end),
        severity: Some(severity(finding.severity)),
        code: Some(NumberOrString::String(finding.code.to_string())),
        code_description: rule_page(finding.code).map(|href| CodeDescription { href }),
        source: Some(SOURCE.to_string()),
        message,
        related_information: related,
        tags: unnecessary.then(|| vec![DiagnosticTag::UNNECESSARY]),
        data: None,
    }
}

fn severity(severity: Severity) -> DiagnosticSeverity {
    match severity {
        Severity::Error => DiagnosticSeverity::ERROR,
        Severity::Warning => DiagnosticSeverity::WARNING,
        Severity::Info => DiagnosticSeverity::INFORMATION,
    }
}

fn rule_page(code: &str) -> Option<Uri> {
    streamlint_render::rule_url(code).parse().ok()
}
