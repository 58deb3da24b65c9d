//! The schema rules of NEGOTIATE (§6.2): each proposal breaks rules in known ways, and the agent's
//! `details.violations` must be exactly those of `a2a-core`'s reference checker (rule ids and paths, in order).

use a2a_core::schema_rules;
use serde_json::{Value, json};

use super::applies::MAIN;

const LOOPBACK: &str =
    "the agent runs on this machine and the run has --serve-did (the suite's listener is the canary)";
use super::{main_plan, negotiate_body, show};
use crate::check;
use crate::check::{Check, Outcome, Stop, Trial};

pub(super) fn checks() -> Vec<Check> {
    vec![
        check!(
            "schema-rules/worked-example",
            ["SCH-1", "SCH-2", "SCH-3", "SCH-5"],
            Must,
            MAIN,
            "the seed's pitfalls at once (integer, format on a number, nullable, type null, an undefined required name) are answered 422 schema_rule_violation listing every violation as {rule, path, message}, sorted by path",
            worked_example
        ),
        check!(
            "schema-rules/root",
            ["SCH-6"],
            Must,
            MAIN,
            "a root that is not {\"type\": \"object\"} is root_not_object",
            root
        ),
        check!(
            "schema-rules/non-object-proposal",
            ["SCH-22"],
            Must,
            MAIN,
            "a proposed_schema that is an array, a string, a number, a boolean or null is 422 schema_rule_violation with the one violation root_not_object at \"\" (not 400 invalid_request)",
            non_object_proposal
        ),
        check!(
            "schema-rules/types",
            ["SCH-7"],
            Must,
            MAIN,
            "only the five types and their unions with null are accepted (integer, null alone, two-type unions refused; a non-string type is invalid_keyword_value)",
            types
        ),
        check!(
            "schema-rules/integer-message",
            ["SCH-8"],
            Should,
            MAIN,
            "the message for \"integer\" tells the author to write \"number\" with \"multipleOf\": 1",
            integer_message
        ),
        check!(
            "schema-rules/type-missing",
            ["SCH-9"],
            Must,
            MAIN,
            "a subschema without type is type_missing",
            type_missing
        ),
        check!(
            "schema-rules/required",
            ["SCH-10"],
            Must,
            MAIN,
            "each required name not defined in properties is one required_not_defined at its index",
            required
        ),
        check!(
            "schema-rules/format",
            ["SCH-11"],
            Must,
            MAIN,
            "format on a schema whose type is not string is format_requires_string",
            format
        ),
        check!(
            "schema-rules/nullable",
            ["SCH-12"],
            Must,
            MAIN,
            "nullable (any value) is nullable_not_supported, and the message gives the union to write instead",
            nullable
        ),
        check!(
            "schema-rules/references",
            ["SCH-13"],
            Must,
            MAIN,
            "$ref, $id, $defs, definitions, $anchor, $dynamicRef are ref_not_allowed",
            references
        ),
        check!(
            "schema-rules/keywords",
            ["SCH-15"],
            Must,
            MAIN,
            "keywords outside the allowed set (composition included) are unknown_keyword; x- extensions are accepted; wrong keyword values are invalid_keyword_value",
            keywords
        ),
        check!(
            "schema-rules/bounds",
            ["SCH-16"],
            Must,
            MAIN,
            "bounds that leave no value (minLength > maxLength, minItems > maxItems, an empty numeric range) are invalid_keyword_value at the upper keyword",
            bounds
        ),
        check!(
            "schema-rules/limits",
            ["SCH-4", "SCH-17", "LIM-1"],
            Must,
            MAIN,
            "checking is bounded: depth 33 is too_deep, the 1 025th subschema too_large, at most 256 violations are reported",
            limits
        ),
        check!(
            "schema-rules/no-fetch",
            ["SCH-14", "NEG-41"],
            Must,
            LOOPBACK,
            "an agent never fetches what a schema or a payload names (a $ref and a uri to the suite's canary are never requested)",
            no_fetch
        ),
    ]
}

/// NEGOTIATE `proposal` and compare `details.violations` with the reference.
async fn expect_violations(t: &mut Trial<'_>, what: &str, proposal: Value) -> Result<Value, Stop> {
    let plan = main_plan(t)?;
    let want = schema_rules::check(&proposal);
    let req = t.ctx.for_cap(&plan, "POST", "/negotiate").json(&negotiate_body(&plan.decl.name, &proposal));
    let r = t.send(format!("NEGOTIATE {what}"), req).await?;
    if want.is_empty() {
        t.check(
            r.status == 200 || r.status == 409,
            "accepted by the schema rules (200, or 409 if it conflicts)",
            r.summary(),
        );
        return Ok(Value::Null);
    }
    t.expect_error(&r, 422, "schema_rule_violation");
    let got = r.error_details()["violations"].clone();
    let pairs = |v: &Value| -> Vec<(String, String)> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .map(|x| (x["rule"].as_str().unwrap_or("").to_owned(), x["path"].as_str().unwrap_or("").to_owned()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let want_pairs: Vec<(String, String)> = want.iter().map(|v| (v.rule.clone(), v.path.clone())).collect();
    let got_pairs = pairs(&got);
    t.check(
        got_pairs == want_pairs,
        format!("violations (rule, path), in this order: {want_pairs:?}"),
        format!("{got_pairs:?}"),
    );
    let shaped = got.as_array().is_some_and(|a| {
        a.iter().all(|v| {
            v.as_object().is_some_and(|o| {
                o.len() == 3
                    && ["rule", "path", "message"].iter().all(|k| o.get(*k).is_some_and(Value::is_string))
                    && o["message"].as_str().is_some_and(|m| !m.trim().is_empty())
            })
        })
    });
    t.check(shaped, "each violation exactly {rule, path, message}, message not blank", show(&got));
    Ok(got)
}

async fn worked_example(t: &mut Trial<'_>) -> Outcome {
    let p = json!({"type": "object",
        "properties": {"email": {"type": "number", "format": "email"}, "name": {"type": "string", "nullable": true},
                       "count": {"type": "integer"}, "nothing": {"type": "null"}},
        "required": ["email", "timestamp"]});
    expect_violations(t, "the seed's worked example (five violations)", p).await?;
    Ok(())
}

async fn root(t: &mut Trial<'_>) -> Outcome {
    expect_violations(t, "a root of type array", json!({"type": "array"})).await?;
    expect_violations(t, "a root without type", json!({"properties": {"a": {"type": "string"}}})).await?;
    expect_violations(t, "a nullable root", json!({"type": ["object", "null"]})).await?;
    expect_violations(t, "a root that is not an object", json!(["type", "object"])).await?;
    Ok(())
}

async fn non_object_proposal(t: &mut Trial<'_>) -> Outcome {
    for (what, proposal) in [
        ("an empty array", json!([])),
        ("a string", json!("object")),
        ("a number", json!(5)),
        ("a boolean", json!(false)),
        ("null", Value::Null),
    ] {
        expect_violations(t, &format!("a proposed_schema that is {what}"), proposal).await?;
    }
    Ok(())
}

fn prop(sub: Value) -> Value {
    json!({"type": "object", "properties": {"p": sub}})
}

async fn types(t: &mut Trial<'_>) -> Outcome {
    for (what, sub) in [
        ("\"integer\"", json!({"type": "integer"})),
        ("\"null\" alone", json!({"type": "null"})),
        ("a union of two non-null types", json!({"type": ["string", "number"]})),
        ("a union of three", json!({"type": ["string", "number", "null"]})),
        ("an unknown type name", json!({"type": "text"})),
        ("a non-string type", json!({"type": 5})),
    ] {
        expect_violations(t, &format!("a property of type {what}"), prop(sub)).await?;
    }
    expect_violations(t, "[\"null\",\"string\"] (accepted)", prop(json!({"type": ["null", "string"]}))).await?;
    Ok(())
}

async fn integer_message(t: &mut Trial<'_>) -> Outcome {
    let got = expect_violations(t, "a property of type \"integer\"", prop(json!({"type": "integer"}))).await?;
    let msg = got[0]["message"].as_str().unwrap_or("").to_owned();
    t.check(
        msg.contains("number") && msg.contains("multipleOf"),
        "a message saying to write \"number\" with \"multipleOf\": 1",
        msg,
    );
    Ok(())
}

async fn type_missing(t: &mut Trial<'_>) -> Outcome {
    expect_violations(t, "a property without type", prop(json!({"minLength": 1}))).await?;
    expect_violations(t, "an items schema without type", prop(json!({"type": "array", "items": {}}))).await?;
    Ok(())
}

async fn required(t: &mut Trial<'_>) -> Outcome {
    expect_violations(
        t,
        "required names not in properties",
        json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "b", "c"]}),
    )
    .await?;
    expect_violations(t, "required without properties", json!({"type": "object", "required": ["x"]})).await?;
    expect_violations(
        t,
        "a nested required name not defined",
        prop(json!({"type": "object", "properties": {}, "required": ["deep"]})),
    )
    .await?;
    Ok(())
}

async fn format(t: &mut Trial<'_>) -> Outcome {
    expect_violations(t, "format on a number", prop(json!({"type": "number", "format": "email"}))).await?;
    expect_violations(t, "format on an OpenAPI integer", prop(json!({"type": "integer", "format": "int64"}))).await?;
    expect_violations(
        t,
        "format on [\"string\",\"null\"] (accepted)",
        prop(json!({"type": ["string", "null"], "format": "date"})),
    )
    .await?;
    Ok(())
}

async fn nullable(t: &mut Trial<'_>) -> Outcome {
    let got =
        expect_violations(t, "nullable: true on a string", prop(json!({"type": "string", "nullable": true}))).await?;
    let msg = got[0]["message"].as_str().unwrap_or("").to_owned();
    t.check(
        msg.contains("[\"string\",\"null\"]") || msg.contains("[\"string\", \"null\"]"),
        "a message giving the union [\"string\",\"null\"] to write instead",
        msg,
    );
    expect_violations(t, "nullable: false", prop(json!({"type": "string", "nullable": false}))).await?;
    Ok(())
}

async fn references(t: &mut Trial<'_>) -> Outcome {
    expect_violations(t, "$ref", prop(json!({"$ref": "#/$defs/x"}))).await?;
    expect_violations(
        t,
        "$defs, $id and definitions at the root",
        json!({"type": "object", "$id": "https://example.com/s", "$defs": {}, "definitions": {}}),
    )
    .await?;
    expect_violations(
        t,
        "$anchor and $dynamicRef",
        prop(json!({"type": "string", "$anchor": "a", "$dynamicRef": "#a"})),
    )
    .await?;
    Ok(())
}

async fn keywords(t: &mut Trial<'_>) -> Outcome {
    expect_violations(
        t,
        "composition (allOf, oneOf, not)",
        prop(json!({"type": "string", "allOf": [], "oneOf": [], "not": {}})),
    )
    .await?;
    expect_violations(
        t,
        "an unknown keyword and a wrong-case one",
        prop(json!({"type": "string", "foo": 1, "MinLength": 2})),
    )
    .await?;
    expect_violations(t, "x- extensions (accepted)", prop(json!({"type": "string", "x-vendor": {"anything": [1, 2]}})))
        .await?;
    expect_violations(
        t,
        "keyword values of the wrong type",
        prop(json!({"type": "string", "minLength": -1, "pattern": "(", "description": 5})),
    )
    .await?;
    expect_violations(
        t,
        "a draft-4 exclusiveMinimum and a tuple items",
        json!({"type": "object", "properties": {
        "n": {"type": "number", "exclusiveMinimum": true}, "a": {"type": "array", "items": [{"type": "string"}]}}}),
    )
    .await?;
    expect_violations(t, "an enum value of the wrong type", prop(json!({"type": "string", "enum": ["a", 1]}))).await?;
    Ok(())
}

async fn bounds(t: &mut Trial<'_>) -> Outcome {
    expect_violations(t, "minLength > maxLength", prop(json!({"type": "string", "minLength": 5, "maxLength": 2})))
        .await?;
    expect_violations(t, "minItems > maxItems", prop(json!({"type": "array", "minItems": 3, "maxItems": 1}))).await?;
    expect_violations(
        t,
        "an empty numeric range",
        prop(json!({"type": "number", "exclusiveMinimum": 5, "maximum": 5})),
    )
    .await?;
    expect_violations(t, "minimum = maximum (accepted)", prop(json!({"type": "number", "minimum": 5, "maximum": 5})))
        .await?;
    Ok(())
}

async fn limits(t: &mut Trial<'_>) -> Outcome {
    let mut deep = json!({"type": "string"});
    for _ in 0..33 {
        deep = json!({"type": "object", "properties": {"d": deep}});
    }
    expect_violations(t, "nesting 33 deep", deep).await?;
    let mut ok = json!({"type": "string"});
    for _ in 0..32 {
        ok = json!({"type": "object", "properties": {"d": ok}});
    }
    expect_violations(t, "nesting 32 deep (accepted)", ok).await?;
    let props: serde_json::Map<String, Value> =
        (0..1030).map(|i| (format!("p{i:04}"), json!({"type": "string"}))).collect();
    expect_violations(t, "1 030 subschemas", json!({"type": "object", "properties": props})).await?;
    let props: serde_json::Map<String, Value> =
        (0..300).map(|i| (format!("p{i:03}"), json!({"type": "integer"}))).collect();
    expect_violations(t, "300 violations (256 reported)", json!({"type": "object", "properties": props})).await?;
    Ok(())
}

async fn no_fetch(t: &mut Trial<'_>) -> Outcome {
    let Some(host) = &t.ctx.didhost else {
        return Err(Stop::Skip("needs --serve-did (the suite's loopback listener is the canary)".into()));
    };
    if !t.ctx.target_is_loopback() {
        return Err(Stop::Skip(
            "the agent is not on this machine: it could not reach the loopback canary anyway".into(),
        ));
    }
    let canary = host.canary_url("schema-ref");
    let uri_canary = host.canary_url("payload-uri");
    let before = host.hits_under("/canary/").len();
    expect_violations(t, "a $ref to the suite's canary URL", prop(json!({"$ref": canary}))).await?;
    let plan = main_plan(t)?;
    let open = plan.decl.input_schema["additionalProperties"] != false;
    if open {
        let mut p = plan.decl.input_schema.clone();
        if let Some(o) = p.as_object_mut() {
            let props = o.entry("properties").or_insert_with(|| json!({}));
            if let Some(pp) = props.as_object_mut() {
                pp.insert("probe_uri".into(), json!({"type": "string", "format": "uri"}));
                pp.insert("probe_number".into(), json!({"type": "number"}));
            }
        }
        let neg = super::negotiate(t, &plan, &p).await?;
        let mut payload = plan.payload.clone();
        payload["probe_uri"] = json!(uri_canary);
        payload["probe_number"] = json!("not a number");
        let r = t
            .send(
                "EXECUTE a payload naming the canary URL (and invalid otherwise)",
                super::execute_req(t, &plan, &neg.id, &payload),
            )
            .await?;
        t.expect_error(&r, 422, "payload_invalid");
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    t.step("the canary's log");
    let hits = host.hits_under("/canary/");
    t.check(hits.len() == before, "no request to the canary", format!("{:?}", &hits[before.min(hits.len())..]));
    Ok(())
}
