//! The cudarc and cust API model: which methods make streams, slices, events and host buffers,
//! which enqueue work, and what types of annotations denote.

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

/// Classify a type by the last segment of its path (through references, `Arc`, `Option`).
pub fn type_kind(ty: &syn::Type) -> Option<TypeKind> {
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
                "CudaContext" | "Context" => Some(TypeKind::Context),
                "CudaStream" | "Stream" => Some(TypeKind::Stream),
                "CudaSlice" | "CudaView" | "CudaViewMut" => Some(TypeKind::TrackedSlice),
                "DeviceBuffer" | "DeviceSlice" | "DeviceBox" => Some(TypeKind::UntrackedBuffer),
                "PinnedHostSlice" | "LockedBuffer" => Some(TypeKind::PinnedHost),
                "CudaEvent" | "Event" => Some(TypeKind::Event),
                _ => None,
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
/// doc example's `use cust::prelude::*;`) is no code of this file.
pub fn may_contain_gpu_code(source: &[u8]) -> bool {
    let ident = |b: Option<&u8>| b.is_some_and(|&b| b == b'_' || b.is_ascii_alphanumeric());
    WORDS.iter().any(|w| {
        let open_end = w.ends_with(|c: char| c == '_' || c.is_ascii_alphanumeric());
        memchr::memmem::find_iter(source, w.as_bytes()).any(|at| {
            let before = at.checked_sub(1).and_then(|i| source.get(i));
            let after = source.get(at + w.len());
            let ends_there = !open_end || !ident(after);
            !ident(before) && ends_there && !in_line_comment(source, at)
        })
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
