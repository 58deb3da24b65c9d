//! `spec/vectors/execution_id.json` against `a2a_core::execution_id`.

use a2a_core::did::Did;
use a2a_core::error::ErrorCode;
use a2a_core::execution_id::{ExecutionId, ExecutionIdError};
use serde_json::{Value, json};

use crate::common::{TestCase, Verdict, load};

fn check(
    t: &TestCase,
    outcome: Result<ExecutionId, ExecutionIdError>,
    to_value: impl Fn(&ExecutionId) -> Value,
) -> Option<String> {
    match (t.result, outcome) {
        (Verdict::Valid | Verdict::Acceptable, Ok(id)) => {
            let got = to_value(&id);
            match &t.expected {
                Some(want) if *want != got => Some(format!("expected {want}, got {got}")),
                _ => None,
            }
        }
        (Verdict::Valid, Err(e)) => Some(format!("refused ({}): {e}", e.reason())),
        (Verdict::Invalid, Ok(id)) => Some(format!("accepted as {id}")),
        (Verdict::Invalid, Err(e)) => {
            if e.code() != ErrorCode::UNKNOWN_EXECUTION {
                return Some(format!("refused with code {}, expected unknown_execution", e.code()));
            }
            match &t.error {
                Some(want) if want != e.reason() => Some(format!("refused with {} ({e}), expected {want}", e.reason())),
                _ => None,
            }
        }
        (Verdict::Acceptable, Err(_)) => None,
    }
}

fn input_str(t: &TestCase) -> &str {
    t.input.as_str().unwrap_or_else(|| panic!("tcId {}: input is not a string", t.tc_id))
}

fn from_parts(t: &TestCase) -> Result<ExecutionId, ExecutionIdError> {
    let sender = Did::parse(t.input["sender"].as_str().unwrap_or_default()).expect("vector senders are valid");
    let ts: u64 = t.input["timestamp_ns"].as_str().and_then(|s| s.parse().ok()).expect("decimal timestamp");
    let hex = t.input["random_hex"].as_str().unwrap_or_default();
    let mut random = [0u8; 16];
    for (i, byte) in random.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2).expect("32 hex digits"), 16).expect("hex");
    }
    Ok(ExecutionId::from_parts(&sender, ts, random))
}

#[test]
fn execution_id_vectors_all_pass() {
    let file = load("execution_id");
    let mut failures = Vec::new();
    let mut checked = 0;
    for (group, t) in file.tests() {
        let op = group.params.get("operation").and_then(Value::as_str).unwrap_or_default();
        let failure = match op {
            "parse" => {
                let outcome = ExecutionId::parse(input_str(t));
                if let Ok(id) = &outcome {
                    // The parts put back together give the id; the path segment reads back as the id.
                    let rebuilt = format!("{}_{}_{}", id.sender(), id.timestamp_ns(), id.suffix());
                    let from_segment = ExecutionId::from_path_segment(&id.to_path_segment());
                    let serde =
                        serde_json::to_value(id).ok().and_then(|v| serde_json::from_value::<ExecutionId>(v).ok());
                    if rebuilt != id.as_str() || from_segment.as_ref() != Ok(id) || serde.as_ref() != Some(id) {
                        failures.push(format!("tcId {}: does not round-trip", t.tc_id));
                    }
                }
                check(t, outcome, |id| {
                    json!({
                        "sender": id.sender().as_str(),
                        "timestamp_ns": id.timestamp_ns().to_string(),
                        "suffix": id.suffix(),
                        "path_segment": id.to_path_segment(),
                    })
                })
            }
            "from_parts" => check(t, from_parts(t), |id| json!(id.as_str())),
            "from_path_segment" => check(t, ExecutionId::from_path_segment(input_str(t)), |id| json!(id.as_str())),
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
fn seed_example_id_is_refused_for_its_short_suffix() {
    let e = ExecutionId::parse("did:web:a.example.com_1712345678901_abc123").expect_err("refused");
    assert_eq!(e.reason(), "invalid_suffix");
    assert!(e.message().contains("26 characters"), "{}", e.message());
}

#[test]
fn generated_ids_parse_and_carry_the_sender() {
    let sender = Did::parse("did:web:example.com:team_a:bot_1").expect("valid DID");
    let a = ExecutionId::generate(&sender).expect("generated");
    let b = ExecutionId::generate(&sender).expect("generated");
    assert_ne!(a, b);
    assert!(b.timestamp_ns() > a.timestamp_ns());
    for id in [a, b] {
        let back = ExecutionId::parse(id.as_str()).expect("parses");
        assert_eq!(back.sender(), &sender);
        // Generators write canonical base32: the 2 padding bits of the last character are zero.
        assert!(back.suffix().ends_with(['a', 'e', 'i', 'm', 'q', 'u', 'y', '4']), "{}", back.suffix());
    }
}
