//! The cudarc and cust API model: which methods make streams, slices, events and host buffers,
//! which enqueue work, and what types of annotations denote.

use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, MatchKind};
use rustc_hash::FxHashMap;

/// What a type annotation says a value is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TypeKind {
    Context,
    Stream,
    /// A device buffer cudarc tracks (`CudaSlice`, views).
    TrackedSlice,
    /// A device buffer nothing tracks (cust `DeviceBuffer`).
    UntrackedBuffer,
    PinnedHost,
    Event,
}

/// The GPU types, by the last segment of their path.
const GPU_TYPES: &[(&str, TypeKind)] = &[
    ("CudaContext", TypeKind::Context),
    ("Context", TypeKind::Context),
    ("CudaStream", TypeKind::Stream),
    ("Stream", TypeKind::Stream),
    ("CudaSlice", TypeKind::TrackedSlice),
    ("CudaView", TypeKind::TrackedSlice),
    ("CudaViewMut", TypeKind::TrackedSlice),
    ("DeviceBuffer", TypeKind::UntrackedBuffer),
    ("DeviceSlice", TypeKind::UntrackedBuffer),
    ("DeviceBox", TypeKind::UntrackedBuffer),
    ("PinnedHostSlice", TypeKind::PinnedHost),
    ("LockedBuffer", TypeKind::PinnedHost),
    ("CudaEvent", TypeKind::Event),
    ("Event", TypeKind::Event),
];

/// Classify a type by the last segment of its path (through references, `Arc`, `Option`).
pub fn type_kind(ty: &syn::Type) -> Option<TypeKind> {
    type_kind_in(ty, &FxHashMap::default())
}

/// [`type_kind`], with the project's type aliases (`type Queue = Arc<CudaStream>;`) by name.
pub fn type_kind_in(ty: &syn::Type, aliases: &FxHashMap<String, TypeKind>) -> Option<TypeKind> {
    let type_kind = |t: &syn::Type| type_kind_in(t, aliases);
    match ty {
        syn::Type::Reference(r) => type_kind(&r.elem),
        syn::Type::Paren(p) => type_kind(&p.elem),
        syn::Type::Path(p) => {
            let last = p.path.segments.last()?;
            let name = last.ident.to_string();
            match name.as_str() {
                "Arc" | "Rc" | "Box" | "Option" => match &last.arguments {
                    syn::PathArguments::AngleBracketed(a) => a.args.iter().find_map(|g| match g {
                        syn::GenericArgument::Type(t) => type_kind(t),
                        _ => None,
                    }),
                    _ => None,
                },
                other => GPU_TYPES
                    .iter()
                    .find(|(spelled, _)| *spelled == other)
                    .map(|&(_, kind)| kind)
                    .or_else(|| aliases.get(other).copied()),
            }
        }
        _ => None,
    }
}

/// Methods that create an owned cudarc stream (counted for automatic tracking).
pub const OWNED_STREAM_FACTORIES: &[&str] = &["new_stream", "new_stream_with_priority"];

/// Methods that hand out a stream that does not count for tracking.
pub const BORROWED_STREAMS: &[&str] = &[
    "default_stream",
    "per_thread_stream",
    "wrap_borrowed_stream",
    "cuda_stream",
    "stream",
];

/// Driver calls given no stream (cudarc's `result::memcpy_dtoh_sync`, the driver's
/// `cuMemcpyDtoH_v2`, ...): they run on the legacy default stream, which waits for the context's
/// blocking streams and which they wait for, but not for the non-blocking streams cudarc creates.
/// Whether the host waits for them is [`returns_when_done`].
pub fn on_legacy_stream(function: &str) -> bool {
    const CUDARC: &[&str] = &[
        "memcpy_dtoh_sync",
        "memcpy_htod_sync",
        "memcpy_dtod_sync",
        "memset_d8_sync",
        "memset_d16_sync",
        "memset_d32_sync",
    ];
    const DRIVER: &[&str] = &[
        "cuMemcpyDtoH",
        "cuMemcpyHtoD",
        "cuMemcpyDtoD",
        "cuMemsetD8",
        "cuMemsetD16",
        "cuMemsetD32",
    ];
    CUDARC.contains(&function)
        || DRIVER.iter().any(|d| {
            function
                .strip_prefix(d)
                .is_some_and(|rest| matches!(rest, "" | "_v2"))
        })
}

/// Does a call on the legacy default stream return only once its work is done? A copy into host
/// memory does; a copy from pageable host memory returns once the source is staged, and copies
/// and fills of device memory do not wait at all.
pub fn returns_when_done(function: &str) -> bool {
    function.to_ascii_lowercase().contains("dtoh")
}

/// Methods the lowering knows on any receiver, beyond the stream factories.
const METHODS_ON_ANY_RECEIVER: &[&str] = &[
    "default_stream",
    "alloc_pinned",
    "alloc_pinned_with_flags",
    "new_event",
    "disable_event_tracking",
    "enable_event_tracking",
    "device_ptr",
    "device_ptr_mut",
    "view_ptr",
    "view_ptr_mut",
];

/// The names from which the lowering makes a GPU value, or does GPU work, with no GPU value at
/// hand: the GPU types (annotations, constructors), the methods it knows on any receiver, and
/// `launch!`. Code that names none of them (nor a GPU-typed field, nor a function that does GPU
/// work) has nothing for the model to act on (see `skim`).
pub fn names_that_start_gpu_work() -> impl Iterator<Item = &'static str> {
    GPU_TYPES
        .iter()
        .map(|&(t, _)| t)
        .chain(OWNED_STREAM_FACTORIES.iter().copied())
        .chain(BORROWED_STREAMS.iter().copied())
        .chain(METHODS_ON_ANY_RECEIVER.iter().copied())
        .chain(["launch"])
}

/// Words without which a file cannot hold code the Rust model looks at. They count only as whole
/// identifiers: generated bindings name thousands of things `...CudaStreamA` or `custom_...`.
const WORDS: &[&str] = &[
    "cudarc",
    "cust",
    "CudaStream",
    "CudaSlice",
    "new_stream",
    "fork(",
    "cu_stream",
    "DeviceBuffer",
    "launch!",
];

/// Does `source` mention anything the Rust model acts on, in code? A word in a line comment (a
/// doc example's `use cust::prelude::*;`) is no code of this file. All words are looked for in
/// one pass: most files of a crate are read only to be turned away.
pub fn may_contain_gpu_code(source: &[u8]) -> bool {
    static SCAN: OnceLock<AhoCorasick> = OnceLock::new();
    let scan = SCAN.get_or_init(|| {
        AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .build(WORDS)
            .expect("a few short words always make an automaton")
    });
    let ident = |b: Option<&u8>| b.is_some_and(|&b| b == b'_' || b.is_ascii_alphanumeric());
    scan.find_iter(source).any(|m| {
        let w = WORDS[m.pattern().as_usize()];
        let open_end = w.ends_with(|c: char| c == '_' || c.is_ascii_alphanumeric());
        let before = m.start().checked_sub(1).and_then(|i| source.get(i));
        let ends_there = !open_end || !ident(source.get(m.end()));
        !ident(before) && ends_there && !in_line_comment(source, m.start())
    })
}

/// Is byte `at` after a `//` on its line?
fn in_line_comment(source: &[u8], at: usize) -> bool {
    let line_start = memchr::memrchr(b'\n', &source[..at]).map_or(0, |i| i + 1);
    memchr::memmem::find(&source[line_start..at], b"//").is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_less_driver_calls_are_told_apart() {
        for legacy in [
            "memcpy_dtoh_sync",
            "memset_d8_sync",
            "cuMemcpyDtoH_v2",
            "cuMemsetD32",
        ] {
            assert!(on_legacy_stream(legacy), "{legacy}");
        }
        for other in [
            "memcpy_dtoh_async",
            "cuMemcpyDtoHAsync_v2",
            "cuMemsetD8Async",
            "launch_kernel",
        ] {
            assert!(!on_legacy_stream(other), "{other}");
        }
        assert!(returns_when_done("cuMemcpyDtoH_v2") && returns_when_done("memcpy_dtoh_sync"));
        assert!(!returns_when_done("memcpy_htod_sync") && !returns_when_done("memset_d8_sync"));
    }

    #[test]
    fn the_prefilter_counts_whole_identifiers_only() {
        for yes in [
            "use cudarc::driver::CudaStream;",
            "use cust::prelude::*;",
            "let s = ctx.new_stream()?;",
            "let b = DeviceBuffer::from_slice(&x)?;",
            "unsafe { launch!(f<<<1, 1, 0, s>>>(x)) }",
            "let (a, b) = s.fork()?;",
        ] {
            assert!(may_contain_gpu_code(yes.as_bytes()), "{yes}");
        }
        for no in [
            "CUPTI_CBID_NVTX_nvtxNameCudaStreamA = 26,",
            "/// use cust::prelude::*;",
            "let x = 1; // see CudaStream",
            "fn custom_op() {}",
            "let my_cudarc_version = 1;",
            "fn renew_stream() {}",
        ] {
            assert!(!may_contain_gpu_code(no.as_bytes()), "{no}");
        }
    }
}
