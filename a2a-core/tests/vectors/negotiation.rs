//! Vectors: `spec/vectors/negotiation.json` (tightening) and `spec/vectors/payload_validation.json` (the agreed-schema
//! validator), plus property tests: the agreed schema is exactly the intersection of the two schemas it reconciles,
//! and no input makes the schema functions panic.

use a2a_core::error::ErrorCode;
use a2a_core::negotiation::{AgreedSchema, MAX_PAYLOAD_ERRORS, payload_invalid_error, tighten};
use a2a_core::schema_rules::{check, fix_nullable};
use a2a_core::wire::SchemaChangeKind;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

use crate::common::{Verdict, load};

fn kind_name(k: SchemaChangeKind) -> String {
    serde_json::to_value(k).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

fn compile(schema: &Value, what: &str) -> AgreedSchema {
    AgreedSchema::compile(schema).unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .unwrap_or_else(|| panic!("expected an array, got {v:?}"))
        .iter()
        .map(|x| x.as_str().unwrap_or_else(|| panic!("expected a string, got {x}")).to_owned())
        .collect()
}

#[test]
fn negotiation_vectors_agree_on_schema_and_changes_or_report_conflicts() {
    let file = load("negotiation");
    assert_eq!(file.algorithm, "A2A-TIGHTEN");
    for (_, t) in file.tests() {
        let id = t.tc_id;
        let p = t.input.get("proposed").unwrap_or_else(|| panic!("tcId {id}: no proposed"));
        let c = t.input.get("capability").unwrap_or_else(|| panic!("tcId {id}: no capability"));
        assert_eq!(check(p), [], "tcId {id}: the proposal must follow the rules");
        assert_eq!(check(c), [], "tcId {id}: the capability must follow the rules");
        let got = tighten(p, c);
        match t.result {
            Verdict::Valid => {
                let want = t.expected.as_ref().unwrap_or_else(|| panic!("tcId {id}: valid without expected"));
                let a = got.unwrap_or_else(|e| panic!("tcId {id} ({}): unexpected conflicts {e:#?}", t.comment));
                assert_eq!(Some(&a.agreed_schema), want.get("agreed_schema"), "tcId {id} ({})", t.comment);
                let kinds: Vec<(String, String)> =
                    a.changes.iter().map(|c| (c.path.clone(), kind_name(c.kind))).collect();
                let want_kinds: Vec<(String, String)> = want
                    .get("changes")
                    .and_then(Value::as_array)
                    .unwrap_or_else(|| panic!("tcId {id}: no changes"))
                    .iter()
                    .map(|x| {
                        (x["path"].as_str().unwrap_or("?").to_owned(), x["kind"].as_str().unwrap_or("?").to_owned())
                    })
                    .collect();
                assert_eq!(kinds, want_kinds, "tcId {id} ({}): {:#?}", t.comment, a.changes);
                assert!(a.changes.iter().all(|c| !c.message.is_empty()), "tcId {id}: empty change message");
                assert_eq!(a.tightened(), !a.changes.is_empty());
                // The agreed schema follows the rules, compiles, and is a fixed point of tightening.
                assert_eq!(check(&a.agreed_schema), [], "tcId {id}: the agreed schema breaks the rules");
                compile(&a.agreed_schema, "agreed schema");
                let again = tighten(&a.agreed_schema, c).unwrap_or_else(|e| panic!("tcId {id}: fixed point: {e:?}"));
                assert_eq!(again.agreed_schema, a.agreed_schema, "tcId {id}: not a fixed point");
                assert!(again.changes.is_empty(), "tcId {id}: fixed point changed {:?}", again.changes);
                // Deterministic.
                assert_eq!(tighten(p, c), Ok(a), "tcId {id}: not deterministic");
            }
            Verdict::Invalid => {
                assert_eq!(t.error.as_deref(), Some("schema_incompatible"), "tcId {id}");
                let conflicts = got.err().unwrap_or_else(|| panic!("tcId {id} ({}): expected conflicts", t.comment));
                let paths: Vec<String> = conflicts.iter().map(|c| c.path.clone()).collect();
                assert_eq!(paths, strings(t.input.get("conflicts")), "tcId {id} ({}): {conflicts:#?}", t.comment);
                assert!(conflicts.iter().all(|c| c.code() == ErrorCode::SCHEMA_INCOMPATIBLE && !c.message.is_empty()));
                let err = a2a_core::negotiation::incompatible_error(&conflicts);
                assert_eq!(err.http_status(), 409);
                let listed = err.details.as_ref().and_then(|d| d["conflicts"].as_array()).map_or(0, Vec::len);
                assert_eq!(listed, conflicts.len(), "tcId {id}: details.conflicts");
            }
            Verdict::Acceptable => panic!("tcId {id}: tightening has no acceptable results"),
        }
    }
}

#[test]
fn payload_vectors_accept_or_report_error_paths() {
    let file = load("payload_validation");
    assert_eq!(file.algorithm, "A2A-PAYLOAD-VALIDATION");
    for g in &file.test_groups {
        let schema = g.params.get("schema").unwrap_or_else(|| panic!("group without schema"));
        assert_eq!(check(schema), [], "a group's schema must follow the rules");
        let v = compile(schema, "group schema");
        for t in &g.tests {
            let id = t.tc_id;
            let payload = t.input.get("payload").unwrap_or_else(|| panic!("tcId {id}: no payload"));
            let got = v.validate(payload);
            assert_eq!(v.is_valid(payload), got.is_ok(), "tcId {id}: is_valid disagrees with validate");
            match t.result {
                Verdict::Valid => assert_eq!(got, Ok(()), "tcId {id} ({})", t.comment),
                Verdict::Invalid => {
                    assert_eq!(t.error.as_deref(), Some("payload_invalid"), "tcId {id}");
                    let errors = got.err().unwrap_or_else(|| panic!("tcId {id} ({}): expected errors", t.comment));
                    let paths: Vec<String> = errors.iter().map(|e| e.path.clone()).collect();
                    assert_eq!(paths, strings(t.input.get("errors")), "tcId {id} ({}): {errors:#?}", t.comment);
                    assert!(errors.len() <= MAX_PAYLOAD_ERRORS);
                    assert!(errors.iter().all(|e| e.code() == ErrorCode::PAYLOAD_INVALID && !e.message.is_empty()));
                    let err = payload_invalid_error(&errors);
                    assert_eq!(err.http_status(), 422);
                    let listed = err.details.as_ref().and_then(|d| d["errors"].as_array()).map_or(0, Vec::len);
                    assert_eq!(listed, errors.len(), "tcId {id}: details.errors");
                }
                Verdict::Acceptable => panic!("tcId {id}: validation has no acceptable results"),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------------
// Property tests

/// The base type a property name has in both schemas of a case (types must agree, or nothing is compatible).
#[derive(Debug, Clone, Copy)]
enum Base {
    Str,
    Num,
    Bool,
}

/// An enum without null unless the type is nullable (the rules refuse values the type excludes); none when empty.
fn typed_enum(mut v: Vec<Value>, nullable: bool) -> Option<Vec<Value>> {
    if !nullable {
        v.retain(|x| !x.is_null());
    }
    (!v.is_empty()).then_some(v)
}

/// A property schema of the given base type, maybe nullable, with a few constraints.
fn property_schema(base: Base) -> BoxedStrategy<Value> {
    match base {
        Base::Str => (
            any::<bool>(),
            proptest::option::weighted(0.3, 0u64..3),
            proptest::option::weighted(0.3, 1u64..5),
            proptest::option::weighted(
                0.3,
                proptest::sample::subsequence(vec![json!("x"), json!("xy"), json!("abc"), Value::Null], 1..4),
            ),
            proptest::option::weighted(0.2, Just("^x")),
            proptest::option::weighted(0.1, Just("date")),
        )
            .prop_map(|(nullable, min, max, en, pattern, format)| {
                let mut s = Map::new();
                s.insert("type".into(), if nullable { json!(["string", "null"]) } else { json!("string") });
                if let Some(v) = min {
                    s.insert("minLength".into(), json!(v));
                }
                if let Some(v) = max {
                    s.insert("maxLength".into(), json!(v));
                }
                if let Some(v) = en.and_then(|v| typed_enum(v, nullable)) {
                    s.insert("enum".into(), Value::Array(v));
                }
                if let Some(p) = pattern {
                    s.insert("pattern".into(), json!(p));
                }
                if let Some(f) = format {
                    s.insert("format".into(), json!(f));
                }
                Value::Object(s)
            })
            .boxed(),
        Base::Num => (
            any::<bool>(),
            proptest::option::weighted(0.4, (-2i64..3, any::<bool>())),
            proptest::option::weighted(0.4, (0i64..5, any::<bool>())),
            proptest::option::weighted(0.3, proptest::sample::select(vec![json!(1), json!(0.5), json!(2)])),
            proptest::option::weighted(
                0.2,
                proptest::sample::subsequence(vec![json!(0), json!(1), json!(2.5), json!(3), Value::Null], 1..4),
            ),
        )
            .prop_map(|(nullable, lo, hi, mult, en)| {
                let mut s = Map::new();
                s.insert("type".into(), if nullable { json!(["null", "number"]) } else { json!("number") });
                if let Some((v, excl)) = lo {
                    s.insert(if excl { "exclusiveMinimum" } else { "minimum" }.into(), json!(v));
                }
                if let Some((v, excl)) = hi {
                    s.insert(if excl { "exclusiveMaximum" } else { "maximum" }.into(), json!(v));
                }
                if let Some(m) = mult {
                    s.insert("multipleOf".into(), m);
                }
                if let Some(v) = en.and_then(|v| typed_enum(v, nullable)) {
                    s.insert("enum".into(), Value::Array(v));
                }
                Value::Object(s)
            })
            .boxed(),
        Base::Bool => (any::<bool>(), proptest::option::weighted(0.3, any::<bool>()))
            .prop_map(|(nullable, konst)| {
                let mut s = Map::new();
                s.insert("type".into(), if nullable { json!(["boolean", "null"]) } else { json!("boolean") });
                if let Some(b) = konst {
                    s.insert("const".into(), json!(b));
                }
                Value::Object(s)
            })
            .boxed(),
    }
}

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

/// A flat object schema over the names a..d with the given base types.
fn object_schema(types: [Base; 4]) -> BoxedStrategy<Value> {
    let props: Vec<BoxedStrategy<Option<Value>>> =
        types.iter().map(|b| proptest::option::weighted(0.7, property_schema(*b)).boxed()).collect();
    (props, proptest::collection::vec(proptest::bool::weighted(0.4), NAMES.len()), (0u8..10))
        .prop_map(|(props, req, extra)| {
            let mut properties = Map::new();
            let mut required = Vec::new();
            for ((name, p), r) in NAMES.iter().zip(props).zip(req) {
                if let Some(p) = p {
                    properties.insert((*name).to_owned(), p);
                    if r {
                        required.push(json!(name));
                    }
                }
            }
            let mut s = Map::new();
            s.insert("type".into(), json!("object"));
            s.insert("properties".into(), Value::Object(properties));
            if !required.is_empty() {
                s.insert("required".into(), Value::Array(required));
            }
            let ap = match extra {
                0 | 1 => Some(json!(false)),
                2 => Some(json!({"type": "number", "minimum": 0})),
                3 => Some(json!({"type": "string", "maxLength": 2})),
                _ => None,
            };
            if let Some(ap) = ap {
                s.insert("additionalProperties".into(), ap);
            }
            Value::Object(s)
        })
        .prop_filter("follows the schema rules", |s| check(s).is_empty())
        .boxed()
}

/// A payload over the names a..d (values mostly of the name's type) and sometimes the extra name e.
fn payload(types: [Base; 4]) -> BoxedStrategy<Value> {
    let strings =
        || proptest::sample::select(vec![json!(""), json!("x"), json!("xy"), json!("abc"), json!("2026-01-01")]);
    let numbers = || {
        proptest::sample::select(vec![
            json!(-1),
            json!(0),
            json!(0.5),
            json!(1),
            json!(2),
            json!(2.5),
            json!(3),
            json!(5),
        ])
    };
    let odd = || proptest::sample::select(vec![Value::Null, json!(true), json!("x"), json!(1)]);
    let vals: Vec<BoxedStrategy<Option<Value>>> = types
        .iter()
        .map(|b| {
            let typed = match b {
                Base::Str => strings().boxed(),
                Base::Num => numbers().boxed(),
                Base::Bool => any::<bool>().prop_map(Value::Bool).boxed(),
            };
            proptest::option::weighted(0.7, prop_oneof![8 => typed, 1 => odd()]).boxed()
        })
        .collect();
    let extra = proptest::option::weighted(0.2, prop_oneof![numbers(), strings()]);
    (vals, extra)
        .prop_map(|(vals, extra)| {
            let mut m = Map::new();
            for (name, v) in NAMES.iter().zip(vals) {
                if let Some(v) = v {
                    m.insert((*name).to_owned(), v);
                }
            }
            if let Some(v) = extra {
                m.insert("e".into(), v);
            }
            Value::Object(m)
        })
        .boxed()
}

/// A case of the intersection property: a proposal, a capability and payloads, over shared base types.
fn intersection_case() -> impl Strategy<Value = (Value, Value, Vec<Value>)> {
    let base = prop_oneof![Just(Base::Str), Just(Base::Num), Just(Base::Bool)];
    [base.clone(), base.clone(), base.clone(), base].prop_flat_map(|types| {
        (object_schema(types), object_schema(types), proptest::collection::vec(payload(types), 32))
    })
}

/// A JSON value of bounded depth, for the no-panic property.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
        proptest::sample::select(vec![
            "type",
            "object",
            "string",
            "number",
            "null",
            "integer",
            "properties",
            "required",
            "items",
            "enum",
            "nullable",
            "format",
            "email",
            "pattern",
            "(",
            "^a$",
            "$ref",
            "x-y",
            "minimum",
            "additionalProperties",
        ])
        .prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec(
                (
                    proptest::sample::select(vec![
                        "type",
                        "properties",
                        "required",
                        "items",
                        "additionalProperties",
                        "enum",
                        "const",
                        "nullable",
                        "minimum",
                        "maximum",
                        "exclusiveMinimum",
                        "multipleOf",
                        "minLength",
                        "maxLength",
                        "pattern",
                        "format",
                        "allOf",
                        "$ref",
                        "a",
                        "b",
                    ]),
                    inner
                ),
                0..6
            )
            .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// For flat object schemas, a payload is valid under the agreed schema exactly when it is valid under both the
    /// proposal and the capability (jsonschema decides), and the agreed schema follows the rules.
    #[test]
    fn agreed_schema_accepts_exactly_what_both_schemas_accept((p, c, payloads) in intersection_case()) {
        if let Ok(a) = tighten(&p, &c) {
            prop_assert_eq!(check(&a.agreed_schema), vec![]);
            let (g, vp, vc) = (compile(&a.agreed_schema, "agreed"), compile(&p, "proposal"), compile(&c, "capability"));
            for x in &payloads {
                let both = vp.is_valid(x) && vc.is_valid(x);
                prop_assert_eq!(g.is_valid(x), both, "payload {} agreed {}", x, a.agreed_schema);
            }
            // Agreeing with itself changes nothing.
            let same = tighten(&p, &p).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
            prop_assert_eq!(&same.agreed_schema, &p);
            prop_assert!(same.changes.is_empty());
        }
    }

    /// No JSON value makes `check`, `fix_nullable`, `tighten` or the validator panic.
    #[test]
    fn schema_functions_never_panic_on_any_json(a in any_json(), b in any_json()) {
        let _ = check(&a);
        let fixed = fix_nullable(&a);
        prop_assert_eq!(fix_nullable(&fixed.schema).schema, fixed.schema);
        let _ = tighten(&a, &b);
        if let Ok(v) = AgreedSchema::compile(&a) {
            let _ = v.validate(&b);
        }
    }
}
