//! The settings of a document: the project's configuration file, found upward from the
//! document as the command line finds it, with the editor's settings on top (as command-line
//! options are: a `select` or `ignore` given by the editor replaces the file's).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;
use streamlint_linter::{parse_severity, Config, Selection, Settings};

/// What the editor asks for (`initializationOptions`, `workspace/didChangeConfiguration`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ClientSettings {
    pub select: Option<Vec<String>>,
    pub ignore: Option<Vec<String>>,
    /// The least severity shown (`error`, `warning`, `info`; replaces the file's `severity`).
    pub severity: Option<String>,
}

impl ClientSettings {
    /// Read `{"streamlint": {...}}` or the inner table itself; `null` means no settings. Keys
    /// that are not ours are left alone: clients send every server the same table.
    pub fn from_json(value: Value) -> Result<ClientSettings, String> {
        let inner = match value {
            Value::Object(mut table) if table.contains_key("streamlint") => {
                table.remove("streamlint").unwrap_or_default()
            }
            other => other,
        };
        if inner.is_null() {
            return Ok(ClientSettings::default());
        }
        let settings: ClientSettings = serde_json::from_value(inner)
            .map_err(|e| format!("invalid streamlint settings: {e}"))?;
        match &settings.severity {
            Some(level) if parse_severity(level).is_none() => Err(format!(
                "invalid streamlint settings: `{level}` is not a severity: use error, warning or info"
            )),
            _ => Ok(settings),
        }
    }

    /// Selectors that name no rule: most likely typos, which the user should hear about.
    pub fn unknown_selectors(&self) -> Vec<String> {
        Selection {
            select: self.select.clone().unwrap_or_default(),
            ignore: self.ignore.clone().unwrap_or_default(),
            ..Selection::default()
        }
        .unknown_patterns()
    }
}

/// The settings found for one document.
pub struct Resolved {
    pub settings: Settings,
    /// The folder of the configuration file that applies, if one does: the project the
    /// document is part of.
    pub root: Option<PathBuf>,
    /// Why the configuration file found could not be used (it names the file); the defaults
    /// apply instead.
    pub error: Option<String>,
}

/// The settings for a document at `path` (`None`: an unsaved buffer, which gets the defaults).
pub fn resolve(path: Option<&Path>, client: &ClientSettings) -> Resolved {
    let project = path.map_or(Ok(None), Config::discover).and_then(|config| {
        let root = config.as_ref().map(|c| c.root().to_path_buf());
        Ok((Settings::from_config(config.as_ref())?, root))
    });
    let (mut settings, root, error) = match project {
        Ok((settings, root)) => (settings, root, None),
        Err(e) => (Settings::default(), None, Some(e.0)),
    };
    if let Some(select) = &client.select {
        settings.selection.select = select.clone();
    }
    if let Some(ignore) = &client.ignore {
        settings.selection.ignore = ignore.clone();
    }
    if let Some(level) = client.severity.as_deref().and_then(parse_severity) {
        settings.selection.min_severity = level;
    }
    Resolved {
        settings,
        root,
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn settings_with_or_without_the_section() {
        let expected = ClientSettings {
            select: Some(vec!["SL001".into()]),
            ..ClientSettings::default()
        };
        let wrapped = json!({"streamlint": {"select": ["SL001"]}, "other": 1});
        assert_eq!(ClientSettings::from_json(wrapped), Ok(expected.clone()));
        assert_eq!(
            ClientSettings::from_json(json!({"select": ["SL001"]})),
            Ok(expected)
        );
        assert_eq!(
            ClientSettings::from_json(Value::Null),
            Ok(ClientSettings::default())
        );
        assert!(ClientSettings::from_json(json!({"select": "SL001"})).is_err());
        let errors = ClientSettings::from_json(json!({"severity": "error"})).unwrap();
        assert_eq!(errors.severity.as_deref(), Some("error"));
        assert!(ClientSettings::from_json(json!({"severity": "loud"})).is_err());
        let typo = ClientSettings::from_json(json!({"ignore": ["SL0O1"]})).unwrap();
        assert_eq!(typo.unknown_selectors(), ["SL0O1"]);
    }

    #[test]
    fn a_bad_file_falls_back_to_the_defaults_and_the_editor_applies_on_top() {
        let dir =
            std::env::temp_dir().join(format!("streamlint-server-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("streamlint.toml"), "select = [\"SL001\"]\n").unwrap();
        let doc = dir.join("a.py");
        let client = ClientSettings {
            ignore: Some(vec!["SL003".into()]),
            severity: Some("warning".into()),
            ..ClientSettings::default()
        };
        let good = resolve(Some(&doc), &client);
        assert!(good.root.is_some() && good.error.is_none());
        assert_eq!(good.settings.selection.select, ["SL001"]);
        assert_eq!(good.settings.selection.ignore, ["SL003"]);
        assert_eq!(
            good.settings.selection.min_severity,
            streamlint_rules::Severity::Warning
        );
        std::fs::write(dir.join("streamlint.toml"), "selct = 1\n").unwrap();
        let bad = resolve(Some(&doc), &client);
        let error = bad.error.unwrap();
        assert!(
            error.contains("streamlint.toml") && error.contains("selct"),
            "{error}"
        );
        assert!(bad.root.is_none() && bad.settings.selection.select.is_empty());
        assert_eq!(bad.settings.selection.ignore, ["SL003"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
