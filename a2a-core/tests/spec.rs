//! The specification and the code cannot drift apart:
//!
//! - every JSON Schema in `spec/schemas/` is generated from the Rust type it describes and compared with the committed
//!   file (refresh them with `UPDATE_SCHEMAS=1 cargo test -p a2a-core --test spec`);
//! - the error table of `spec/PROTOCOL.md` §12 is the table of `a2a_core::error` (refreshed the same way);
//! - requirement ids in `spec/PROTOCOL.md` are unique.

use std::collections::HashSet;
use std::path::PathBuf;

use a2a_core::error::{ErrorKind, TABLE};
use schemars::JsonSchema;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn updating() -> bool {
    std::env::var_os("UPDATE_SCHEMAS").is_some()
}

/// Every message type with a schema, and the file it lives in.
fn schemas() -> Vec<(&'static str, serde_json::Value)> {
    fn schema_of<T: JsonSchema>() -> serde_json::Value {
        let settings = schemars::generate::SchemaSettings::draft2020_12();
        let schema = settings.into_generator().into_root_schema_for::<T>();
        serde_json::to_value(schema).expect("a schema serialises")
    }
    use a2a_core::{capability, error, wire};
    #[allow(unused_mut)] // without the `sessions` feature nothing is added
    let mut v = vec![
        ("capability_declaration", schema_of::<capability::CapabilityDeclaration>()),
        ("capabilities_document", schema_of::<wire::CapabilitiesDocument>()),
        ("negotiate_request", schema_of::<wire::NegotiateRequest>()),
        ("negotiate_response", schema_of::<wire::NegotiateResponse>()),
        ("execute_response", schema_of::<wire::ExecuteResponse>()),
        ("execution_ref", schema_of::<wire::ExecutionRef>()),
        ("confirm_response", schema_of::<wire::ConfirmResponse>()),
        ("result_response", schema_of::<wire::ResultResponse>()),
        ("fallback_request", schema_of::<wire::FallbackRequest>()),
        ("fallback_response", schema_of::<wire::FallbackResponse>()),
        ("error_body", schema_of::<error::ErrorBody>()),
        ("signature_claims", schema_of::<a2a_core::integrity::SignatureClaims>()),
    ];
    // The §17 messages (feature `sessions`).
    #[cfg(feature = "sessions")]
    v.extend([
        ("session", schema_of::<a2a_core::sessions::Session>()),
        ("session_registration", schema_of::<a2a_core::sessions::SessionRegistration>()),
        ("session_list", schema_of::<a2a_core::sessions::SessionList>()),
        ("send_request", schema_of::<a2a_core::sessions::SendRequest>()),
        ("send_response", schema_of::<a2a_core::sessions::SendResponse>()),
        ("run", schema_of::<a2a_core::sessions::Run>()),
        ("history", schema_of::<a2a_core::sessions::History>()),
        ("spawn_request", schema_of::<a2a_core::sessions::SpawnRequest>()),
        ("spawn_response", schema_of::<a2a_core::sessions::SpawnResponse>()),
        ("delivery", schema_of::<a2a_core::sessions::Delivery>()),
        ("inbox", schema_of::<a2a_core::sessions::Inbox>()),
        ("run_reply", schema_of::<a2a_core::sessions::RunReply>()),
        ("webhook_event", schema_of::<a2a_core::sessions::WebhookEvent>()),
    ]);
    v
}

#[test]
fn committed_schemas_match_the_rust_types() {
    let dir = root().join("spec/schemas");
    let mut stale = Vec::new();
    for (name, schema) in schemas() {
        let path = dir.join(format!("{name}.schema.json"));
        let text = serde_json::to_string_pretty(&schema).expect("serialises") + "\n";
        if updating() {
            std::fs::write(&path, &text).expect("write schema");
            continue;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        if committed != text {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "schemas differ from the Rust types (run UPDATE_SCHEMAS=1 cargo test -p a2a-core --test spec): {stale:?}"
    );
}

#[test]
fn schemas_accept_real_messages_and_reject_broken_ones() {
    let schemas: std::collections::HashMap<_, _> = schemas().into_iter().collect();
    let check = |name: &str, instance: serde_json::Value, ok: bool| {
        let validator = jsonschema::validator_for(&schemas[name]).expect("schema compiles");
        assert_eq!(validator.is_valid(&instance), ok, "{name}: {instance}");
    };
    check(
        "negotiate_request",
        serde_json::json!({"target_capability": "submit_report", "proposed_schema": {"type": "object"}, "timeout_ms": 30000}),
        true,
    );
    check("negotiate_request", serde_json::json!({"proposed_schema": {"type": "object"}}), false);
    check(
        "negotiate_request",
        serde_json::json!({"target_capability": "a_b", "proposed_schema": {}, "extra": 1}),
        false,
    );
    check("execution_ref", serde_json::json!({"execution_id": "x"}), true);
    check("execution_ref", serde_json::json!({"execution_id": 5}), false);
    check("error_body", serde_json::json!({"error": {"code": "unknown_execution", "message": "m"}}), true);
    check("error_body", serde_json::json!({"error": {"message": "m"}}), false);
    check(
        "capability_declaration",
        serde_json::json!({"name": "process_payment", "description": "d", "auth_requirement": "oauth2", "region_restriction": "eu-west-1"}),
        true,
    );
    check("capability_declaration", serde_json::json!({"name": "process_payment", "description": "d"}), false);
    check(
        "result_response",
        serde_json::json!({"execution_id": "e", "negotiation_id": "n", "capability": "a_b", "status": "exploded",
            "created_at": "t", "updated_at": "t"}),
        false,
    );
}

fn error_table_markdown() -> String {
    let mut s = String::from("| Code | HTTP status | Meaning |\n|---|---|---|\n");
    for e in TABLE {
        let status = match e.kind {
            ErrorKind::Http(code) => code.to_string(),
            ErrorKind::Execution => "— (in a RESULT `error`)".to_owned(),
        };
        s.push_str(&format!("| `{}` | {} | {} |\n", e.code, status, e.message.replace('|', "\\|")));
    }
    s
}

const TABLE_BEGIN: &str = "<!-- BEGIN error table (generated from a2a-core/src/error.rs) -->\n";
const TABLE_END: &str = "<!-- END error table -->";

#[test]
fn spec_error_table_is_the_code_error_table() {
    let path = root().join("spec/PROTOCOL.md");
    let spec = std::fs::read_to_string(&path).expect("read PROTOCOL.md");
    let want = format!("{TABLE_BEGIN}{}{TABLE_END}", error_table_markdown());
    let (Some(b), Some(e)) = (spec.find(TABLE_BEGIN), spec.find(TABLE_END)) else {
        panic!("PROTOCOL.md has no generated error table markers");
    };
    let have = &spec[b..e + TABLE_END.len()];
    if have != want {
        if updating() {
            std::fs::write(&path, spec.replace(have, &want)).expect("write PROTOCOL.md");
        } else {
            panic!(
                "the error table in PROTOCOL.md §12 differs from a2a-core/src/error.rs (run UPDATE_SCHEMAS=1 cargo test -p a2a-core --test spec)"
            );
        }
    }
}

/// Every requirement of the spec: `**[ID] LEVEL**` in prose or a table row `| ID | LEVEL | ... |`.
fn requirements(spec: &str) -> Vec<(String, String)> {
    const LEVELS: [&str; 5] = ["MUST NOT", "MUST", "SHOULD NOT", "SHOULD", "MAY"];
    let is_id = |s: &str| {
        s.split_once('-').is_some_and(|(p, n)| {
            !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_uppercase())
                && !n.is_empty()
                && n.bytes().all(|b| b.is_ascii_digit())
        })
    };
    let mut out = Vec::new();
    for (i, _) in spec.match_indices("**[") {
        let rest = &spec[i + 3..];
        let Some(end) = rest.find(']') else { continue };
        let id = &rest[..end];
        if !is_id(id) {
            continue;
        }
        let after = rest[end + 1..].trim_start();
        let level = LEVELS.iter().find(|l| after.starts_with(&format!("{l}**"))).map_or("", |l| *l);
        out.push((id.to_owned(), level.to_owned()));
    }
    for line in spec.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() > 3 && cells[0].is_empty() && is_id(cells[1]) {
            let level = LEVELS.iter().find(|l| cells[2] == **l).map_or("", |l| *l);
            out.push((cells[1].to_owned(), level.to_owned()));
        }
    }
    out
}

#[test]
fn requirement_ids_are_unique_and_leveled() {
    let spec = std::fs::read_to_string(root().join("spec/PROTOCOL.md")).expect("read PROTOCOL.md");
    let reqs = requirements(&spec);
    let mut seen = HashSet::new();
    for (id, level) in &reqs {
        assert!(!level.is_empty(), "requirement {id} has no MUST/SHOULD/MAY level");
        assert!(seen.insert(id.clone()), "requirement id {id} appears twice");
    }
    for prefix in [
        "TR", "HDR", "CAP", "DISC", "NEG", "SCH", "EXE", "ST", "CONF", "RES", "CAN", "EID", "DID", "JCS", "KEY", "JWS",
        "INT", "AUTH", "FB", "ERR", "LIM", "CLI", "GW",
    ] {
        assert!(
            reqs.iter().any(|(id, _)| id.starts_with(&format!("{prefix}-"))),
            "no requirement with prefix {prefix}"
        );
    }
    assert!(reqs.len() > 200, "only {} requirements found", reqs.len());
}

/// The section numbers `spec/PROTOCOL.md` has (`## 9.`, `### 9.2`, `#### 9.2.1`).
fn section_numbers(spec: &str) -> HashSet<String> {
    spec.lines()
        .filter_map(|l| {
            let rest = l.trim_start_matches('#');
            (rest.len() < l.len() && rest.starts_with(' ')).then_some(rest.trim_start())?;
            let number: String = rest.trim_start().chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
            let number = number.trim_end_matches('.');
            (!number.is_empty()).then(|| number.to_owned())
        })
        .collect()
}

/// Every `§N.N` the specification writes about itself names a section it has. References into other documents
/// (`RFC 9110 §4.3.4`, `ECMA-262 ...`, the seed document's `seed §2.3`) are not the specification's own.
#[test]
fn every_section_reference_of_the_spec_resolves() {
    let spec = std::fs::read_to_string(root().join("spec/PROTOCOL.md")).expect("spec/PROTOCOL.md");
    let sections = section_numbers(&spec);
    assert!(sections.contains("9.2.1") && sections.contains("20"), "headings not recognised");
    let mut broken = Vec::new();
    for (i, line) in spec.lines().enumerate() {
        for (at, _) in line.match_indices('§') {
            let number: String = line[at + '§'.len_utf8()..]
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let number = number.trim_end_matches('.');
            let before = &line[..at];
            let words: Vec<&str> = before.split_whitespace().rev().take(2).map(|w| w.trim_start_matches('(')).collect();
            let foreign = match words.as_slice() {
                [n, "RFC", ..] if n.chars().all(|c| c.is_ascii_digit()) => true,
                [w, ..] => *w == "seed" || w.starts_with("RFC") || w.starts_with("ECMA"),
                [] => false,
            } || before.trim_end().ends_with("radix 10),");
            if number.is_empty() || foreign {
                continue;
            }
            if !sections.contains(number) {
                broken.push(format!("line {}: §{number}", i + 1));
            }
        }
    }
    assert!(broken.is_empty(), "references to sections spec/PROTOCOL.md does not have: {broken:?}");
}
