//! streamlint's lifetime checker in a user's program (`validate --run`): its files are written to
//! a temporary folder put first on the program's `PYTHONPATH`, whose `sitecustomize.py` starts
//! the checker as soon as the program imports torch; the checker appends each report to a file
//! in that folder, read back when the program ends.

use std::io;
use std::path::PathBuf;
use std::process::Command;

use crate::python::{fresh_folder, CheckerReport, CHECKER_FILES};

/// The `sitecustomize.py` that starts the checker.
const SITECUSTOMIZE: &str = include_str!("../harness/sitecustomize.py");

/// The environment variable naming the report file.
const REPORT_VARIABLE: &str = "STREAMLINT_CHECKER_REPORT";

/// The checker's folder, removed when this value drops.
pub struct Installed {
    dir: PathBuf,
}

impl Installed {
    pub fn new() -> io::Result<Installed> {
        let dir = fresh_folder("streamlint-checker")?;
        std::fs::write(dir.join("sitecustomize.py"), SITECUSTOMIZE)?;
        for (name, text) in CHECKER_FILES {
            std::fs::write(dir.join(name), text)?;
        }
        Ok(Installed { dir })
    }

    fn report_file(&self) -> PathBuf {
        self.dir.join("reports.jsonl")
    }

    /// Make `command` start the checker: the folder first on its `PYTHONPATH`, and where to
    /// write.
    pub fn apply(&self, command: &mut Command) {
        let mut paths = vec![self.dir.clone()];
        if let Some(existing) = std::env::var_os("PYTHONPATH") {
            paths.extend(std::env::split_paths(&existing));
        }
        if let Ok(joined) = std::env::join_paths(paths) {
            command.env("PYTHONPATH", joined);
        }
        command.env(REPORT_VARIABLE, self.report_file());
    }

    /// The reports the program's run left (none if it never imported torch).
    pub fn reports(&self) -> Vec<CheckerReport> {
        let text = std::fs::read_to_string(self.report_file()).unwrap_or_default();
        parse(&text)
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The reports among `text`'s lines (a line cut short by a crash is skipped).
fn parse(text: &str) -> Vec<CheckerReport> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_folder_holds_the_checker_and_goes_away() {
        let installed = Installed::new().unwrap();
        let dir = installed.dir.clone();
        for name in ["sitecustomize.py", "lifetime.py", "checker.py"] {
            assert!(dir.join(name).is_file(), "{name}");
        }
        let mut command = Command::new("python3");
        installed.apply(&mut command);
        let vars: Vec<(String, String)> = command
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_str()?.into(), v?.to_str()?.into())))
            .collect();
        let path = &vars.iter().find(|(k, _)| k == "PYTHONPATH").unwrap().1;
        assert!(path.starts_with(&dir.display().to_string()), "{path}");
        assert!(vars.iter().any(|(k, _)| k == REPORT_VARIABLE));
        assert!(installed.reports().is_empty());
        drop(installed);
        assert!(!dir.exists());
    }

    /// Without torch, the program runs as usual: the `sitecustomize` only waits for the import.
    #[test]
    fn a_program_without_torch_runs_unchanged() {
        let installed = Installed::new().unwrap();
        let mut command = Command::new("python3");
        command.args(["-c", "import json; print(json.dumps([1]))"]);
        installed.apply(&mut command);
        let out = command.output().expect("python3 runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[1]");
        assert!(installed.reports().is_empty());
    }

    #[test]
    fn reports_are_read_line_by_line() {
        let text = "{\"code\": \"SL001\", \"message\": \"m\", \"stacks\": [{\"label\": \"freed\", \"frames\": [{\"file\": \"train.py\", \"line\": 18, \"function\": \"step\"}]}]}\n{\"code\": \"SL0";
        let reports = parse(text);
        assert_eq!(reports.len(), 1);
        assert_eq!(reports[0].stacks[0].frames[0].line, 18);
    }
}
