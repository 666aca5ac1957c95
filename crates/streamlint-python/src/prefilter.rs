//! A byte scan that tells, without parsing, whether text could hold anything the Python model
//! acts on. Files that fail it are never parsed, and functions that fail it are not lowered.
//!
//! Every word is looked for in one pass (an Aho-Corasick automaton): most files of a project are
//! read only to be turned away, and a pass per word would read each of them several times.

use aho_corasick::{AhoCorasick, MatchKind};

use crate::ApiModel;

/// What a word found in the text stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Word {
    /// `tream`, the heart of every stream API (`Stream(`, `wait_stream(`, `with stream:`).
    StreamCall,
    /// Identifiers without which text cannot hold code any rule looks at, counted alone:
    /// `Event` (not inside `EventType` or `KVCacheEvent`), `non_blocking`, `copy_to_gpu`, and
    /// the asynchronous collectives' `async_op=True`.
    Identifier,
    /// A function reached through its module (`.isend`, `.irecv`: `dist.isend(..)`), counted
    /// where the name ends: the dot keeps the scan from stopping at `direct` and `raise`.
    Qualified,
    /// The project's own API names (`my_lib.keep_alive` → `keep_alive`).
    Configured,
    /// Datasets and data loaders, also inside longer names (`IterableDataset`): their code may
    /// run in worker processes.
    DataLoading,
    Pinned,
    Yield,
    /// Autograd's saved-tensor hooks, whose pack and unpack methods are read as a pair.
    SavedTensorHooks,
}

/// The words of the scan and what each stands for.
const WORDS: &[(&str, Word)] = &[
    ("tream", Word::StreamCall),
    ("Event", Word::Identifier),
    ("non_blocking", Word::Identifier),
    ("Dataset", Word::DataLoading),
    ("DataLoader", Word::DataLoading),
    // A host/device buffer pair's non-blocking copy (`api::makes_host_device_pair`).
    ("copy_to_gpu", Word::Identifier),
    // Collectives that run on the process group's stream until their handle is waited on (a
    // flag passed on, `async_op=async_op`, is not taken as asynchronous).
    ("async_op=True", Word::Identifier),
    (".isend", Word::Qualified),
    (".irecv", Word::Qualified),
    ("pin_memory", Word::Pinned),
    ("yield", Word::Yield),
    ("saved_tensors_hooks", Word::SavedTensorHooks),
];

/// Where a module's text has what the project index looks for, by offset, sorted.
#[derive(Debug, Default)]
pub struct Found {
    /// Stream code: every place [`Prefilter::admits`] looks for, data loading aside.
    pub stream_code: Vec<usize>,
    pub data_loading: Vec<usize>,
    /// `pin_memory`.
    pub pinned: Vec<usize>,
    /// `yield`.
    pub yields: Vec<usize>,
    /// `saved_tensors_hooks`.
    pub saved_tensor_hooks: Vec<usize>,
}

/// The scan, with the project's own API names.
#[derive(Clone, Debug)]
pub struct Prefilter {
    automaton: AhoCorasick,
    /// What each pattern of the automaton stands for, by pattern index.
    words: Vec<Word>,
}

impl Default for Prefilter {
    fn default() -> Prefilter {
        Prefilter::with_names(Vec::new())
    }
}

impl Prefilter {
    pub fn new(api: &ApiModel) -> Prefilter {
        Prefilter::with_names(api.configured_names())
    }

    fn with_names(configured: Vec<String>) -> Prefilter {
        let mut patterns: Vec<String> = WORDS.iter().map(|(w, _)| w.to_string()).collect();
        let mut words: Vec<Word> = WORDS.iter().map(|&(_, kind)| kind).collect();
        for name in configured.into_iter().filter(|n| !n.is_empty()) {
            patterns.push(name);
            words.push(Word::Configured);
        }
        // Leftmost matches, without overlaps: the words do not overlap one another (a
        // configured name that contains one counts as itself), and the automaton then skips
        // ahead with its SIMD prefilter.
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .build(&patterns)
            .expect("a few short words always make an automaton");
        Prefilter { automaton, words }
    }

    /// Does `text` mention anything the analysis could act on?
    pub fn admits(&self, text: &[u8]) -> bool {
        self.scan(text).any(|(word, _)| {
            matches!(
                word,
                Word::StreamCall
                    | Word::Identifier
                    | Word::Qualified
                    | Word::Configured
                    | Word::DataLoading
            )
        })
    }

    /// Everything the project index marks in a module, in one pass (matches come in the order
    /// of the text, so each list is sorted).
    pub fn find(&self, text: &[u8]) -> Found {
        let mut found = Found::default();
        for (word, at) in self.scan(text) {
            let list = match word {
                Word::StreamCall | Word::Identifier | Word::Qualified | Word::Configured => {
                    &mut found.stream_code
                }
                Word::DataLoading => &mut found.data_loading,
                Word::Pinned => &mut found.pinned,
                Word::Yield => &mut found.yields,
                Word::SavedTensorHooks => &mut found.saved_tensor_hooks,
            };
            list.push(at);
        }
        found
    }

    /// Each word that counts where it stands, with its offset.
    fn scan<'t>(&'t self, text: &'t [u8]) -> impl Iterator<Item = (Word, usize)> + 't {
        self.automaton.find_iter(text).filter_map(move |m| {
            let word = self.words[m.pattern().as_usize()];
            let at = m.start();
            let counts = match word {
                Word::StreamCall => calls_a_stream(text, at),
                Word::Identifier => whole_identifier(text, at, m.end()),
                Word::Qualified => ends_a_name(text, m.end()),
                _ => true,
            };
            (counts && !in_doctest(text, at)).then_some((word, at))
        })
    }
}

/// Is byte `at` on a line of a docstring's example (`>>> with httpx.stream("GET", url) as r:`,
/// or its `...` continuation)? Such lines are text, never run as the module's code; model
/// files of some projects carry hundreds of them.
fn in_doctest(text: &[u8], at: usize) -> bool {
    let line_start = memchr::memrchr(b'\n', &text[..at]).map_or(0, |i| i + 1);
    let line = text[line_start..at].trim_ascii_start();
    line.starts_with(b">>>") || line.starts_with(b"...")
}

/// Is the word at `start..end` a whole identifier?
fn whole_identifier(text: &[u8], start: usize, end: usize) -> bool {
    !is_identifier_byte(start.checked_sub(1).and_then(|i| text.get(i))) && ends_a_name(text, end)
}

/// Does no identifier character follow `end`?
fn ends_a_name(text: &[u8], end: usize) -> bool {
    !is_identifier_byte(text.get(end))
}

fn is_identifier_byte(b: Option<&u8>) -> bool {
    b.is_some_and(|&b| b == b'_' || b.is_ascii_alphanumeric())
}

/// Does the `tream` at `i` call something stream-like (`torch.cuda.Stream(`,
/// `torch.cuda.stream(s)`, `wait_stream(`, `current_stream(`, `get_streams(`) or enter a stream
/// as a context (`with side_stream:`)? Text that only passes a `stream=` argument along or names
/// a parameter `stream` has no stream order of its own to get wrong.
fn calls_a_stream(text: &[u8], i: usize) -> bool {
    if !matches!(i.checked_sub(1).map(|j| text[j]), Some(b's' | b'S')) {
        return false;
    }
    let mut rest = &text[i + 5..];
    if rest.first() == Some(&b's') {
        rest = &rest[1..];
    }
    let rest = rest.trim_ascii_start();
    match rest.first() {
        Some(b'(') => true,
        // The end of a `with` header: only a comment may follow on the line.
        Some(b':') => {
            let line = rest[1..].split(|&c| c == b'\n').next().unwrap_or_default();
            let line = line.trim_ascii();
            line.is_empty() || line.starts_with(b"#")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_apis_are_told_from_other_streams() {
        let scan = Prefilter::default();
        for yes in [
            "torch.cuda.Stream()",
            "s.wait_stream(x)",
            "get_streams (n)",
            "with stream:",
            "with self.copy_stream:  # overlap",
            "ev = torch.cuda.Event()",
            "def f(done: Event):",
            "x.to(dev, non_blocking=True)",
            "class Shards(IterableDataset):",
        ] {
            assert!(scan.admits(yes.as_bytes()), "{yes}");
        }
        for no in [
            "self.streamer.put(x)",
            "streaming=True",
            "upstreamer",
            "x = 1",
            "kernel(x, stream=stream)",
            "def launch(x, stream: int):",
            "self.streams[0]",
            "kind: EventType",
            "publish(KVCacheEvent(x))",
            "    >>> with httpx.stream(\"GET\", url) as response:",
            "    ...     x = x.to(device, non_blocking=True)",
        ] {
            assert!(!scan.admits(no.as_bytes()), "{no}");
        }
    }

    #[test]
    fn asynchronous_collectives_are_words_where_spelled_so() {
        let scan = Prefilter::default();
        for yes in [
            "work = dist.all_reduce(t, async_op=True)",
            "req = torch.distributed.isend(buf, dst=1)",
            "ops.append(dist.irecv(tensor=x, src=0))",
        ] {
            assert!(scan.admits(yes.as_bytes()), "{yes}");
        }
        for no in [
            "dist.all_reduce(t, async_op=async_op)",
            "raise ValueError('otherwise')",
            "os.path.isdir(d) or redirect(x)",
            "self.isender = 1",
        ] {
            assert!(!scan.admits(no.as_bytes()), "{no}");
        }
    }

    #[test]
    fn the_projects_own_names_are_words_too() {
        let mut api = ApiModel::default();
        api.record_stream_wrappers
            .insert("my_lib.keep_alive".into());
        assert!(Prefilter::new(&api).admits(b"keep_alive(x, s)"));
        assert!(!Prefilter::default().admits(b"keep_alive(x, s)"));
    }
}
