//! RFC 8785 canonical JSON: `spec/vectors/canonical_json.json`, `spec/vectors/canonical_json_python.json`, and properties
//! of `a2a_core::canonical` over arbitrary JSON values.

use a2a_core::canonical::{CanonicalError, canonicalize, canonicalize_into, to_canonical_vec, write_canonical};
use a2a_core::error::ErrorCode;
use proptest::prelude::*;
use serde_json::Value;

use crate::common::{self, TestCase, Verdict};

/// The input bytes of a test: `input.json` as UTF-8, or `input.hex` decoded.
fn input_bytes(t: &TestCase) -> Vec<u8> {
    if let Some(text) = t.input.get("json").and_then(Value::as_str) {
        return text.as_bytes().to_vec();
    }
    let hex = t.input.get("hex").and_then(Value::as_str).unwrap_or_else(|| panic!("tcId {}: no input", t.tc_id));
    assert!(hex.len().is_multiple_of(2), "tcId {}: odd hex", t.tc_id);
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap_or_else(|e| panic!("tcId {}: {e}", t.tc_id)))
        .collect()
}

fn expected_text(t: &TestCase) -> &str {
    t.expected
        .as_ref()
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("tcId {}: valid test without expected", t.tc_id))
}

fn reason_of(t: &TestCase, result: Result<Vec<u8>, CanonicalError>) -> String {
    match result {
        Ok(out) => panic!(
            "tcId {} ({}): accepted as {:?}, expected {:?}",
            t.tc_id,
            t.comment,
            String::from_utf8_lossy(&out),
            t.error
        ),
        Err(e) => {
            assert_eq!(e.code(), ErrorCode::INVALID_JSON, "tcId {}", t.tc_id);
            e.reason.as_str().to_owned()
        }
    }
}

/// Checks a valid test: the byte canonicalizer gives `expected`, the output is a fixed point, and the value
/// canonicalizer agrees on serde_json's reading of the input.
fn check_valid(t: &TestCase, input: &[u8]) {
    let expected = expected_text(t);
    let out = canonicalize(input).unwrap_or_else(|e| panic!("tcId {} ({}): refused: {e}", t.tc_id, t.comment));
    assert_eq!(String::from_utf8_lossy(&out), expected, "tcId {} ({})", t.tc_id, t.comment);
    assert_eq!(canonicalize(&out).as_deref(), Ok(out.as_slice()), "tcId {}: not idempotent", t.tc_id);
    let value: Value = match serde_json::from_slice(input) {
        Ok(v) => v,
        // serde_json stops at 127 levels, one less than MAX_DEPTH.
        Err(e) if t.flags.iter().any(|f| f == "depth") && e.to_string().contains("recursion limit") => return,
        Err(e) => panic!("tcId {}: serde_json: {e}", t.tc_id),
    };
    assert_eq!(String::from_utf8_lossy(&to_canonical_vec(&value)), expected, "tcId {}: value path", t.tc_id);
}

#[test]
fn every_canonical_json_vector_gives_its_expected_output_or_reason() {
    let file = common::load("canonical_json");
    assert_eq!(file.algorithm, "A2A-JCS");
    let (mut valid, mut invalid, mut doubles) = (0, 0, 0);
    for (_, t) in file.tests() {
        let input = input_bytes(t);
        match t.result {
            Verdict::Valid => {
                check_valid(t, &input);
                valid += 1;
            }
            Verdict::Invalid => {
                let want = t.error.as_deref().unwrap_or_else(|| panic!("tcId {}: invalid without error", t.tc_id));
                assert_eq!(reason_of(t, canonicalize(&input)), want, "tcId {} ({})", t.tc_id, t.comment);
                invalid += 1;
            }
            Verdict::Acceptable => panic!("tcId {}: canonical_json has no acceptable cases", t.tc_id),
        }
        // Appendix B: the JSON text is exactly the double given by its bit pattern.
        if let Some(bits) = t.input.get("ieee754").and_then(Value::as_str) {
            let bits = u64::from_str_radix(bits, 16).unwrap_or_else(|e| panic!("tcId {}: {e}", t.tc_id));
            let text = std::str::from_utf8(&input).unwrap_or_else(|e| panic!("tcId {}: {e}", t.tc_id));
            let parsed: f64 = text.parse().unwrap_or_else(|e| panic!("tcId {}: {e}", t.tc_id));
            let same = parsed.to_bits() == bits || (parsed.is_nan() && f64::from_bits(bits).is_nan());
            assert!(same, "tcId {}: {text} is not the double {bits:016x}", t.tc_id);
            doubles += 1;
        }
    }
    assert_eq!(valid + invalid, file.number_of_tests);
    assert_eq!(doubles, 26, "every row of RFC 8785 Appendix B");
    assert!(valid >= 100 && invalid >= 80, "{valid} valid, {invalid} invalid");
}

#[test]
fn every_rejection_reason_has_a_vector() {
    let file = common::load("canonical_json");
    let seen: std::collections::HashSet<&str> = file.tests().filter_map(|(_, t)| t.error.as_deref()).collect();
    for r in a2a_core::canonical::Reason::ALL {
        assert!(seen.contains(r.as_str()), "no vector for {}", r.as_str());
    }
}

#[test]
fn python_recipe_differs_from_jcs_exactly_as_recorded() {
    let file = common::load("canonical_json_python");
    let (mut agree, mut differ) = (0, 0);
    for (_, t) in file.tests() {
        let input = input_bytes(t);
        let python = t.input.get("python_output").and_then(Value::as_str).unwrap_or_else(|| panic!("tcId {}", t.tc_id));
        let agrees = t.flags.iter().any(|f| f == "python_agrees");
        assert_ne!(agrees, t.flags.iter().any(|f| f == "python_differs"), "tcId {}: exactly one verdict flag", t.tc_id);
        match t.result {
            Verdict::Valid => {
                check_valid(t, &input);
                assert_eq!(python == expected_text(t), agrees, "tcId {} ({}): python {python:?}", t.tc_id, t.comment);
            }
            Verdict::Invalid => {
                assert!(!agrees, "tcId {}", t.tc_id);
                assert_eq!(
                    reason_of(t, canonicalize(&input)).as_str(),
                    t.error.as_deref().unwrap_or(""),
                    "tcId {}",
                    t.tc_id
                );
                // The recipe's output is not acceptable JCS input either, or it is but says something else.
                if let Ok(again) = canonicalize(python.as_bytes()) {
                    assert_ne!(again, input, "tcId {}", t.tc_id);
                }
            }
            Verdict::Acceptable => panic!("tcId {}: no acceptable cases expected", t.tc_id),
        }
        if agrees {
            agree += 1;
        } else {
            differ += 1;
        }
    }
    assert!(agree >= 10 && differ >= 20, "{agree} agree, {differ} differ");
}

/// Reruns the recipe with a live `python3` and compares with the recorded outputs. python3 is on the README's set-up
/// list, so the test runs with every `cargo test --workspace` and fails (saying so) where python3 is missing.
#[test]
fn python_outputs_match_a_live_python3() {
    let file = common::load("canonical_json_python");
    let inputs: Vec<&str> = file.tests().filter_map(|(_, t)| t.input.get("json").and_then(Value::as_str)).collect();
    let script = "import json,sys\nfor t in json.load(sys.stdin): \
                  print(json.dumps(json.dumps(json.loads(t), sort_keys=True, separators=(',', ':'))))";
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 must be on the PATH (README set-up: Python 3) to check the recorded python outputs");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(&serde_json::to_vec(&inputs).expect("serializes")).expect("writes");
    }
    let output = child.wait_with_output().expect("python3 finishes");
    let lines: Vec<String> = String::from_utf8(output.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON string per line"))
        .collect();
    let recorded: Vec<&str> =
        file.tests().filter_map(|(_, t)| t.input.get("python_output").and_then(Value::as_str)).collect();
    assert_eq!(lines, recorded);
}

#[test]
fn into_variants_append_to_existing_output() {
    let mut out = b"x".to_vec();
    canonicalize_into(br#"{"b":[1.0],"a":"\u00e9"}"#, &mut out).expect("valid");
    write_canonical(&serde_json::json!({"d": -0.0, "c": 1e21}), &mut out);
    assert_eq!(String::from_utf8(out).expect("utf-8"), r#"x{"a":"é","b":[1]}{"c":1e+21,"d":0}"#);
}

/// Arbitrary JSON values: strings drawn from ASCII, controls, the surrogate-adjacent BMP and supplementary planes,
/// numbers both integral and fractional over the whole double range.
fn arb_json() -> impl Strategy<Value = Value> {
    let chars = prop_oneof![
        3 => proptest::char::range(' ', '~'),
        1 => proptest::char::range('\u{0}', '\u{1f}'),
        1 => proptest::char::range('\u{7f}', '\u{7ff}'),
        1 => proptest::char::range('\u{d000}', '\u{d7ff}'),
        1 => proptest::char::range('\u{e000}', '\u{ffff}'),
        1 => proptest::char::range('\u{10000}', '\u{10ffff}'),
        1 => Just('"'),
        1 => Just('\\'),
    ];
    let string = proptest::collection::vec(chars, 0..8).prop_map(|cs| cs.into_iter().collect::<String>());
    let number = prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1_000_000i64..1_000_000).prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f).map(Value::Number)),
        (-20i32..25, -9.99f64..9.99).prop_map(|(e, m)| serde_json::json!(m * 10f64.powi(e))),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number,
        string.clone().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            proptest::collection::btree_map(string.clone(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn byte_and_value_canonicalizers_agree_on_serde_json_output(v in arb_json()) {
        let compact = serde_json::to_vec(&v).expect("serializes");
        let pretty = serde_json::to_vec_pretty(&v).expect("serializes");
        let canonical = to_canonical_vec(&v);
        prop_assert_eq!(canonicalize(&compact), Ok(canonical.clone()));
        prop_assert_eq!(canonicalize(&pretty), Ok(canonical.clone()));
    }

    #[test]
    fn canonicalization_is_idempotent_and_preserves_the_value(v in arb_json()) {
        let canonical = to_canonical_vec(&v);
        prop_assert_eq!(canonicalize(&canonical), Ok(canonical.clone()));
        let back: Value = serde_json::from_slice(&canonical).expect("canonical output is JSON");
        prop_assert_eq!(to_canonical_vec(&back), canonical);
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_accepted_output_is_canonical(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(out) = canonicalize(&bytes) {
            prop_assert_eq!(canonicalize(&out), Ok(out.clone()));
        }
    }
}
