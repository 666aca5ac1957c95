//! What the fuzz targets share: structure-aware generators of Python and Rust stream code and of
//! language-server sessions, and the checks every analysed text must pass.
//!
//! Raw bytes rarely get past a parser, so most targets build their input from `arbitrary`
//! data instead: programs from a small vocabulary of stream, event, allocation and copy calls
//! nested in every statement form, optionally cut off at some byte (an editor's half-typed
//! text). That reaches the lowering, the analysis, the rules, the fixes and the renderers.

pub mod lsp;
pub mod python;
pub mod rust;

use std::path::Path;
use std::sync::OnceLock;

use streamlint_linter::{check_source, fix_source, Settings};
use streamlint_render::{render, FileFindings, Format, RenderOptions};

/// The threads the command line checks files on: large stacks, and the analysis spreads a
/// file's functions over them.
fn workers() -> &'static rayon::ThreadPool {
    static POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .stack_size(256 << 20)
            .build()
            .expect("threads for the analysis")
    })
}

/// Lint `source` as the file `name` on threads like the command line's, render the findings in
/// every format, apply the fixes (safe, then also unsafe), and check what must hold: spans inside
/// the text on character boundaries, and fixed text that still parses when the original did.
pub fn check_file(name: &str, source: &str) {
    workers().install(|| check_file_here(name, source));
}

fn check_file_here(name: &str, source: &str) {
    let settings = Settings::default();
    let path = Path::new(name);
    let findings = check_source(path, source, &settings);
    for f in &findings {
        for span in std::iter::once(f.span).chain(f.labels.iter().map(|l| l.span)) {
            let (start, end) = (span.start as usize, span.end as usize);
            assert!(start <= end && end <= source.len(), "{f:?}");
            assert!(
                source.is_char_boundary(start) && source.is_char_boundary(end),
                "{f:?}"
            );
        }
    }
    let files = [FileFindings {
        path: name,
        source,
        findings: &findings,
    }];
    let options = RenderOptions {
        color: false,
        base_dir: Path::new("/"),
    };
    for format in Format::NAMES.iter().filter_map(|n| Format::parse(n)) {
        render(format, &files, &options, &mut std::io::sink()).expect("a sink takes anything");
    }
    let parses = |text: &str| match path.extension().and_then(|e| e.to_str()) {
        Some("rs") => streamlint_rust::parses(text),
        _ => streamlint_python::parses(text),
    };
    if findings.iter().all(|f| f.fix.is_none()) {
        return;
    }
    let parsed = parses(source);
    for unsafe_fixes in [false, true] {
        let fixed = fix_source(path, source, &settings, unsafe_fixes);
        if parsed {
            assert!(
                parses(&fixed.source),
                "the fixes broke the syntax:\n{source}\n-- became --\n{}",
                fixed.source
            );
        }
    }
}

/// `text` cut at `at` (rounded down to a character boundary), when `at` says so.
pub fn truncated(text: String, at: Option<u16>) -> String {
    match at {
        Some(at) if (at as usize) < text.len() => {
            let mut end = at as usize;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text[..end].to_string()
        }
        _ => text,
    }
}

/// Indentation for nesting depth `depth` (four spaces a level).
fn indent(out: &mut String, depth: usize) {
    out.extend(std::iter::repeat_n("    ", depth));
}
