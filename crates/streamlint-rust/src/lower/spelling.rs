//! How fixes are spelled in Rust: the suggested call is built as syntax from the operands'
//! own expressions, so a receiver such as `*stream` or `a.b()?` keeps its meaning (the printer
//! adds the parentheses precedence needs) and the text is formatted the way rustfmt would.

use quote::{quote, ToTokens};
use streamlint_graph::Spelling;
use syn::spanned::Spanned;

pub(super) const SPELLING: Spelling = Spelling {
    record_stream: None,
    wait_stream: join_call,
    line_comment: "//",
    statement_end: ";",
    wait_can_fail: true,
    stream_block: None,
};

/// `waiter.join(&waitee)?`: cudarc's way to order one stream after the work queued on another.
fn join_call(waiter: &str, waitee: &str) -> String {
    match (
        syn::parse_str::<syn::Expr>(waiter),
        syn::parse_str::<syn::Expr>(waitee),
    ) {
        (Ok(waiter), Ok(waitee)) => {
            let waiter = receiver(waiter);
            print_tokens(quote!(#waiter.join(&#waitee)?))
        }
        // Names come from the source, so they parse; keep a readable message if one does not.
        _ => format!("{waiter}.join(&{waitee})?"),
    }
}

/// Tokens spliced in front of `.method()` bind tighter than a prefix or binary operator in
/// them, so such a receiver is parenthesized.
fn receiver(expr: syn::Expr) -> proc_macro2::TokenStream {
    use syn::Expr::{Call, Field, Index, MethodCall, Paren, Path, Try};
    match expr {
        Call(_) | Field(_) | Index(_) | MethodCall(_) | Paren(_) | Path(_) | Try(_) => {
            quote!(#expr)
        }
        _ => quote!((#expr)),
    }
}

/// An expression as written in `source`, on one line (a method chain continued on the next line
/// joins without a space); as formatted source where its text cannot be found.
pub(super) fn spelled(source: &str, expr: &(impl ToTokens + Spanned)) -> String {
    let Some(text) = source
        .get(crate::offsets::byte_range(expr.span()))
        .filter(|t| !t.is_empty())
    else {
        return print_tokens(quote!(#expr));
    };
    let mut out = String::with_capacity(text.len());
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if !out.is_empty() && !line.starts_with(['.', '?', ')', ']']) {
            out.push(' ');
        }
        out.push_str(line);
    }
    out
}

/// Prints an expression's tokens as formatted source on a single line.
fn print_tokens(expr: proc_macro2::TokenStream) -> String {
    let file: syn::File = syn::parse_quote!(fn f() { #expr; });
    let printed = prettyplease::unparse(&file);
    let body = printed
        .trim()
        .trim_start_matches("fn f() {")
        .trim_end_matches('}');
    let one_line: Vec<&str> = body
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    one_line.join(" ").trim_end_matches(';').to_string()
}

#[cfg(test)]
mod tests {
    use super::join_call;

    #[test]
    fn join_is_spelled_as_formatted_rust() {
        assert_eq!(join_call("s2", "s1"), "s2.join(&s1)?");
        assert_eq!(
            join_call("self.copy_stream", "ctx.default_stream()"),
            "self.copy_stream.join(&ctx.default_stream())?"
        );
    }

    #[test]
    fn receivers_keep_their_meaning() {
        assert_eq!(join_call("*stream", "other"), "(*stream).join(&other)?");
        assert_eq!(join_call("&self.stream", "a"), "(&self.stream).join(&a)?");
    }
}
