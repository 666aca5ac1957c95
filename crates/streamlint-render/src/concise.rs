//! One line per finding, `path:row:column: CODE message`: the shape editors and `grep` jump to.

use std::io::{self, Write};

use crate::{FileFindings, LineIndex};

pub fn render(files: &[FileFindings<'_>], out: &mut dyn Write) -> io::Result<()> {
    for file in files {
        let index = LineIndex::new(file.source);
        for f in file.findings {
            let p = index.position(f.span.start);
            writeln!(
                out,
                "{}:{}:{}: {} {}",
                file.path, p.row, p.column, f.code, f.message
            )?;
        }
    }
    Ok(())
}
