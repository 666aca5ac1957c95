//! A scan of a file's tokens, before the parse, that blanks the bodies of the functions the
//! model has nothing to act on, and the comments.
//!
//! The lowering makes a GPU value only from a name it knows ([`names_that_start_gpu_work`]: the GPU types,
//! the stream factories, `launch!`, ...), from a field of the file's structs declared with one of
//! those types, or from a call to a function of the file that does GPU work. A function whose
//! text names none of these lowers to a body without any: parsing it is wasted work, and in a
//! file that mentions `cudarc` once (a test file, a backend with one CUDA branch) it is most of
//! the work. Its body is replaced by spaces, newlines kept, so that every offset and line of
//! the rest of the file stays where the parse of the whole text puts it.
//!
//! Comments are blanked too: syn turns every doc comment into an attribute with a string
//! literal, and the crates that drive the GPU document every item; nothing the model reads is
//! in a comment (suppression comments are read from the file's own text).
//!
//! The scan only needs to tell code from strings, characters and comments, and to match
//! brackets. When the text is not what it expects (brackets that do not match), the file is
//! parsed as it is.

use rustc_hash::{FxHashMap, FxHashSet};
use std::borrow::Cow;

use crate::crate_index::callee_name;
use crate::model::names_that_start_gpu_work;
use crate::{CrateSummaries, CrateTypes};

/// The text to parse: `source` with the bodies of inert functions and the comments blanked,
/// or `source` itself when there is nothing to blank (or when the scan cannot follow the text).
/// `crate_structs` are the structs the crate's files declare: the fields of those this file
/// implements are GPU values in its methods. A call to a function `crate_summaries` describes
/// (one of another file that does GPU work) is GPU work.
pub fn without_inert_bodies<'s>(
    source: &'s str,
    crate_structs: &CrateTypes,
    crate_summaries: &CrateSummaries,
) -> Cow<'s, str> {
    let Some((tokens, comments)) = tokens(source.as_bytes()) else {
        return Cow::Borrowed(source);
    };
    let functions = functions(source, &tokens);
    // The fields the crate declares for the structs this file implements, and the crate's
    // aliases of GPU types, are GPU words too.
    let other_words: Vec<&str> = impl_targets(source, &tokens)
        .into_iter()
        .filter_map(|target| crate_structs.get(target))
        .flatten()
        .map(|(field, _)| field.as_str())
        .chain(crate_structs.known_aliases().map(|(name, _)| name))
        .chain(crate_summaries.useful().map(|(key, _)| callee_name(key)))
        .collect();
    let inert = inert(source, &tokens, &functions, &other_words);
    if inert.is_empty() && comments.is_empty() {
        return Cow::Borrowed(source);
    }
    let mut bytes = source.as_bytes().to_vec();
    let bodies = inert
        .iter()
        .map(|f| (tokens[f.open].at + 1, tokens[f.close].at));
    for (start, end) in bodies.chain(comments) {
        streamlint_graph::blank_keeping_lines(&mut bytes[start..end]);
    }
    // Only whole code points between two ASCII braces, or from a comment's `/` to its end, were
    // replaced, by ASCII.
    Cow::Owned(String::from_utf8(bytes).expect("blanking keeps the text UTF-8"))
}

/// What the scan tells apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// An identifier or keyword, or a number (harmless: it never equals a word looked for).
    Word,
    Open(u8),
    Close(u8),
    Colon,
    Semicolon,
    /// Any other punctuation.
    Other,
}

#[derive(Clone, Copy, Debug)]
struct Token {
    kind: Kind,
    /// Byte offset of its first byte.
    at: usize,
    end: usize,
    /// For an opening or closing bracket, the index of its partner.
    partner: usize,
}

impl Token {
    fn text<'s>(&self, source: &'s str) -> &'s str {
        &source[self.at..self.end]
    }
}

/// Where each comment of a file is: its byte range.
type Comments = Vec<(usize, usize)>;

/// The file's tokens, strings and comments left out, brackets paired, and where its comments
/// are; `None` when the brackets do not pair (text the scan does not follow).
fn tokens(s: &[u8]) -> Option<(Vec<Token>, Comments)> {
    let mut out: Vec<Token> = Vec::new();
    let mut comments = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    let ident = |b: u8| b == b'_' || b.is_ascii_alphanumeric() || b >= 0x80;
    let mut i = 0;
    while i < s.len() {
        let b = s[i];
        let start = i;
        let kind = match b {
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                continue;
            }
            b'/' if s.get(i + 1) == Some(&b'/') => {
                i = memchr::memchr(b'\n', &s[i..]).map_or(s.len(), |n| i + n);
                comments.push((start, i));
                continue;
            }
            b'/' if s.get(i + 1) == Some(&b'*') => {
                i = block_comment_end(s, i)?;
                comments.push((start, i));
                continue;
            }
            b'"' => {
                i = string_end(s, i + 1)?;
                continue;
            }
            b'\'' => {
                i = char_or_lifetime_end(s, i);
                continue;
            }
            _ if ident(b) => {
                while i < s.len() && ident(s[i]) {
                    i += 1;
                }
                // Raw strings: `r"..."`, `br#"..."#`, `cr##"..."##`.
                if matches!(&s[start..i], b"r" | b"br" | b"cr") {
                    if let Some(end) = raw_string_end(s, i) {
                        i = end;
                        continue;
                    }
                }
                Kind::Word
            }
            b'{' | b'(' | b'[' => {
                i += 1;
                Kind::Open(b)
            }
            b'}' | b')' | b']' => {
                i += 1;
                Kind::Close(b)
            }
            b':' => {
                i += 1;
                Kind::Colon
            }
            b';' => {
                i += 1;
                Kind::Semicolon
            }
            _ => {
                i += 1;
                Kind::Other
            }
        };
        let index = out.len();
        let mut partner = index;
        match kind {
            Kind::Open(_) => open.push(index),
            Kind::Close(c) => {
                let o = open.pop()?;
                let Kind::Open(opener) = out[o].kind else {
                    unreachable!("only openers are pushed")
                };
                if pair(opener) != c {
                    return None;
                }
                out[o].partner = index;
                partner = o;
            }
            _ => {}
        }
        out.push(Token {
            kind,
            at: start,
            end: i,
            partner,
        });
    }
    open.is_empty().then_some((out, comments))
}

fn pair(open: u8) -> u8 {
    match open {
        b'{' => b'}',
        b'(' => b')',
        _ => b']',
    }
}

/// The end of the (nestable) block comment that starts at `i`.
fn block_comment_end(s: &[u8], mut i: usize) -> Option<usize> {
    let mut depth = 0;
    while i + 1 < s.len() {
        match (s[i], s[i + 1]) {
            (b'/', b'*') => {
                depth += 1;
                i += 2;
            }
            (b'*', b'/') => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// The end of the string whose text starts at `i` (after its opening quote).
fn string_end(s: &[u8], mut i: usize) -> Option<usize> {
    while i < s.len() {
        match s[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// After a raw string's prefix at `i`: the end of the raw string, or `None` if none starts
/// there (`r#ident` is a raw identifier).
fn raw_string_end(s: &[u8], i: usize) -> Option<usize> {
    let hashes = s[i..].iter().take_while(|&&b| b == b'#').count();
    if s.get(i + hashes) != Some(&b'"') {
        return None;
    }
    let mut j = i + hashes + 1;
    while j < s.len() {
        if s[j] == b'"'
            && s[j + 1..]
                .iter()
                .take(hashes)
                .filter(|&&b| b == b'#')
                .count()
                == hashes
        {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    None
}

/// After the quote at `i`: the end of a character literal (`'{'`, `'\''`, `'é'`), or of a
/// lifetime's quote alone (`'a`, whose name is scanned next).
fn char_or_lifetime_end(s: &[u8], i: usize) -> usize {
    if s.get(i + 1) == Some(&b'\\') {
        // An escape: up to the closing quote (`'\u{1F600}'` included).
        let mut j = i + 3;
        while j < s.len() && s[j] != b'\'' {
            j += 1;
        }
        return (j + 1).min(s.len());
    }
    // One character, which may take several bytes, then a quote.
    let width = match s.get(i + 1) {
        Some(&b) if b >= 0xF0 => 4,
        Some(&b) if b >= 0xE0 => 3,
        Some(&b) if b >= 0xC0 => 2,
        _ => 1,
    };
    if s.get(i + 1 + width) == Some(&b'\'') {
        i + 2 + width
    } else {
        i + 1
    }
}

/// A function with a body, by token indexes.
#[derive(Clone, Copy, Debug)]
struct Function {
    /// The `fn` keyword.
    keyword: usize,
    name: usize,
    /// The body's braces.
    open: usize,
    close: usize,
}

/// Every function with a body (declarations ending in `;` and `fn(..)` types are not).
fn functions(source: &str, tokens: &[Token]) -> Vec<Function> {
    let mut out = Vec::new();
    let is = |i: usize, k: Kind| tokens.get(i).is_some_and(|t| t.kind == k);
    for (keyword, t) in tokens.iter().enumerate() {
        if t.kind != Kind::Word || t.text(source) != "fn" {
            continue;
        }
        let name = keyword + 1;
        if !is(name, Kind::Word) {
            continue;
        }
        // The body is the first brace outside the signature's parentheses and brackets.
        let mut j = name + 1;
        let open = loop {
            match tokens.get(j).map(|t| t.kind) {
                Some(Kind::Open(b'{')) => break Some(j),
                Some(Kind::Open(_)) => j = tokens[j].partner + 1,
                Some(Kind::Semicolon | Kind::Close(_)) | None => break None,
                Some(_) => j += 1,
            }
        };
        if let Some(open) = open {
            out.push(Function {
                keyword,
                name,
                open,
                close: tokens[open].partner,
            });
        }
    }
    out
}

/// The functions whose bodies can be blanked, outermost only (a function inside a blanked one
/// goes with it).
fn inert(
    source: &str,
    tokens: &[Token],
    functions: &[Function],
    other_fields: &[&str],
) -> Vec<Function> {
    let gpu_types: FxHashSet<&str> = names_that_start_gpu_work().collect();
    let gpu_words: FxHashSet<&str> = gpu_fields(source, tokens, &gpu_types)
        .into_iter()
        .chain(gpu_types.iter().copied())
        .chain(other_fields.iter().copied())
        .collect();
    let tuple_fields = gpu_tuple_fields(source, tokens, &gpu_types);
    let mut by_name: FxHashMap<&str, Vec<usize>> = FxHashMap::default();
    for (k, f) in functions.iter().enumerate() {
        by_name
            .entry(tokens[f.name].text(source))
            .or_default()
            .push(k);
    }
    // Each function: does it name GPU work itself, and which functions of the file it names.
    let mut active = vec![false; functions.len()];
    let mut named: Vec<Vec<usize>> = vec![Vec::new(); functions.len()];
    for (k, f) in functions.iter().enumerate() {
        for (i, t) in tokens[f.keyword..=f.close].iter().enumerate() {
            if t.kind != Kind::Word {
                continue;
            }
            let word = t.text(source);
            active[k] |= gpu_words.contains(word);
            // `self.0` of a tuple struct whose field 0 has a GPU type.
            if !tuple_fields.is_empty() && word == "self" {
                let at = f.keyword + i;
                let dot = tokens.get(at + 1).is_some_and(|d| d.text(source) == ".");
                let index = tokens.get(at + 2).map(|n| n.text(source));
                active[k] |= dot && index.is_some_and(|n| tuple_fields.contains(n));
            }
            if let Some(callees) = by_name.get(word) {
                named[k].extend(callees);
            }
        }
    }
    // A function that names one doing GPU work may do some through it.
    loop {
        let mut grew = false;
        for k in 0..functions.len() {
            if !active[k] && named[k].iter().any(|&c| active[c]) {
                active[k] = true;
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
    let mut out: Vec<Function> = Vec::new();
    for (k, f) in functions.iter().enumerate() {
        let inside_blanked = out.last().is_some_and(|b| f.keyword < b.close);
        if !active[k] && !inside_blanked {
            out.push(*f);
        }
    }
    out
}

/// The struct items of the file that name a GPU type, from `struct` to the end of their fields
/// (a tuple struct's `;` included), and its type aliases that do (`pub type Queue =
/// Arc<CudaStream>;`, from `type` to its `;`), in one pass, for the crate's index of types. A
/// line scan, not the token scan: it runs on every file before any is lowered. An item it cuts
/// wrongly does not parse and is left out.
pub fn gpu_items(source: &str) -> (Vec<&str>, Vec<&str>) {
    let gpu_types: Vec<&str> = names_that_start_gpu_work().collect();
    let names_gpu_type = |item: &str| gpu_types.iter().any(|t| item.contains(t));
    let (types, structs): (Vec<_>, Vec<_>) = items_starting_with(source, &["struct ", "type "])
        .partition(|(keyword, _)| *keyword == "type ");
    let aliases: Vec<&str> = types
        .into_iter()
        .filter_map(|(_, rest)| rest.find(';').map(|end| &rest[..=end]))
        .filter(|a| a.contains('=') && names_gpu_type(a))
        .collect();
    // A struct may name a GPU type through one of the file's aliases.
    let alias_names: Vec<&str> = aliases
        .iter()
        .filter_map(|a| {
            a["type ".len()..]
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
        })
        .collect();
    let mut out = Vec::new();
    for (_, rest) in structs {
        let Some(open) = rest.find(['{', '(', ';']) else {
            continue;
        };
        let (opener, closer) = match rest.as_bytes()[open] {
            b'{' => (b'{', b'}'),
            b'(' => (b'(', b')'),
            _ => continue,
        };
        let mut depth = 0;
        let close = rest.bytes().enumerate().skip(open).find_map(|(i, c)| {
            if c == opener {
                depth += 1;
            } else if c == closer {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            None
        });
        let Some(close) = close else {
            continue;
        };
        let end = if opener == b'(' && rest[close + 1..].trim_start().starts_with(';') {
            close + 1 + rest[close + 1..].find(';').unwrap_or(0) + 1
        } else {
            close + 1
        };
        let item = &rest[..end];
        if names_gpu_type(item) || alias_names.iter().any(|a| item.contains(a)) {
            out.push(item);
        }
    }
    (out, aliases)
}

/// For each line that starts (after indentation and a `pub`) with one of `keywords`: that
/// keyword, and the text from it to the end of the file.
fn items_starting_with<'s>(
    source: &'s str,
    keywords: &'s [&'s str],
) -> impl Iterator<Item = (&'s str, &'s str)> {
    let mut line_start = 0;
    source.split_inclusive('\n').filter_map(move |line| {
        let start = line_start;
        line_start += line.len();
        let code = line.trim_start();
        let code = ["pub(crate) ", "pub(super) ", "pub "]
            .iter()
            .find_map(|p| code.strip_prefix(p))
            .unwrap_or(code);
        let keyword = keywords.iter().find(|k| code.starts_with(**k))?;
        Some((*keyword, &source[start + (line.len() - code.len())..]))
    })
}

/// The types the file's `impl` blocks are for (`impl Engine {`, `impl<T> Ops for Engine<T> {`):
/// their methods see those types' fields.
fn impl_targets<'s>(source: &'s str, tokens: &[Token]) -> Vec<&'s str> {
    let mut out = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if t.kind != Kind::Word || t.text(source) != "impl" {
            continue;
        }
        let Some(open) = tokens[i + 1..]
            .iter()
            .position(|t| matches!(t.kind, Kind::Open(b'{') | Kind::Semicolon))
            .map(|p| i + 1 + p)
        else {
            continue;
        };
        // The type's name is the last word outside `<..>` before any `where`, after `for` if
        // there is one (`impl<T: Copy> ops::Ops for path::Engine<T> where T: Send`).
        let header = &tokens[i + 1..open];
        let after_for = header
            .iter()
            .rposition(|t| t.kind == Kind::Word && t.text(source) == "for")
            .map_or(0, |p| p + 1);
        let mut angle = 0;
        let mut name = None;
        for t in &header[after_for..] {
            match (t.kind, t.text(source)) {
                (Kind::Other, "<") => angle += 1,
                (Kind::Other, ">") => angle -= 1,
                (Kind::Word, "where") if angle == 0 => break,
                (Kind::Word, word) if angle == 0 => name = Some(word),
                _ => {}
            }
        }
        out.extend(name);
    }
    out
}

/// The opening bracket of every struct body of the file that opens with `bracket`: `{` for
/// named fields (`struct Name<..> where .. { fields }`), `(` for a tuple struct's.
fn struct_bodies<'t>(
    source: &'t str,
    tokens: &'t [Token],
    bracket: u8,
) -> impl Iterator<Item = usize> + 't {
    tokens.iter().enumerate().filter_map(move |(i, t)| {
        if t.kind != Kind::Word || t.text(source) != "struct" {
            return None;
        }
        tokens[i + 1..]
            .iter()
            .position(|t| matches!(t.kind, Kind::Open(b'{' | b'(') | Kind::Semicolon))
            .map(|p| i + 1 + p)
            .filter(|&o| tokens[o].kind == Kind::Open(bracket))
    })
}

/// The names of the fields of the file's structs declared with a GPU type
/// (`stream: Arc<CudaStream>`): `self.stream` is a GPU value in their methods.
fn gpu_fields<'s>(source: &'s str, tokens: &[Token], gpu_types: &FxHashSet<&str>) -> Vec<&'s str> {
    let mut out = Vec::new();
    for open in struct_bodies(source, tokens, b'{') {
        // A field is a name and a single colon at the top of the body; its type runs to the
        // next field's name (commas inside `<..>` need no telling apart that way).
        let mut fields = Vec::new();
        let mut j = open + 1;
        while j < tokens[open].partner {
            let t = &tokens[j];
            if let Kind::Open(_) = t.kind {
                j = t.partner + 1;
                continue;
            }
            if t.kind == Kind::Word && single_colon(tokens, j + 1) {
                fields.push(j);
            }
            j += 1;
        }
        fields.push(tokens[open].partner);
        for pair in fields.windows(2) {
            let declares = tokens[pair[0] + 2..pair[1]]
                .iter()
                .any(|t| t.kind == Kind::Word && gpu_types.contains(t.text(source)));
            if declares {
                out.push(tokens[pair[0]].text(source));
            }
        }
    }
    out
}

/// The positions (`"0"`, `"1"`) of the fields of the file's tuple structs declared with a GPU
/// type (`struct Streams(Arc<CudaStream>, usize)`): `self.0` is a GPU value in their methods.
fn gpu_tuple_fields(
    source: &str,
    tokens: &[Token],
    gpu_types: &FxHashSet<&str>,
) -> FxHashSet<String> {
    let mut out = FxHashSet::default();
    for open in struct_bodies(source, tokens, b'(') {
        // Fields are split by the commas outside brackets and `<..>`.
        let (mut index, mut angle, mut j) = (0, 0i32, open + 1);
        while j < tokens[open].partner {
            let t = &tokens[j];
            match (t.kind, t.text(source)) {
                (Kind::Open(_), _) => {
                    j = t.partner;
                }
                (Kind::Other, "<") => angle += 1,
                (Kind::Other, ">") => angle -= 1,
                (Kind::Other, ",") if angle == 0 => index += 1,
                (Kind::Word, word) if gpu_types.contains(word) => {
                    out.insert(index.to_string());
                }
                _ => {}
            }
            j += 1;
        }
    }
    out
}

/// Is token `i` a colon on its own (not half of a path's `::`)?
fn single_colon(tokens: &[Token], i: usize) -> bool {
    let colon = |k: usize| tokens.get(k).is_some_and(|t| t.kind == Kind::Colon);
    let adjacent = |a: usize, b: usize| tokens[a].end == tokens[b].at;
    colon(i) && !(colon(i + 1) && adjacent(i, i + 1)) && !(colon(i - 1) && adjacent(i - 1, i))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The functions of `source` whose bodies were blanked, by name.
    fn blanked(source: &str) -> Vec<String> {
        let skimmed =
            without_inert_bodies(source, &CrateTypes::default(), &CrateSummaries::default());
        assert_eq!(skimmed.len(), source.len(), "offsets move");
        let lines = |t: &str| t.match_indices('\n').map(|(i, _)| i).collect::<Vec<_>>();
        assert_eq!(lines(&skimmed), lines(source), "lines move");
        let file = syn::parse_file(&skimmed).expect("the skimmed text parses");
        let mut names = Vec::new();
        for item in &file.items {
            let mut check =
                |name: &syn::Ident, block: &syn::Block| {
                    let original = &source[block.brace_token.span.open().byte_range().start..]
                        [..block.brace_token.span.close().byte_range().end
                            - block.brace_token.span.open().byte_range().start];
                    if block.stmts.is_empty()
                        && !original.trim_matches(|c| "{} \n".contains(c)).is_empty()
                    {
                        names.push(name.to_string());
                    }
                };
            match item {
                syn::Item::Fn(f) => check(&f.sig.ident, &f.block),
                syn::Item::Impl(i) => {
                    for it in &i.items {
                        if let syn::ImplItem::Fn(f) = it {
                            check(&f.sig.ident, &f.block);
                        }
                    }
                }
                _ => {}
            }
        }
        proc_macro2::extra::invalidate_current_thread_spans();
        names
    }

    #[test]
    fn impl_blocks_name_their_type() {
        let source = "impl Engine { }\nimpl<T: Copy> ops::Ops for path::Runner<T> where T: Send { }\nimpl<'a> Drop for Guard<'a> { fn drop(&mut self) {} }\n";
        let (tokens, _) = tokens(source.as_bytes()).unwrap();
        assert_eq!(impl_targets(source, &tokens), ["Engine", "Runner", "Guard"]);
    }

    #[test]
    fn methods_of_a_tuple_struct_with_a_gpu_field_are_kept() {
        let source = r#"
pub struct Device(Arc<CudaContext>, HashMap<String, usize>, Arc<CudaStream>);
impl Device {
    fn names(&self) -> usize { self.1.len() }
    fn upload(&self, host: &[f32]) { let _ = self.2.clone_htod(host); }
    fn context(&self) -> usize { self.0.ordinal() }
}
"#;
        assert_eq!(blanked(source), ["names"]);
        assert_eq!(
            gpu_tuple_fields(
                source,
                &tokens(source.as_bytes()).unwrap().0,
                &names_that_start_gpu_work().collect()
            ),
            FxHashSet::from_iter(["0".to_string(), "2".to_string()])
        );
    }

    #[test]
    fn comments_are_blanked_where_they_stand() {
        let source = "/// Uploads the table.\nfn up(s: &CudaStream) {\n    // zeroed first\n    let url = \"http://x\";\n    let x = s.alloc_zeros::<f32>(4); /* done */\n}\n";
        let skimmed =
            without_inert_bodies(source, &CrateTypes::default(), &CrateSummaries::default());
        assert_eq!(skimmed.len(), source.len());
        assert_eq!(skimmed.lines().count(), source.lines().count());
        for comment in ["Uploads", "zeroed", "done"] {
            assert!(!skimmed.contains(comment), "{comment}");
        }
        // `//` inside a string is no comment.
        assert!(skimmed.contains("let url = \"http://x\";"));
        assert!(skimmed.contains("let x = s.alloc_zeros::<f32>(4);"));
    }

    #[test]
    fn only_functions_without_gpu_work_are_blanked() {
        let source = r#"
use cudarc::driver::{CudaContext, CudaStream};
use std::sync::Arc;

fn shape(n: usize) -> Vec<usize> {
    let mut v = Vec::new();
    for i in 0..n { v.push(i * 2); }
    v
}

fn upload(stream: &Arc<CudaStream>, host: &[f32]) {
    let d = stream.memcpy_stod(host).unwrap();
    drop(d);
}

fn through_helper(host: &[f32], s: &Arc<CudaStream>) {
    upload(s, host);
}

fn calls_the_caller(host: &[f32], s: &Arc<CudaStream>) {
    through_helper(host, s)
}

struct Runner {
    copy: Arc<CudaStream>,
    steps: usize,
}

impl Runner {
    fn sync(&self) {
        self.copy.synchronize().unwrap();
    }
    fn count(&self) -> usize {
        self.steps + 1
    }
}
"#;
        assert_eq!(blanked(source), ["shape", "count"]);
    }

    #[test]
    fn brackets_in_strings_characters_and_comments_do_not_confuse_the_scan() {
        let source = r##"
fn braces<'a>(x: &'a str) -> (char, &'static str, &'static str) {
    // an unmatched } in a comment
    /* and { in a /* nested */ block comment */
    let c = '{';
    let q = '\'';
    let raw = r#"}"#;
    let s = "\"}";
    (c, raw, s)
}

fn after(stream: &CudaStream) {
    stream.synchronize();
}

fn last() -> u8 { b'}' }
"##;
        assert_eq!(blanked(source), ["braces", "last"]);
    }

    #[test]
    fn text_the_scan_cannot_follow_is_left_whole() {
        for source in [
            "fn f() { let s = \"open; }",
            "fn f() { ( }",
            "fn f() { /* }",
        ] {
            assert!(matches!(
                without_inert_bodies(source, &CrateTypes::default(), &CrateSummaries::default()),
                Cow::Borrowed(_)
            ));
        }
    }

    #[test]
    fn declarations_and_function_types_have_no_body_to_blank() {
        let source = "extern \"C\" { fn cuInit(flags: u32) -> i32; }\n\
                      type Hook = fn(u32) -> u32;\n\
                      trait T { fn m(&self); }\n";
        assert!(matches!(
            without_inert_bodies(source, &CrateTypes::default(), &CrateSummaries::default()),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn a_skimmed_file_lowers_as_the_whole_one_does() {
        let source = r#"
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use std::sync::Arc;

fn table() -> [u32; 4] { [1, 2, 3, 4] }

fn run(ctx: &Arc<CudaContext>) {
    let side = ctx.new_stream().unwrap();
    let x: CudaSlice<f32> = side.alloc_zeros(1024).unwrap();
    let y = ctx.default_stream().clone_dtoh(&x).unwrap();
    drop(x);
    let _ = (y, table());
}
"#;
        let deadline = || streamlint_graph::Deadline::NONE;
        let lower = |text: &str| {
            let file = syn::parse_file(text).unwrap();
            let bodies = crate::lower_file(
                &file,
                source,
                deadline(),
                &CrateTypes::default(),
                &CrateSummaries::default(),
            )
            .bodies;
            proc_macro2::extra::invalidate_current_thread_spans();
            bodies
        };
        let whole = lower(source);
        let skimmed = lower(&without_inert_bodies(
            source,
            &CrateTypes::default(),
            &CrateSummaries::default(),
        ));
        assert_ne!(
            without_inert_bodies(source, &CrateTypes::default(), &CrateSummaries::default()),
            source
        );
        assert_eq!(format!("{whole:?}"), format!("{skimmed:?}"));
    }
}
