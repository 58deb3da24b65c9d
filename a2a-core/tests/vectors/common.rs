//! The shape shared by every vector file (Wycheproof-like) and its loader.
#![allow(dead_code)] // not every vector module reads every field

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

/// A whole vector file: `spec/vectors/<name>.json`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct VectorFile {
    /// What the vectors test, e.g. `A2A-JCS`.
    pub(crate) algorithm: String,
    /// The specification sections the vectors exercise.
    #[serde(default)]
    pub(crate) spec_refs: Vec<String>,
    /// Free text for people.
    #[serde(default)]
    pub(crate) header: Vec<String>,
    /// Every flag used by a test, with its meaning.
    pub(crate) notes: BTreeMap<String, String>,
    /// Must equal the number of tests in all groups.
    #[serde(rename = "numberOfTests")]
    pub(crate) number_of_tests: usize,
    /// The groups.
    #[serde(rename = "testGroups")]
    pub(crate) test_groups: Vec<TestGroup>,
}

/// A group of tests sharing parameters (e.g. a key).
#[derive(Debug, Deserialize)]
pub(crate) struct TestGroup {
    /// Group parameters, specific to the file.
    #[serde(flatten)]
    pub(crate) params: BTreeMap<String, Value>,
    /// The tests.
    pub(crate) tests: Vec<TestCase>,
}

/// Whether the input is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Verdict {
    /// Must be accepted (and produce `expected`, when given).
    Valid,
    /// Must be rejected (with `error`, when given).
    Invalid,
    /// Either outcome is allowed.
    Acceptable,
}

/// One test.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TestCase {
    /// Unique within the file.
    #[serde(rename = "tcId")]
    pub(crate) tc_id: u32,
    /// What the test is about.
    pub(crate) comment: String,
    /// Flags, each described in the file's `notes`.
    #[serde(default)]
    pub(crate) flags: Vec<String>,
    /// The input.
    pub(crate) input: Value,
    /// The expected output, for valid inputs that produce one.
    #[serde(default)]
    pub(crate) expected: Option<Value>,
    /// The verdict.
    pub(crate) result: Verdict,
    /// The expected stable error code, for invalid inputs.
    #[serde(default)]
    pub(crate) error: Option<String>,
}

impl VectorFile {
    /// Every test with its group.
    pub(crate) fn tests(&self) -> impl Iterator<Item = (&TestGroup, &TestCase)> {
        self.test_groups.iter().flat_map(|g| g.tests.iter().map(move |t| (g, t)))
    }
}

/// The repository's `spec/vectors` folder.
pub(crate) fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../spec/vectors")
}

/// Loads and sanity-checks `spec/vectors/<name>.json`: the count matches, ids are unique, every flag is described.
pub(crate) fn load(name: &str) -> VectorFile {
    let path = vectors_dir().join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let file: VectorFile =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not a vector file: {e}", path.display()));
    let mut ids = HashSet::new();
    let mut n = 0;
    for (_, t) in file.tests() {
        n += 1;
        assert!(ids.insert(t.tc_id), "{name}: tcId {} appears twice", t.tc_id);
        for f in &t.flags {
            assert!(file.notes.contains_key(f), "{name}: tcId {} uses flag {f} that notes does not describe", t.tc_id);
        }
        if t.result == Verdict::Invalid {
            assert!(t.expected.is_none(), "{name}: tcId {} is invalid but has an expected output", t.tc_id);
        }
    }
    assert_eq!(n, file.number_of_tests, "{name}: numberOfTests is wrong");
    assert!(n > 0, "{name}: no tests");
    file
}
