//! `spec/vectors/capability_names.json` and `spec/vectors/capability_declarations.json` against
//! `a2a_core::capability`.

use a2a_core::capability::{CapabilityError, is_valid_name, parse_declaration, parse_declarations, validate_name};
use serde_json::Value;

use crate::common::{TestCase, Verdict, load};

/// The seed's own regex, `^[a-z]+_[a-z]+$`, written out.
fn seed_regex_matches(name: &str) -> bool {
    match name.split_once('_') {
        Some((a, b)) => [a, b].iter().all(|w| !w.is_empty() && w.bytes().all(|c| c.is_ascii_lowercase())),
        None => false,
    }
}

fn check<T>(t: &TestCase, outcome: Result<T, CapabilityError>, to_value: impl Fn(&T) -> Value) -> Option<String> {
    match (t.result, outcome) {
        (Verdict::Valid | Verdict::Acceptable, Ok(v)) => {
            let got = to_value(&v);
            match &t.expected {
                Some(want) if *want != got => Some(format!("expected {want}, got {got}")),
                _ => None,
            }
        }
        (Verdict::Valid, Err(e)) => Some(format!("refused ({}): {e}", e.reason())),
        (Verdict::Invalid, Ok(v)) => Some(format!("accepted: {}", to_value(&v))),
        (Verdict::Invalid, Err(e)) => match &t.error {
            Some(want) if want != e.reason() => Some(format!("refused with {} ({e}), expected {want}", e.reason())),
            _ => None,
        },
        (Verdict::Acceptable, Err(_)) => None,
    }
}

#[test]
fn capability_name_vectors_all_pass() {
    let file = load("capability_names");
    let mut failures = Vec::new();
    for (_, t) in file.tests() {
        let name = t.input.as_str().unwrap_or_else(|| panic!("tcId {}: input is not a string", t.tc_id));
        let outcome = validate_name(name);
        if outcome.is_ok() != is_valid_name(name) {
            failures.push(format!("tcId {}: validate_name and is_valid_name disagree", t.tc_id));
        }
        if t.result == Verdict::Valid {
            let seed_rejects = t.flags.iter().any(|f| f == "SeedRegexRejects");
            if seed_regex_matches(name) == seed_rejects {
                failures.push(format!("tcId {}: flag SeedRegexRejects is wrong for {name:?}", t.tc_id));
            }
        }
        if let Some(f) = check(t, outcome, |()| Value::Null) {
            failures.push(format!("tcId {} ({}): {f}", t.tc_id, t.comment));
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn seed_regex_rejects_seed_examples_that_the_rule_accepts() {
    for name in ["generate_brief_summary", "perform_risk_assessment"] {
        assert!(!seed_regex_matches(name) && is_valid_name(name), "{name}");
    }
}

#[test]
fn capability_declaration_vectors_all_pass() {
    let file = load("capability_declarations");
    let mut failures = Vec::new();
    let mut checked = 0;
    for (group, t) in file.tests() {
        let op = group.params.get("operation").and_then(Value::as_str).unwrap_or_default();
        let failure = match op {
            "parse_declaration" => {
                let outcome = parse_declaration(&t.input);
                if let Ok(d) = &outcome {
                    // The normal form parses back to the same declaration.
                    let again = serde_json::to_value(d).ok().and_then(|v| parse_declaration(&v).ok());
                    if again.as_ref() != Some(d) {
                        failures.push(format!("tcId {}: normal form does not parse back", t.tc_id));
                    }
                }
                check(t, outcome, |d| serde_json::to_value(d).unwrap_or(Value::Null))
            }
            "parse_declarations" => {
                check(t, parse_declarations(&t.input), |d| serde_json::to_value(d).unwrap_or(Value::Null))
            }
            other => panic!("unknown operation {other:?}"),
        };
        checked += 1;
        if let Some(f) = failure {
            failures.push(format!("tcId {} ({}): {f}", t.tc_id, t.comment));
        }
    }
    assert_eq!(checked, file.number_of_tests);
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn missing_auth_requirement_message_says_to_write_none() {
    let file = load("capability_declarations");
    let t = file
        .tests()
        .map(|(_, t)| t)
        .find(|t| t.flags.iter().any(|f| f == "SeedMistake"))
        .expect("the vectors have the seed's mistake");
    let e = parse_declaration(&t.input).expect_err("refused");
    assert_eq!(e.field(), Some("auth_requirement"));
    assert!(
        e.to_string()
            .contains("field `auth_requirement` is required; use \"none\" if the capability needs no authentication"),
        "{e}"
    );
}
