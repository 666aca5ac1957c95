//! SARIF output as GitHub code scanning takes it: valid against the official 2.1.0 schema (by
//! the `jsonschema` validator, not by our own reading of it), every rule described with its
//! page, results located by repository-relative URIs and carrying fingerprints.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

mod support;

use support::{python_tools, repo_root, run};

/// Fixtures with findings in both languages, one of them with a fix.
const FIXTURES: &[&str] = &[
    "fixtures/python/SL001/bad_docs_pattern_del_without_record.py",
    "fixtures/python/SL003",
    "fixtures/rust/SL003/bad_cust_two_streams_no_event.rs",
    "fixtures/rust/SL001",
];

/// Validates the SARIF log on stdin against the schema named by the first argument. The
/// schema copy keeps the root object's schema under `definitions.Root` (the upstream file has
/// it at the top level), so validation starts there when it exists. Two broken variants of the
/// log must fail, to show the validator checks what it is given.
const VALIDATE: &str = r##"
import copy, json, sys
from jsonschema import Draft7Validator
schema = json.load(open(sys.argv[1], encoding="utf-8"))
if "Root" in schema.get("definitions", {}):
    schema = dict(schema, **{"$ref": "#/definitions/Root"})
validator = Draft7Validator(schema, format_checker=Draft7Validator.FORMAT_CHECKER)
log = json.load(sys.stdin)
errors = sorted(validator.iter_errors(log), key=lambda e: list(e.absolute_path))
for e in errors[:20]:
    print("/".join(map(str, e.absolute_path)), e.message)
no_version = copy.deepcopy(log)
del no_version["version"]
bad_level = copy.deepcopy(log)
bad_level["runs"][0]["results"][0]["level"] = "fatal"
for name, broken in [("no version", no_version), ("bad level", bad_level)]:
    if validator.is_valid(broken):
        print("the validator accepted a broken log:", name)
        sys.exit(2)
sys.exit(1 if errors else 0)
"##;

fn sarif_of(paths: &[&str]) -> Value {
    let absolute: Vec<String> = paths
        .iter()
        .map(|p| repo_root().join(p).to_string_lossy().into_owned())
        .collect();
    let mut args = vec!["check", "--isolated", "--output-format", "sarif"];
    args.extend(absolute.iter().map(String::as_str));
    let (code, out, err) = run(&args);
    assert_ne!(code, 2, "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"))
}

fn validate(log: &Value) {
    let python = python_tools().join("python");
    let schema = repo_root().join("tests/data/sarif-schema-2.1.0.json");
    let mut child = Command::new(&python)
        .args(["-c", VALIDATE])
        .arg(&schema)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin.write_all(log.to_string().as_bytes()).unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "schema validation failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn sarif_output_is_valid_against_the_official_schema() {
    validate(&sarif_of(FIXTURES));
}

#[test]
fn every_rule_carries_its_page_and_results_point_at_their_rule() {
    let log = sarif_of(FIXTURES);
    let driver = &log["runs"][0]["tool"]["driver"];
    assert_eq!(driver["name"], "streamlint");
    let rules = driver["rules"].as_array().expect("rules");
    let catalogue: Vec<&str> = streamlint_rules::RULES
        .iter()
        .chain(streamlint_rules::META)
        .map(|r| r.code)
        .collect();
    let ids: Vec<&str> = rules.iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(ids, catalogue, "every rule of the catalogue, in order");
    for r in rules {
        let markdown = r["help"]["markdown"].as_str().unwrap_or("");
        assert!(
            markdown.starts_with(&format!("# {}", r["id"].as_str().unwrap_or("?"))),
            "{} help.markdown: {markdown:.80}",
            r["id"]
        );
        for field in ["shortDescription", "fullDescription", "help"] {
            assert!(
                r[field]["text"].as_str().is_some_and(|t| !t.is_empty()),
                "{} lacks {field}.text",
                r["id"]
            );
        }
    }
    let results = log["runs"][0]["results"].as_array().expect("results");
    assert!(!results.is_empty());
    for result in results {
        let index = result["ruleIndex"].as_u64().expect("ruleIndex") as usize;
        assert_eq!(rules[index]["id"], result["ruleId"]);
    }
    assert!(
        results
            .iter()
            .any(|r| r["fixes"][0]["artifactChanges"][0]["replacements"]
                .as_array()
                .is_some_and(|a| !a.is_empty())),
        "the Rust SL003 fixture's fix is offered"
    );
}

#[test]
fn results_have_relative_uris_and_fingerprints() {
    let log = sarif_of(FIXTURES);
    let run = &log["runs"][0];
    let root = run["originalUriBaseIds"]["%SRCROOT%"]["uri"]
        .as_str()
        .expect("%SRCROOT% has a URI");
    assert!(
        root.starts_with("file:///") && root.ends_with('/'),
        "{root}"
    );
    let results = run["results"].as_array().expect("results");
    let mut seen_files = std::collections::BTreeSet::new();
    let mut fingerprints = std::collections::BTreeSet::new();
    for result in results {
        let location = &result["locations"][0]["physicalLocation"];
        let artifact = &location["artifactLocation"];
        let uri = artifact["uri"].as_str().expect("uri");
        assert_eq!(artifact["uriBaseId"], "%SRCROOT%", "{uri}");
        assert!(
            !uri.starts_with('/') && !uri.contains(':') && !uri.contains('\\'),
            "not a relative forward-slash URI: {uri}"
        );
        // The base and the relative URI name the fixture that was checked.
        let file = Path::new(&percent_decode(&root["file://".len()..])).join(percent_decode(uri));
        assert!(file.is_file(), "{} does not exist", file.display());
        seen_files.insert(uri.to_string());
        assert!(location["region"]["startLine"].as_u64() >= Some(1));
        let fingerprint = result["partialFingerprints"]["primaryLocationLineHash"]
            .as_str()
            .expect("a fingerprint");
        assert!(!fingerprint.is_empty());
        fingerprints.insert(fingerprint.to_string());
        for (i, related) in result["relatedLocations"]
            .as_array()
            .expect("relatedLocations")
            .iter()
            .enumerate()
        {
            assert_eq!(related["id"], i + 1);
            assert!(related["message"]["text"].as_str().is_some());
        }
    }
    assert_eq!(fingerprints.len(), results.len(), "fingerprints are unique");
    assert!(
        seen_files.iter().any(|f| f.ends_with(".py"))
            && seen_files.iter().any(|f| f.ends_with(".rs")),
        "{seen_files:?}"
    );
}

/// A URI path back to a file path (`%20` to a space).
fn percent_decode(uri: &str) -> String {
    let bytes = uri.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
