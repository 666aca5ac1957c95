//! A byte scan that tells, without parsing, whether text could hold anything the Python model
//! acts on. Files that fail it are never parsed, and functions that fail it are not lowered.

use crate::ApiModel;

/// Identifiers without which text cannot hold code any rule looks at (stream APIs are found by
/// `uses_streams`). `Event` counts alone, not inside `EventType` or `KVCacheEvent`.
const STREAM_IDENTIFIERS: &[&str] = &["Event", "non_blocking"];

/// Words for the worker rule, also inside longer names (`IterableDataset`).
const WORKER_WORDS: &[&str] = &["Dataset", "DataLoader"];

/// The scan, with the project's own API names (`my_lib.keep_alive` → `keep_alive`).
#[derive(Clone, Debug, Default)]
pub struct Prefilter {
    configured: Vec<String>,
}

impl Prefilter {
    pub fn new(api: &ApiModel) -> Prefilter {
        Prefilter {
            configured: api.configured_names(),
        }
    }

    /// Does `text` mention anything the analysis could act on?
    pub fn admits(&self, text: &[u8]) -> bool {
        self.stream_code(text).next().is_some() || self.mentions_data_loading(text)
    }

    /// Where `text` mentions stream code: every place [`Prefilter::admits`] looks for, data
    /// loading aside, by offset (in no particular order). A piece of the text is admitted when it
    /// holds one of them.
    pub fn stream_code_offsets(&self, text: &[u8]) -> Vec<usize> {
        self.stream_code(text).collect()
    }

    /// Does `text` mention datasets or data loaders (whose code may run in worker processes)?
    pub fn mentions_data_loading(&self, text: &[u8]) -> bool {
        data_loading(text).next().is_some()
    }

    /// Where `text` mentions datasets or data loaders, by offset (in no particular order).
    pub fn data_loading_offsets(&self, text: &[u8]) -> Vec<usize> {
        data_loading(text).collect()
    }

    fn stream_code<'t>(&'t self, text: &'t [u8]) -> impl Iterator<Item = usize> + 't {
        stream_api_calls(text)
            .chain(
                STREAM_IDENTIFIERS
                    .iter()
                    .flat_map(move |w| identifier_offsets(text, w)),
            )
            .chain(
                self.configured
                    .iter()
                    .flat_map(move |w| memchr::memmem::find_iter(text, w.as_bytes())),
            )
    }
}

fn data_loading(text: &[u8]) -> impl Iterator<Item = usize> + '_ {
    WORKER_WORDS
        .iter()
        .flat_map(move |w| memchr::memmem::find_iter(text, w.as_bytes()))
}

/// Where `word` occurs in `text` as a whole identifier.
fn identifier_offsets<'t>(text: &'t [u8], word: &'t str) -> impl Iterator<Item = usize> + 't {
    let ident = |b: Option<&u8>| b.is_some_and(|&b| b == b'_' || b.is_ascii_alphanumeric());
    memchr::memmem::find_iter(text, word.as_bytes()).filter(move |&at| {
        !ident(at.checked_sub(1).and_then(|i| text.get(i))) && !ident(text.get(at + word.len()))
    })
}

/// Where the text calls something stream-like (`torch.cuda.Stream(`, `torch.cuda.stream(s)`,
/// `wait_stream(`, `current_stream(`, `get_streams(`) or enters a stream as a context (`with
/// side_stream:`). Text that only passes a `stream=` argument along or names a parameter
/// `stream` has no stream order of its own to get wrong.
fn stream_api_calls(text: &[u8]) -> impl Iterator<Item = usize> + '_ {
    memchr::memmem::find_iter(text, b"tream").filter(|&i| {
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
    })
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
