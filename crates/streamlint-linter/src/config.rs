//! Configuration: `[tool.streamlint]` in `pyproject.toml`, or a `streamlint.toml`, found from
//! the checked path upward. Keys are kebab-case, as in ruff; unknown keys are errors that name
//! the file, the line and the key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use streamlint_python::ApiModel;

use crate::select::Selection;

/// The options a configuration file may set.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Options {
    pub select: Option<Vec<String>>,
    pub ignore: Option<Vec<String>>,
    /// The least severity reported (`error`, `warning`, `info`).
    pub severity: Option<String>,
    /// Glob (relative to the configuration's folder) → codes not reported in matching files.
    pub per_file_ignores: Option<BTreeMap<String, Vec<String>>>,
    /// Replaces the default excluded paths.
    pub exclude: Option<Vec<String>>,
    /// Adds to the excluded paths.
    pub extend_exclude: Option<Vec<String>>,
    pub respect_gitignore: Option<bool>,
    /// Seconds one file's analysis may take.
    pub file_time_limit: Option<f64>,
    /// The project's own names for stream APIs.
    pub api: Option<ApiOptions>,
}

/// Extra names for the API model (`[tool.streamlint.api]`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ApiOptions {
    /// Calls that create a stream (`my_lib.new_stream`).
    pub stream_factories: Option<Vec<String>>,
    /// Calls whose result, used in `with`, makes a stream current (`my_lib.use_stream`).
    pub stream_contexts: Option<Vec<String>>,
    /// Calls that return the current stream.
    pub current_stream: Option<Vec<String>>,
    /// `f(tensor, stream)` functions that record a stream on a tensor.
    pub record_stream_wrappers: Option<Vec<String>>,
    /// `f(waiter, waitee)` functions that make a stream wait for another.
    pub wait_stream_wrappers: Option<Vec<String>>,
    /// Functions that synchronize the device.
    pub synchronize_functions: Option<Vec<String>>,
    /// Expressions that stand for a device module like `torch.cuda` (`torch.npu`,
    /// `get_accelerator()`, `self._device_handle`).
    pub device_modules: Option<Vec<String>>,
}

/// A configuration file that was found and read.
#[derive(Debug)]
pub struct Config {
    pub path: PathBuf,
    pub options: Options,
}

/// A configuration file that cannot be used; the run cannot proceed as asked.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Paths excluded unless the configuration replaces the list.
pub const DEFAULT_EXCLUDE: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    ".tox",
    ".nox",
    ".venv",
    "venv",
    ".mypy_cache",
    ".ruff_cache",
    "__pycache__",
    "__pypackages__",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    "_build",
    "buck-out",
];

impl Config {
    /// Find the configuration that applies to `start`: in its folder or the nearest parent, a
    /// `streamlint.toml`, else a `pyproject.toml` with a `[tool.streamlint]` table.
    pub fn discover(start: &Path) -> Result<Option<Config>, ConfigError> {
        let start = std::path::absolute(start).unwrap_or_else(|_| start.to_path_buf());
        let mut dir = if start.is_dir() {
            Some(start.as_path())
        } else {
            start.parent()
        };
        while let Some(d) = dir {
            let own = d.join("streamlint.toml");
            if own.is_file() {
                return Config::load(&own).map(Some);
            }
            let pyproject = d.join("pyproject.toml");
            if pyproject.is_file() {
                if let Some(config) = Config::load_pyproject(&pyproject)? {
                    return Ok(Some(config));
                }
            }
            dir = d.parent();
        }
        Ok(None)
    }

    /// Read a configuration file named on the command line.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        if path.file_name().is_some_and(|n| n == "pyproject.toml") {
            return Config::load_pyproject(path)?.ok_or_else(|| {
                ConfigError(format!("{}: no [tool.streamlint] table", path.display()))
            });
        }
        let text = read(path)?;
        let options = toml::from_str(&text).map_err(|e| toml_error(path, &e))?;
        Ok(Config {
            path: path.to_path_buf(),
            options,
        })
    }

    fn load_pyproject(path: &Path) -> Result<Option<Config>, ConfigError> {
        #[derive(Deserialize)]
        struct Pyproject {
            tool: Option<Tools>,
        }
        #[derive(Deserialize)]
        struct Tools {
            streamlint: Option<Options>,
        }
        let text = read(path)?;
        let parsed: Pyproject = toml::from_str(&text).map_err(|e| toml_error(path, &e))?;
        Ok(parsed
            .tool
            .and_then(|t| t.streamlint)
            .map(|options| Config {
                path: path.to_path_buf(),
                options,
            }))
    }

    /// The folder the configuration's relative paths are relative to.
    pub fn root(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    /// Add the configured names to an API model.
    pub fn extend_api(&self, api: &mut ApiModel) {
        let Some(o) = &self.options.api else { return };
        let pairs = [
            (&o.stream_factories, &mut api.stream_factories),
            (&o.stream_contexts, &mut api.stream_contexts),
            (&o.current_stream, &mut api.current_stream),
            (&o.record_stream_wrappers, &mut api.record_stream_wrappers),
            (&o.wait_stream_wrappers, &mut api.wait_stream_wrappers),
            (&o.synchronize_functions, &mut api.synchronize_functions),
            (&o.device_modules, &mut api.device_modules),
        ];
        for (names, set) in pairs {
            set.extend(names.iter().flatten().cloned());
        }
    }

    /// The selection the file asks for.
    pub fn selection(&self) -> Selection {
        Selection {
            select: self.options.select.clone().unwrap_or_default(),
            ignore: self.options.ignore.clone().unwrap_or_default(),
            ..Selection::default()
        }
    }

    /// Excluded path patterns: the defaults (or the file's replacement) plus its additions.
    pub fn exclude_patterns(&self) -> Vec<String> {
        let base = match &self.options.exclude {
            Some(own) => own.clone(),
            None => DEFAULT_EXCLUDE.iter().map(|s| s.to_string()).collect(),
        };
        base.into_iter()
            .chain(self.options.extend_exclude.iter().flatten().cloned())
            .collect()
    }

    /// Per-file ignores as matchers.
    pub fn per_file_ignores(&self) -> Result<Vec<(GlobSet, Vec<String>)>, ConfigError> {
        let mut out = Vec::new();
        for (pattern, codes) in self.options.per_file_ignores.iter().flatten() {
            out.push((
                glob_set(std::slice::from_ref(pattern))
                    .map_err(|e| self.invalid("per-file-ignores", &e))?,
                codes.clone(),
            ));
        }
        Ok(out)
    }

    /// The time one file's analysis may take: `file-time-limit` seconds, or the default.
    pub fn file_time_limit(&self) -> Result<Duration, ConfigError> {
        match self.options.file_time_limit {
            None => Ok(crate::DEFAULT_FILE_TIME_LIMIT),
            Some(s) => Duration::try_from_secs_f64(s)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    self.invalid(
                        "file-time-limit",
                        &format!("{s} is not a number of seconds above 0"),
                    )
                }),
        }
    }

    pub fn invalid(&self, key: &str, why: &str) -> ConfigError {
        ConfigError(format!("{}: invalid `{key}`: {why}", self.path.display()))
    }
}

/// Glob patterns as one matcher; a bare name (`build`) also matches anything below it.
pub fn glob_set(patterns: &[String]) -> Result<GlobSet, String> {
    let mut builder = GlobSetBuilder::new();
    for p in patterns {
        let p = p.trim_end_matches('/');
        for form in [
            p.to_string(),
            format!("**/{p}"),
            format!("{p}/**"),
            format!("**/{p}/**"),
        ] {
            builder.add(Glob::new(&form).map_err(|e| format!("`{p}`: {e}"))?);
        }
    }
    builder.build().map_err(|e| e.to_string())
}

fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path)
        .map_err(|e| ConfigError(format!("{}: cannot read: {e}", path.display())))
}

/// A TOML error as `file:line:column: message`.
fn toml_error(path: &Path, e: &toml::de::Error) -> ConfigError {
    let message = e.message().trim().to_string();
    match e.span() {
        Some(span) => {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            ConfigError(format!("{}:{line}:{column}: {message}", path.display()))
        }
        None => ConfigError(format!("{}: {message}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("streamlint-config-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("src/pkg")).unwrap();
        dir
    }

    #[test]
    fn found_upward_and_streamlint_toml_wins() {
        let dir = scratch("discover");
        std::fs::write(
            dir.join("pyproject.toml"),
            "[tool.streamlint]\nselect = [\"SL001\"]\n",
        )
        .unwrap();
        let found = Config::discover(&dir.join("src/pkg")).unwrap().unwrap();
        assert_eq!(found.options.select, Some(vec!["SL001".to_string()]));
        std::fs::write(dir.join("src/streamlint.toml"), "ignore = [\"SL002\"]\n").unwrap();
        let found = Config::discover(&dir.join("src/pkg")).unwrap().unwrap();
        assert!(found.path.ends_with("src/streamlint.toml"));
        assert_eq!(found.options.ignore, Some(vec!["SL002".to_string()]));
    }

    #[test]
    fn pyproject_without_our_table_is_skipped() {
        let dir = scratch("skip");
        std::fs::write(
            dir.join("pyproject.toml"),
            "[tool.ruff]\nline-length = 100\n",
        )
        .unwrap();
        std::fs::write(dir.join("src/pyproject.toml"), "[project]\nname = \"x\"\n").unwrap();
        assert!(Config::discover(&dir.join("src/pkg")).unwrap().is_none());
    }

    #[test]
    fn unknown_keys_name_file_line_and_key() {
        let dir = scratch("unknown");
        std::fs::write(
            dir.join("pyproject.toml"),
            "[tool.streamlint]\nselect = [\"SL001\"]\nselct = [\"SL002\"]\n",
        )
        .unwrap();
        let err = Config::discover(&dir).unwrap_err().0;
        assert!(
            err.contains("pyproject.toml:3:1") && err.contains("selct"),
            "{err}"
        );
        std::fs::write(
            dir.join("pyproject.toml"),
            "[tool.streamlint]\nselect = \"SL001\"\n",
        )
        .unwrap();
        let err = Config::discover(&dir).unwrap_err().0;
        assert!(err.contains("pyproject.toml:2:10"), "{err}");
        std::fs::write(dir.join("pyproject.toml"), "[tool.streamlint\n").unwrap();
        assert!(Config::discover(&dir)
            .unwrap_err()
            .0
            .contains("pyproject.toml:1:"));
    }

    #[test]
    fn api_names_extend_the_model() {
        let dir = scratch("api");
        std::fs::write(
            dir.join("streamlint.toml"),
            "[api]\nrecord-stream-wrappers = [\"keep_alive\"]\ndevice-modules = [\"self._device_handle\"]\n",
        )
        .unwrap();
        let config = Config::discover(&dir).unwrap().unwrap();
        let mut api = ApiModel::default();
        config.extend_api(&mut api);
        assert!(
            api.record_stream_wrappers.contains("keep_alive")
                && api.device_modules.contains("self._device_handle")
        );
    }

    #[test]
    fn every_api_key_reaches_the_model() {
        use streamlint_python::api::ApiCall;
        let dir = scratch("api-keys");
        let text = "[api]\nstream-factories = [\"lib.new_stream\"]\nstream-contexts = [\"lib.use_stream\"]\n\
                    current-stream = [\"lib.cur\"]\nrecord-stream-wrappers = [\"lib.keep\"]\n\
                    wait-stream-wrappers = [\"lib.order\"]\nsynchronize-functions = [\"lib.barrier\"]\n\
                    device-modules = [\"lib.dev\"]\n";
        std::fs::write(dir.join("streamlint.toml"), text).unwrap();
        let config = Config::discover(&dir).unwrap().unwrap();
        let mut api = ApiModel::default();
        config.extend_api(&mut api);
        let expected = [
            ("lib.new_stream", ApiCall::StreamFactory),
            ("lib.use_stream", ApiCall::StreamContext),
            ("lib.cur", ApiCall::CurrentStream),
            ("lib.keep", ApiCall::RecordStreamWrapper),
            ("lib.order", ApiCall::WaitStreamWrapper),
            ("lib.barrier", ApiCall::SynchronizeWrapper),
            ("lib.dev.current_stream", ApiCall::CurrentStream),
        ];
        for (name, call) in expected {
            assert_eq!(api.classify(name), Some(call), "{name}");
        }
        let mut words = api.configured_names();
        words.sort();
        assert_eq!(
            words,
            [
                "barrier",
                "cur",
                "dev",
                "keep",
                "new_stream",
                "order",
                "use_stream"
            ]
        );
    }

    #[test]
    fn globs_match_names_and_subtrees() {
        let set = glob_set(&["tests".to_string(), "gen_*.py".to_string()]).unwrap();
        assert!(
            set.is_match("tests/a.py")
                && set.is_match("pkg/tests/a.py")
                && set.is_match("pkg/gen_x.py")
        );
        assert!(!set.is_match("pkg/a.py"));
    }
}
