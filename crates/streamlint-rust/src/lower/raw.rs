//! Raw driver work: calls given a stream's raw handle, raw pointers, and cust's `launch!`.

use super::*;

impl Lowerer<'_> {
    /// A driver call given a stream's raw handle (`result::malloc_async(s.cu_stream(), n)`,
    /// `result::launch_kernel(.., s.cu_stream(), &mut params)`): raw work on that stream.
    pub(super) fn raw_call(
        &mut self,
        function: &str,
        stream: StreamId,
        args: &syn::punctuated::Punctuated<syn::Expr, syn::token::Comma>,
        sp: Span,
    ) -> Value {
        match function {
            // Stream-ordered memory nothing tracks; a kernel given it may write it.
            "malloc_async" | "mem_alloc_async" => {
                let buffer =
                    self.new_buffer("the raw allocation", Memory::Device, Owner::Local, false);
                self.b.push(
                    OpKind::Produce {
                        buffer,
                        stream,
                        how: Production::Allocate,
                    },
                    sp,
                );
                Value::Ptr {
                    buffer,
                    write: true,
                }
            }
            "free_async" | "mem_free_async" => {
                for (buffer, _) in self.pointers_in(args) {
                    self.b.push(
                        OpKind::Release {
                            buffer,
                            cause: ReleaseCause::FreeOn(stream),
                        },
                        sp,
                    );
                }
                Value::Unknown
            }
            _ => {
                // A device-to-host copy only reads its device pointer.
                let reads_only = function.to_ascii_lowercase().contains("dtoh");
                for (buffer, write) in self.pointers_in(args) {
                    self.b.push(
                        OpKind::Raw {
                            buffer,
                            stream,
                            write: write && !reads_only,
                        },
                        sp,
                    );
                }
                Value::Unknown
            }
        }
    }

    /// Raw pointers named anywhere in the expressions: (buffer, written). Their identifiers are
    /// read only while some local holds a pointer, by walking the syntax tree (printing each
    /// expression to tokens would cost more than lowering it).
    pub(super) fn pointers_in<'e>(
        &self,
        exprs: impl IntoIterator<Item = &'e syn::Expr>,
    ) -> Vec<(BufferId, bool)> {
        let mut found = PointerNames {
            lowerer: self,
            out: Vec::new(),
        };
        let holds_pointers = self
            .scopes
            .iter()
            .flatten()
            .any(|l| !l.gone && matches!(l.value, Value::Ptr { .. } | Value::Ptrs(_)));
        if holds_pointers {
            for e in exprs {
                syn::visit::visit_expr(&mut found, e);
            }
        }
        found.out
    }

    /// The pointers an identifier names, added to `out` once each.
    fn pointers_named(&self, id: &proc_macro2::Ident, out: &mut Vec<(BufferId, bool)>) {
        let found = match self.lookup(&id.to_string()).map(|l| l.value.clone()) {
            Some(Value::Ptr { buffer, write }) => vec![(buffer, write)],
            Some(Value::Ptrs(p)) => p,
            _ => Vec::new(),
        };
        for p in found {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }

    fn pointers_in_tokens(
        &self,
        tokens: proc_macro2::TokenStream,
        out: &mut Vec<(BufferId, bool)>,
    ) {
        for t in tokens {
            match t {
                TokenTree::Ident(id) => self.pointers_named(&id, out),
                TokenTree::Group(g) => self.pointers_in_tokens(g.stream(), out),
                _ => {}
            }
        }
    }

    /// `launch!(module.kernel<<<grid, block, shmem, stream>>>(buf.as_device_ptr(), ..))` (cust):
    /// raw work on `stream` through every buffer whose pointer it passes.
    pub(super) fn macro_call(&mut self, mac: &syn::Macro) {
        let name = mac
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default();
        let sp = span_of(mac.span());
        if name != "launch" {
            self.unknown_macro(&name, mac, sp);
            return;
        }
        let tokens: Vec<TokenTree> = mac.tokens.clone().into_iter().collect();
        // The stream is the last identifier before `>>>`.
        let mut stream = None;
        let mut buffers = Vec::new();
        for (i, t) in tokens.iter().enumerate() {
            if let TokenTree::Ident(id) = t {
                let name = id.to_string();
                match self.lookup(&name).map(|l| l.value.clone()) {
                    Some(Value::Stream(s)) => {
                        let closes = tokens[i + 1..]
                            .iter()
                            .take(3)
                            .all(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == '>'));
                        if closes {
                            stream = Some(s);
                        }
                    }
                    Some(Value::Slice(b)) => buffers.push(b),
                    _ => {}
                }
            }
            if let TokenTree::Group(g) = t {
                for inner in g.stream() {
                    if let TokenTree::Ident(id) = inner {
                        if let Some(Value::Slice(b)) =
                            self.lookup(&id.to_string()).map(|l| l.value.clone())
                        {
                            buffers.push(b);
                        }
                    }
                }
            }
        }
        let Some(stream) = stream else { return };
        for b in buffers {
            self.b.push(
                OpKind::Raw {
                    buffer: b,
                    stream,
                    write: true,
                },
                sp,
            );
        }
    }

    /// A macro the model does not know whose arguments are expressions (a project's
    /// `launch_raw!(func, cfg, stream.cu_stream(), ptr)`, `vec![a, b]`): its arguments are
    /// evaluated as a call's are. Given a stream's raw handle it is raw work on that stream
    /// through the raw pointers it is given; otherwise closures given to it run, and slices it
    /// takes by value move into it. What the expansion does beyond that is not seen.
    fn unknown_macro(&mut self, name: &str, mac: &syn::Macro, sp: Span) {
        // Printing and logging macros only format their arguments.
        const FORMATTING: &[&str] = &[
            "println",
            "print",
            "eprintln",
            "eprint",
            "format",
            "format_args",
            "write",
            "writeln",
            "panic",
            "bail",
            "anyhow",
            "todo",
            "unimplemented",
            "unreachable",
            "trace",
            "debug",
            "info",
            "warn",
            "error",
        ];
        if FORMATTING.contains(&name) {
            return;
        }
        let Ok(args) = mac.parse_body_with(
            syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated,
        ) else {
            return;
        };
        let vals: Vec<Value> = args.iter().map(|a| self.expr(a)).collect();
        if let Some(stream) = raw_stream_among(&vals) {
            self.raw_call(name, stream, &args, sp);
            return;
        }
        self.run_handed_closures(&vals, sp);
        self.move_into_callee(&args, sp);
    }
}

/// The stream whose raw handle (`s.cu_stream()`) is among a call's values: the call is raw
/// work on it.
pub(super) fn raw_stream_among(vals: &[Value]) -> Option<StreamId> {
    vals.iter().find_map(|v| match v {
        Value::RawStream(s) => Some(*s),
        _ => None,
    })
}

/// Walks expressions for identifiers that name raw pointers, macro arguments included (syn
/// keeps those as tokens).
struct PointerNames<'l, 'a> {
    lowerer: &'l Lowerer<'a>,
    out: Vec<(BufferId, bool)>,
}

impl<'ast> syn::visit::Visit<'ast> for PointerNames<'_, '_> {
    fn visit_ident(&mut self, id: &'ast proc_macro2::Ident) {
        self.lowerer.pointers_named(id, &mut self.out);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.lowerer
            .pointers_in_tokens(mac.tokens.clone(), &mut self.out);
    }
}
