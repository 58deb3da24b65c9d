//! Vectors: `spec/vectors/schema_rules.json` (the schema rules) and `spec/vectors/nullable.json` (the converter).

use a2a_core::schema_rules::{check, fix_nullable, rules};
use serde_json::Value;

use crate::common::{Verdict, load};

/// `[{rule, path}]` (or `[{reason, path}]`, `[{kind, path}]`) from a vector, as pairs.
fn pairs(v: Option<&Value>, key: &str) -> Vec<(String, String)> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|x| {
                    let s = |k: &str| x.get(k).and_then(Value::as_str).unwrap_or_else(|| panic!("missing {k} in {x}"));
                    (s(key).to_owned(), s("path").to_owned())
                })
                .collect()
        })
        .unwrap_or_else(|| panic!("missing list for {key}"))
}

#[test]
fn schema_rules_vectors_report_every_violation_at_its_path() {
    let file = load("schema_rules");
    assert_eq!(file.algorithm, "A2A-SCHEMA-RULES");
    let mut seen_rules = std::collections::BTreeSet::new();
    for (_, t) in file.tests() {
        let schema = t.input.get("schema").unwrap_or_else(|| panic!("tcId {}: no schema", t.tc_id));
        let got = check(schema);
        let got_pairs: Vec<(String, String)> = got.iter().map(|v| (v.rule.clone(), v.path.clone())).collect();
        for v in &got {
            assert!(rules::ALL.contains(&v.rule.as_str()), "tcId {}: unknown rule {}", t.tc_id, v.rule);
            assert!(!v.message.is_empty(), "tcId {}: empty message", t.tc_id);
        }
        match t.result {
            Verdict::Valid => {
                assert!(got.is_empty(), "tcId {} ({}): expected no violation, got {got:#?}", t.tc_id, t.comment)
            }
            Verdict::Invalid => {
                let error = t.error.as_deref().unwrap_or_else(|| panic!("tcId {}: invalid without error", t.tc_id));
                let want = match (t.input.get("path"), t.input.get("violations")) {
                    (Some(Value::String(p)), None) => vec![(error.to_owned(), p.clone())],
                    (None, Some(list)) => pairs(Some(list), "rule"),
                    _ => panic!("tcId {}: invalid test needs input.path or input.violations", t.tc_id),
                };
                assert_eq!(got_pairs, want, "tcId {} ({}): {got:#?}", t.tc_id, t.comment);
                assert_eq!(
                    got.first().map(|v| v.rule.as_str()),
                    Some(error),
                    "tcId {}: error is the first rule",
                    t.tc_id
                );
                seen_rules.extend(got.iter().map(|v| v.rule.clone()));
            }
            Verdict::Acceptable => panic!("tcId {}: the schema rules have no acceptable results", t.tc_id),
        }
    }
    let missing: Vec<&&str> = rules::ALL.iter().filter(|r| !seen_rules.contains(**r)).collect();
    assert!(missing.is_empty(), "rules without an invalid vector: {missing:?}");
}

#[test]
fn nullable_vectors_convert_report_and_are_idempotent() {
    let file = load("nullable");
    assert_eq!(file.algorithm, "A2A-NULLABLE-FIX");
    for (_, t) in file.tests() {
        let schema = t.input.get("schema").unwrap_or_else(|| panic!("tcId {}: no schema", t.tc_id));
        let fix = fix_nullable(schema);
        let changes: Vec<(String, String)> = fix
            .changes
            .iter()
            .map(|c| {
                (
                    serde_json::to_value(c.kind).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default(),
                    c.path.clone(),
                )
            })
            .collect();
        let unconvertible: Vec<(String, String)> =
            fix.unconvertible.iter().map(|u| (u.reason.clone(), u.path.clone())).collect();
        match t.result {
            Verdict::Valid => {
                let want = t.expected.as_ref().unwrap_or_else(|| panic!("tcId {}: valid without expected", t.tc_id));
                assert_eq!(Some(&fix.schema), want.get("schema"), "tcId {} ({})", t.tc_id, t.comment);
                assert_eq!(changes, pairs(want.get("changes"), "kind"), "tcId {} ({})", t.tc_id, t.comment);
                assert_eq!(unconvertible, pairs(want.get("unconvertible"), "reason"), "tcId {}", t.tc_id);
                // Nothing of `nullable` is left for the rules to refuse.
                assert!(
                    check(&fix.schema).iter().all(|v| v.rule != rules::NULLABLE_NOT_SUPPORTED),
                    "tcId {}: nullable left over",
                    t.tc_id
                );
            }
            Verdict::Invalid => {
                let want = pairs(t.input.get("unconvertible"), "reason");
                assert_eq!(unconvertible, want, "tcId {} ({})", t.tc_id, t.comment);
                assert_eq!(unconvertible.first().map(|u| u.0.as_str()), t.error.as_deref(), "tcId {}", t.tc_id);
                assert_eq!(changes, pairs(t.input.get("changes"), "kind"), "tcId {} ({})", t.tc_id, t.comment);
                for (_, path) in &unconvertible {
                    assert_eq!(
                        fix.schema.pointer(path),
                        schema.pointer(path),
                        "tcId {}: {path} must be left as it was",
                        t.tc_id
                    );
                    assert!(fix.schema.pointer(path).is_some(), "tcId {}: {path} was removed", t.tc_id);
                }
            }
            Verdict::Acceptable => panic!("tcId {}: the converter has no acceptable results", t.tc_id),
        }
        let again = fix_nullable(&fix.schema);
        assert_eq!(again.schema, fix.schema, "tcId {}: not idempotent", t.tc_id);
        assert!(again.changes.is_empty(), "tcId {}: second run changed {:?}", t.tc_id, again.changes);
        assert_eq!(again.unconvertible, fix.unconvertible, "tcId {}", t.tc_id);
    }
}
