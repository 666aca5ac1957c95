//! The `streamlint` command.

/// The lowering builds and drops many small maps and vectors per function; mimalloc serves them
/// from thread-local pages, which the worker threads of a whole-project run need.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // Buffered, but not locked for the whole run: `streamlint server` uses the streams from
    // threads of its own.
    let mut stdout = std::io::BufWriter::new(std::io::stdout());
    let code = streamlint_cli::run(std::env::args_os(), &mut stdout, &mut std::io::stderr());
    drop(stdout);
    std::process::exit(code);
}
