//! What the project index reads of a module without parsing it whole: where its top-level
//! functions are, the names it binds at the top level, and its import statements. A run indexes
//! every file before it lowers any; parsing each file twice, or keeping every syntax tree until
//! the end, would cost more than the rest of the run. The functions themselves are parsed one by
//! one, when a call needs them (`parser::parse_function_at`).
//!
//! The scan reads lines: a top-level statement starts at column 0, and a function ends where
//! the next one starts. Text at column 0 inside a string that spans lines can cut a function
//! short; its parse then fails and the function keeps the model of unknown code.

/// The outline of one module.
#[derive(Debug, Default)]
pub struct Outline {
    /// Top-level functions: the name and the byte range from `def` (or `async`) to the end of
    /// the function's last line of code.
    pub defs: Vec<(String, u32, u32)>,
    /// Names bound by top-level assignments.
    pub globals: Vec<String>,
    /// The import statements, at any depth, moved to column 0, and the top-level assignments
    /// of one line that call something (`dm = torch.get_device_module()`): a module of their
    /// own, parsed to resolve names. One statement each.
    pub header: Vec<String>,
    /// Top-level `def` and `class` statements, each from its first decorator to the end of its
    /// last line of code.
    pub blocks: Vec<Block>,
}

/// A top-level function or class.
#[derive(Debug)]
pub struct Block {
    pub name: String,
    pub is_class: bool,
    pub start: u32,
    pub end: u32,
}

/// The lines of `text`, each with its `\n` (as `split_inclusive('\n')`, but found with
/// `memchr`: most lines are short, and a search per line costs more than one over the text).
fn lines(text: &str) -> impl Iterator<Item = &str> {
    let ends = memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1);
    let last = (!text.ends_with('\n') && !text.is_empty()).then_some(text.len());
    let mut start = 0;
    ends.chain(last).map(move |end| {
        // `\n` is one byte of its own in UTF-8: every piece is whole characters.
        let line = &text[start..end];
        start = end;
        line
    })
}

/// The identifier at the start of `text`.
fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// What can only start a statement, whatever brackets seem open before it.
const STATEMENT_KEYWORDS: &[&str] = &["def ", "async def ", "class ", "@", "import ", "from "];

/// A line without its comment (a `#` in a string cuts it short too: only brackets are counted).
fn without_comment(line: &str) -> &str {
    line.split_once('#').map_or(line, |(code, _)| code)
}

/// How far a line opens brackets (negative: closes more than it opens).
fn bracket_depth(line: &str) -> i32 {
    line.bytes()
        .map(|c| match c {
            b'(' | b'[' | b'{' => 1,
            b')' | b']' | b'}' => -1,
            _ => 0,
        })
        .sum()
}

/// The name a top-level line assigns (`NAME = ..`, `NAME: T = ..`), if it is such a line.
fn assigned_name(line: &str) -> Option<&str> {
    let name = identifier(line);
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let rest = line[name.len()..].trim_start();
    let rest = match rest.strip_prefix(':') {
        Some(annotated) => &annotated[annotated.find('=')?..],
        None => rest,
    };
    (rest.starts_with('=') && !rest.starts_with("==")).then_some(name)
}

impl Outline {
    pub fn of(source: &str) -> Outline {
        let mut out = Outline::default();
        // The function being read: name, start, end of its last line of code.
        let mut def: Option<(String, u32, u32)> = None;
        // The function or class being read, and where the decorators before a `def` or `class`
        // started.
        let mut block: Option<Block> = None;
        let mut decorated_from: Option<u32> = None;
        // An import statement continued over several lines, with its open brackets.
        let mut import: Option<(String, i32)> = None;
        // A byte-order mark is no part of the first statement; offsets still count it.
        let (text, mut offset) = match source.strip_prefix('\u{feff}') {
            Some(rest) => (rest, '\u{feff}'.len_utf8() as u32),
            None => (source, 0u32),
        };
        // Brackets the current statement has left open.
        let mut open = 0i32;
        for raw in lines(text) {
            let start = offset;
            offset += raw.len() as u32;
            let line = raw.strip_suffix('\n').unwrap_or(raw);
            let line = line.strip_suffix('\r').unwrap_or(line);
            let end = start + line.len() as u32;
            let code = line.trim_ascii_start();
            if let Some((mut text, depth)) = import.take() {
                text.push('\n');
                text.push_str(line);
                let depth = depth + bracket_depth(line);
                open = (open + bracket_depth(without_comment(line))).max(0);
                if depth > 0 || line.ends_with('\\') {
                    import = Some((text, depth));
                } else {
                    out.header.push(text);
                }
                continue;
            }
            if code.is_empty() || code.starts_with('#') {
                continue;
            }
            let starts_statement = code.len() == line.len()
                && (open == 0 || STATEMENT_KEYWORDS.iter().any(|k| line.starts_with(k)));
            // Brackets left open continue the statement over lines, also at column 0 (the
            // `) -> Tensor:` closing a long signature). Counting ignores strings; a keyword that
            // only starts a statement puts it right.
            // Inside an indented block that left nothing open, no count is needed.
            if starts_statement || open > 0 {
                open = if starts_statement { 0 } else { open };
                open = (open + bracket_depth(without_comment(line))).max(0);
            }
            if starts_statement {
                // A top-level statement: the function or class before it, if any, has ended.
                out.defs.extend(def.take());
                out.blocks.extend(block.take());
                let function = line
                    .strip_prefix("def ")
                    .or_else(|| line.strip_prefix("async def "));
                let class = line.strip_prefix("class ");
                if let Some(rest) = function.or(class) {
                    let name = identifier(rest.trim_start()).to_string();
                    block = Some(Block {
                        name: name.clone(),
                        is_class: class.is_some(),
                        start: decorated_from.take().unwrap_or(start),
                        end,
                    });
                    if function.is_some() {
                        def = Some((name, start, end));
                    }
                    continue;
                }
                if line.starts_with('@') {
                    decorated_from.get_or_insert(start);
                    continue;
                }
                decorated_from = None;
                if let Some(name) = assigned_name(line) {
                    out.globals.push(name.to_string());
                    if line.contains('(') && bracket_depth(line) == 0 && !line.ends_with('\\') {
                        out.header.push(line.to_string());
                    }
                }
            } else {
                if let Some(d) = def.as_mut() {
                    d.2 = end;
                }
                if let Some(b) = block.as_mut() {
                    b.end = end;
                }
            }
            let imports = code.starts_with("import ")
                || (code.starts_with("from ") && code.contains(" import"));
            if imports {
                let depth = bracket_depth(code);
                if depth > 0 || code.ends_with('\\') {
                    import = Some((code.to_string(), depth));
                } else {
                    out.header.push(code.to_string());
                }
            }
        }
        out.defs.extend(def);
        out.blocks.extend(block);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_as_split_inclusive_splits_them() {
        for text in ["", "a", "a\n", "a\nb", "a\r\n\nb\n", "\n\n", "é\nü"] {
            let expected: Vec<&str> = text.split_inclusive('\n').collect();
            assert_eq!(lines(text).collect::<Vec<_>>(), expected, "{text:?}");
        }
    }

    #[test]
    fn a_byte_order_mark_is_not_part_of_the_first_statement() {
        let src = "\u{feff}import torch\ndef f():\n    pass\n";
        let o = Outline::of(src);
        assert_eq!(o.header, ["import torch"]);
        let (_, start, _) = &o.defs[0];
        assert_eq!(&src[*start as usize..*start as usize + 3], "def");
    }

    #[test]
    fn functions_globals_and_imports_are_found_by_lines() {
        let src = "import torch\nfrom .streams import (\n    side,  # the side stream\n    main,\n)\n_S = None\ndm = torch.get_device_module()\n\n@wrap\ndef f(x):\n    from torch.cuda import Stream\n    return x\n\n# done\nasync def g(\n    a,\n) -> None:\n    pass\nclass C:\n    def m(self):\n        pass\n";
        let o = Outline::of(src);
        let names: Vec<&str> = o.defs.iter().map(|(n, ..)| n.as_str()).collect();
        assert_eq!(names, ["f", "g"]);
        let (_, start, end) = &o.defs[0];
        assert_eq!(
            &src[*start as usize..*end as usize],
            "def f(x):\n    from torch.cuda import Stream\n    return x"
        );
        assert_eq!(o.globals, ["_S", "dm"]);
        let blocks: Vec<(&str, bool, &str)> = o
            .blocks
            .iter()
            .map(|b| {
                let text = &src[b.start as usize..b.end as usize];
                (b.name.as_str(), b.is_class, text)
            })
            .collect();
        assert_eq!(
            blocks,
            [
                (
                    "f",
                    false,
                    "@wrap\ndef f(x):\n    from torch.cuda import Stream\n    return x"
                ),
                ("g", false, "async def g(\n    a,\n) -> None:\n    pass"),
                ("C", true, "class C:\n    def m(self):\n        pass"),
            ]
        );
        assert_eq!(
            o.header,
            [
                "import torch",
                "from .streams import (\n    side,  # the side stream\n    main,\n)",
                "dm = torch.get_device_module()",
                "from torch.cuda import Stream"
            ]
        );
    }
}
