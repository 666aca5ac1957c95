#!/usr/bin/env bash
# Run one fuzz target: fuzz/run.sh TARGET [SECONDS]   (targets: python python_bytes rust rust_bytes lsp)
# Installs cargo-fuzz if needed; the bytes targets start from the fixtures; crashes are saved in
# fuzz/artifacts/TARGET/.
set -euo pipefail
target=${1:?usage: fuzz/run.sh TARGET [SECONDS]}
seconds=${2:-600}
here=$(cd "$(dirname "$0")" && pwd)
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
corpus="$here/corpus/$target"
mkdir -p "$corpus"
case $target in
  python_bytes) find "$here/../fixtures/python" -name '*.py' -exec cp -n {} "$corpus/" \; ;;
  rust_bytes) find "$here/../fixtures/rust" -name '*.rs' -exec cp -n {} "$corpus/" \; ;;
esac
cd "$here/.."
# A stable toolchain takes cargo-fuzz's instrumentation flags with RUSTC_BOOTSTRAP; no sanitizer:
# the code has no `unsafe`, what is looked for is panics, stack overflows and slow inputs.
RUSTC_BOOTSTRAP=1 exec cargo fuzz run --fuzz-dir fuzz -s none -O "$target" "$corpus" -- \
  -max_total_time="$seconds" -timeout=10 -max_len=16384 -len_control=0 -print_final_stats=1
