//! Paths as CI services want them. The command line keeps paths as the user typed them
//! (`./src/a.py`, `../lib/b.py`, `/abs/c.py`), but code scanning, annotations and test reports
//! match findings to the files of a checkout by their path from the repository root, with
//! forward slashes. Paths are compared lexically (`..` removes the component before it):
//! symbolic links are not resolved, as the user's view of the tree is the one to report.

use std::path::{Component, Path, PathBuf, Prefix};

/// Where a reported file lies with respect to the base directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// Inside the base: the forward-slash path from it (`src/a.py`).
    Under(String),
    /// Outside the base: the absolute path.
    Elsewhere(PathBuf),
}

/// The absolute form of `path` (relative ones are relative to the working directory), without
/// `.` and `..` components. `None` only when the working directory is unknown.
pub(crate) fn absolute(path: &Path) -> Option<PathBuf> {
    let path = std::path::absolute(path).ok()?;
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    Some(out)
}

/// Where `path` lies with respect to `base` (itself made absolute like `path`). `None` when the
/// working directory is unknown and `path` or `base` is relative.
pub(crate) fn place(path: &str, base: &Path) -> Option<Place> {
    let path = absolute(Path::new(path))?;
    let base = absolute(base)?;
    Some(match path.strip_prefix(&base) {
        Ok(rest) => Place::Under(forward_slashes(rest)),
        Err(_) => Place::Elsewhere(path),
    })
}

/// The path to show to a CI service: from the base when the file is inside it, else as given.
pub(crate) fn display(path: &str, base: &Path) -> String {
    match place(path, base) {
        Some(Place::Under(rest)) => rest,
        _ => path.to_string(),
    }
}

/// A relative path's components joined by `/`, whatever the platform's separator.
fn forward_slashes(path: &Path) -> String {
    let parts: Vec<_> = path
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect();
    parts.join("/")
}

/// A relative path as a URI reference: each component percent-encoded, joined by `/`.
pub(crate) fn relative_uri(path: &str) -> String {
    let parts: Vec<String> = path.split('/').map(|p| encode(p.as_bytes())).collect();
    parts.join("/")
}

/// An absolute path as a `file://` URI (`file:///home/a/b.py`, `file:///C:/a/b.py`,
/// `file://server/share/a.py`), ending in `/` when `directory` (a base URI must, or its last
/// component would be replaced when a relative reference is resolved against it).
pub(crate) fn file_uri(path: &Path, directory: bool) -> String {
    let mut host = String::new();
    let mut parts = Vec::new();
    for component in path.components() {
        match component {
            Component::Prefix(prefix) => match prefix.kind() {
                Prefix::Disk(drive) | Prefix::VerbatimDisk(drive) => {
                    parts.push(format!("{}:", char::from(drive)));
                }
                Prefix::UNC(server, share) | Prefix::VerbatimUNC(server, share) => {
                    host = encode(server.as_encoded_bytes());
                    parts.push(encode(share.as_encoded_bytes()));
                }
                Prefix::Verbatim(name) | Prefix::DeviceNS(name) => {
                    parts.push(encode(name.as_encoded_bytes()));
                }
            },
            Component::Normal(name) => parts.push(encode(name.as_encoded_bytes())),
            Component::RootDir | Component::CurDir | Component::ParentDir => {}
        }
    }
    let mut uri = format!("file://{host}/{}", parts.join("/"));
    if directory && !uri.ends_with('/') {
        uri.push('/');
    }
    uri
}

/// Percent-encodes every byte but RFC 3986's unreserved characters, so that spaces, `%`, `#`,
/// `?`, `:` and non-ASCII names survive as one path segment.
fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_paths_under_the_base_become_relative() {
        let base = Path::new("/repo");
        assert_eq!(
            place("/repo/src/a.py", base),
            Some(Place::Under("src/a.py".into()))
        );
        assert_eq!(
            place("/repo/./src/../lib/b.rs", base),
            Some(Place::Under("lib/b.rs".into()))
        );
        assert_eq!(
            place("/repository/a.py", base),
            Some(Place::Elsewhere("/repository/a.py".into())),
            "a sibling with a common name prefix is not inside"
        );
        assert_eq!(
            place("/repo/../other/a.py", base),
            Some(Place::Elsewhere("/other/a.py".into()))
        );
    }

    #[test]
    fn relative_paths_are_read_from_the_working_directory() {
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            place("./src/lib.rs", &cwd),
            Some(Place::Under("src/lib.rs".into()))
        );
        assert_eq!(
            place("src/lib.rs", Path::new(".")),
            place("src/lib.rs", &cwd)
        );
        assert_eq!(
            place("../x.py", &cwd),
            Some(Place::Elsewhere(cwd.parent().unwrap().join("x.py")))
        );
        assert_eq!(display("../x.py", &cwd), "../x.py", "kept as given");
        assert_eq!(display("./src/lib.rs", &cwd), "src/lib.rs");
    }

    #[test]
    fn uris_encode_what_they_must() {
        assert_eq!(relative_uri("src/my file#1.py"), "src/my%20file%231.py");
        assert_eq!(relative_uri("dir/ç.py"), "dir/%C3%A7.py");
        assert_eq!(relative_uri("a:b/100%.py"), "a%3Ab/100%25.py");
        assert_eq!(
            file_uri(Path::new("/tmp/x y/a.py"), false),
            "file:///tmp/x%20y/a.py"
        );
        assert_eq!(file_uri(Path::new("/repo"), true), "file:///repo/");
        assert_eq!(file_uri(Path::new("/"), true), "file:///");
    }
}
