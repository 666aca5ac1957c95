//! The language server under a real LSP client: `tests/lsp` drives `streamlint server` with
//! pytest-lsp (a pygls-based client that announces Visual Studio Code's capabilities), from
//! diagnostics on open through edits to code actions.

use std::process::Command;

mod support;

#[test]
fn a_real_lsp_client_gets_diagnostics_that_follow_edits_and_code_actions() {
    let python = support::python_tools().join("python");
    let out = Command::new(&python)
        .args(["-m", "pytest", "-q", "tests/lsp"])
        .current_dir(support::repo_root())
        .env("STREAMLINT_BIN", env!("CARGO_BIN_EXE_streamlint"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
    assert!(
        out.status.success(),
        "pytest failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
