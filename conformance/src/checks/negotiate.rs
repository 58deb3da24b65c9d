//! NEGOTIATE (§6.1) and tightening (§6.3). The algorithm of §6.3 is deterministic, so the suite computes the agreed
//! schema, the changes and the conflicts with `a2a-core`'s reference implementation from the capability's published
//! `input_schema` and compares them with what the agent answers.

use a2a_core::negotiation;
use a2a_core::schema_rules;
use serde_json::{Map, Value, json};

use super::applies::{ALWAYS, MAIN, REGION};
use super::{MISSING_CAPABILITY, main_plan, negotiate_body, same_json, show};
use crate::check;
use crate::check::{Check, Outcome, Stop, Trial};
use crate::ctx::{CallerAuth, CapPlan, SENDER_B};

pub(super) fn checks() -> Vec<Check> {
    vec![
        check!(
            "negotiate/happy-path",
            ["NEG-3", "NEG-7", "NEG-12", "CAP-19"],
            Must,
            MAIN,
            "proposing the capability's own input_schema is answered 200 with a NegotiateResponse: A2A-Negotiation-ID equal to negotiation_id (1-128 unreserved characters, long enough for 128 random bits), the capability's auth_requirement, agreed_schema equal to the proposal, tightened false",
            happy_path
        ),
        check!(
            "negotiate/ids-unique",
            ["NEG-3", "NEG-8"],
            Must,
            MAIN,
            "repeating a NEGOTIATE yields a new negotiation id with the same agreed schema",
            ids_unique
        ),
        check!(
            "negotiate/tightening",
            [
                "NEG-10", "NEG-12", "NEG-15", "NEG-16", "NEG-17", "NEG-18", "NEG-19", "NEG-20", "NEG-21", "NEG-22",
                "NEG-23", "NEG-24", "NEG-25", "NEG-26", "NEG-27", "NEG-28", "NEG-29", "NEG-30", "NEG-31"
            ],
            Must,
            MAIN,
            "for proposals derived from the capability's input_schema (open, closed, narrowed, bounded, enumerated, annotated), each sent twice (the second time with every object's members in reverse order), the agreed schema, the changes (path, kind, order) and the conflicts equal those of the reference algorithm of §6.3",
            tightening
        ),
        check!(
            "negotiate/conflict",
            ["NEG-11", "FB-3"],
            Must,
            MAIN,
            "a proposal that conflicts with the capability is answered 409 schema_incompatible with details.conflicts as the reference computes them, and fallback_options",
            conflict
        ),
        check!(
            "negotiate/strict",
            ["NEG-13"],
            Must,
            MAIN,
            "strict: true with a proposal that needs changes is answered 409 tightening_refused with details.counter_proposal and details.changes; strict with the counter-proposal is answered 200 with it unchanged",
            strict
        ),
        check!(
            "negotiate/timeout",
            ["NEG-2"],
            Must,
            MAIN,
            "timeout_ms must be an integer from 1 to 2^53-1 (else 400 invalid_request); the agreed value is the requested one lowered to limits.max_timeout_ms",
            timeout
        ),
        check!(
            "negotiate/unknown-capability",
            ["NEG-1", "FB-3"],
            Must,
            ALWAYS,
            "NEGOTIATE for a capability the agent does not offer is answered 404 no_matching_capability with fallback_options",
            unknown_capability
        ),
        check!(
            "negotiate/order",
            ["NEG-1"],
            Must,
            MAIN,
            "failures are answered in the order of NEG-1: version before body, capability before schema rules, region before schema rules",
            order
        ),
        check!(
            "negotiate/usable-until-expiry",
            ["NEG-5", "NEG-7"],
            Must,
            MAIN,
            "a negotiation serves several EXECUTEs; expires_at is a future RFC 3339 time; confirm_window_ms is given",
            usable
        ),
        check!(
            "negotiate/lifetime",
            ["NEG-6"],
            Should,
            MAIN,
            "negotiations are kept for at least 5 minutes (expires_at at least 5 minutes after the response)",
            lifetime
        ),
        check!(
            "negotiate/sender-scoped",
            ["NEG-4", "HDR-8"],
            Must,
            MAIN,
            "EXECUTE with another sender's negotiation is answered 404 unknown_negotiation",
            sender_scoped
        ),
        check!(
            "negotiate/region-order",
            ["NEG-1", "CAP-13"],
            Must,
            REGION,
            "a region-restricted capability without A2A-Region is refused (403 region_restricted) before its schema rules are checked",
            region_order
        ),
    ]
}

/// The negotiation id alphabet has 66 characters: fewer than 22 cannot hold 128 random bits (NEG-3).
const MIN_ID_CHARS: usize = 22;

async fn happy_path(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let req =
        t.ctx.for_cap(&plan, "POST", "/negotiate").json(&negotiate_body(&plan.decl.name, &plan.decl.input_schema));
    let r = t.send(format!("NEGOTIATE {} with its own input_schema", plan.decl.name), req).await?;
    t.expect_status(&r, 200);
    let body = r.json().unwrap_or(Value::Null);
    let parsed: Result<a2a_core::wire::NegotiateResponse, _> = serde_json::from_value(body.clone());
    t.check(
        parsed.is_ok(),
        "a NegotiateResponse",
        match &parsed {
            Ok(_) => "a NegotiateResponse".to_owned(),
            Err(e) => format!("{e}: {}", show(&body)),
        },
    );
    let id = body["negotiation_id"].as_str().unwrap_or("");
    t.check(
        r.header("a2a-negotiation-id") == Some(id),
        format!("A2A-Negotiation-ID: {id}"),
        format!("{:?}", r.header("a2a-negotiation-id")),
    );
    let syntax = a2a_core::headers::parse_token("A2A-Negotiation-ID", id).is_ok();
    t.check(
        syntax && id.len() >= MIN_ID_CHARS,
        format!("1-128 characters of A-Z a-z 0-9 . _ ~ -, at least {MIN_ID_CHARS} (128 bits)"),
        format!("{id:?} ({} characters)", id.len()),
    );
    t.check(
        body["target_capability"] == plan.decl.name.as_str(),
        format!("target_capability {:?}", plan.decl.name),
        format!("{}", body["target_capability"]),
    );
    t.check(
        body["auth_requirement"] == plan.decl.auth_requirement.as_str(),
        format!("auth_requirement {:?}", plan.decl.auth_requirement.as_str()),
        format!("{}", body["auth_requirement"]),
    );
    t.check(
        same_json(&body["agreed_schema"], &plan.decl.input_schema),
        "agreed_schema equal to the proposal (the capability's own schema)",
        show(&body["agreed_schema"]),
    );
    let changes = body["changes"].as_array().map_or(0, Vec::len);
    t.check(
        body["tightened"] == false && changes == 0,
        "tightened false, no changes",
        format!("tightened {}, {changes} changes", body["tightened"]),
    );
    Ok(())
}

async fn ids_unique(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let mut ids = Vec::new();
    let mut schemas = Vec::new();
    for i in 1..=3 {
        let req =
            t.ctx.for_cap(&plan, "POST", "/negotiate").json(&negotiate_body(&plan.decl.name, &plan.decl.input_schema));
        let r = t.send(format!("NEGOTIATE #{i}"), req).await?;
        t.expect_status(&r, 200);
        let b = r.json().unwrap_or(Value::Null);
        ids.push(b["negotiation_id"].as_str().unwrap_or("").to_owned());
        schemas.push(b["agreed_schema"].clone());
    }
    t.step("compare the three negotiations");
    let distinct: std::collections::HashSet<_> = ids.iter().collect();
    t.check(
        distinct.len() == ids.len() && ids.iter().all(|i| !i.is_empty()),
        "three different negotiation ids",
        format!("{ids:?}"),
    );
    t.check(
        schemas.windows(2).all(|w| same_json(&w[0], &w[1])),
        "the same agreed schema each time",
        show(&Value::Array(schemas.clone())),
    );
    Ok(())
}

/// Proposals derived from the capability's schema C, each exercising one rule of §6.3.
fn variants(c: &Value) -> Vec<(String, Value)> {
    let mut out = vec![
        ("NEG-12: the capability's own schema".to_owned(), c.clone()),
        ("NEG-26/27: an open proposal {\"type\":\"object\"}".to_owned(), json!({"type": "object"})),
    ];
    let with = |f: &dyn Fn(&mut Map<String, Value>)| -> Value {
        let mut p = c.as_object().cloned().unwrap_or_default();
        f(&mut p);
        Value::Object(p)
    };
    out.push((
        "NEG-29: annotations (title, description)".into(),
        with(&|p| {
            p.insert("title".into(), json!("probe"));
            p.insert("description".into(), json!("a proposal with annotations"));
        }),
    ));
    out.push((
        "NEG-28: a closed proposal (additionalProperties: false)".into(),
        with(&|p| {
            p.insert("additionalProperties".into(), json!(false));
        }),
    ));
    out.push((
        "NEG-27: no required members".into(),
        with(&|p| {
            p.remove("required");
        }),
    ));
    out.push((
        "NEG-26: an extra property the capability does not define".into(),
        with(&|p| {
            let props = p.entry("properties").or_insert_with(|| json!({}));
            if let Some(o) = props.as_object_mut() {
                o.insert("probe_extra".into(), json!({"type": "string", "title": "probe"}));
            }
        }),
    ));
    let props: Vec<(String, Value)> = c["properties"]
        .as_object()
        .map(|o| o.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    for (name, sub) in props.iter().take(6) {
        let base = match &sub["type"] {
            Value::String(s) => s.clone(),
            Value::Array(a) => a.iter().filter_map(Value::as_str).find(|s| *s != "null").unwrap_or("").to_owned(),
            _ => continue,
        };
        let mut alts: Vec<(&str, Value)> = vec![("NEG-15: the type made nullable", json!({"type": [base, "null"]}))];
        match base.as_str() {
            "string" => {
                alts.push(("NEG-22: length bounds", json!({"type": "string", "minLength": 0, "maxLength": 100000})));
                alts.push(("NEG-24: a pattern", json!({"type": "string", "pattern": "^.*$"})));
                alts.push(("NEG-16: an enum", json!({"type": "string", "enum": ["conformance", "probe"]})));
                alts.push(("NEG-17: a const", json!({"type": "string", "const": "conformance"})));
            }
            "number" => {
                alts.push((
                    "NEG-18/19/20: numeric bounds",
                    json!({"type": "number", "minimum": -1.0e9, "maximum": 1.0e9}),
                ));
                alts.push((
                    "NEG-18/20: an exclusive lower bound",
                    json!({"type": "number", "exclusiveMinimum": -1.0e9}),
                ));
                alts.push(("NEG-21: multipleOf", json!({"type": "number", "multipleOf": 0.5})));
                if let Some(range) = disjoint_range(sub) {
                    alts.push(("NEG-20: a range that leaves no number with the capability's", range));
                }
            }
            "array" => {
                alts.push((
                    "NEG-22/23: item counts and uniqueness",
                    json!({"type": "array", "minItems": 0, "uniqueItems": false}),
                ));
                alts.push(("NEG-25: items", json!({"type": "array", "items": {"type": "string"}})));
            }
            "object" => {
                alts.push(("NEG-26/28: an open nested object", json!({"type": "object"})));
            }
            "boolean" => alts.push(("NEG-17: a const", json!({"type": "boolean", "const": true}))),
            _ => {}
        }
        for (what, alt) in alts {
            out.push((
                format!("{what} on property {name:?}"),
                with(&|p| {
                    if let Some(o) = p.get_mut("properties").and_then(Value::as_object_mut) {
                        o.insert(name.clone(), alt.clone());
                    }
                }),
            ));
        }
    }
    out.retain(|(_, p)| schema_rules::check(p).is_empty());
    out
}

/// A numeric schema whose range is disjoint from the bounded number `c`'s (a `minimum` above its upper bound, else a
/// `maximum` below its lower bound), so that merged they leave no number (NEG-20); none when `c` has no bound.
fn disjoint_range(c: &Value) -> Option<Value> {
    let bound = |keys: [&str; 2]| keys.iter().filter_map(|k| c[*k].as_f64()).reduce(f64::max);
    if let Some(upper) = ["maximum", "exclusiveMaximum"].iter().filter_map(|k| c[*k].as_f64()).reduce(f64::min) {
        return Some(json!({"type": "number", "minimum": upper + 1.0}));
    }
    bound(["minimum", "exclusiveMinimum"]).map(|lower| json!({"type": "number", "maximum": lower - 1.0}))
}

fn changes_of(v: &Value) -> Vec<(String, String)> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|c| (c["path"].as_str().unwrap_or("").to_owned(), c["kind"].as_str().unwrap_or("").to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

fn kind_name(k: a2a_core::wire::SchemaChangeKind) -> String {
    serde_json::to_value(k).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

async fn compare_with_reference(t: &mut Trial<'_>, plan: &CapPlan, what: &str, proposal: &Value) -> Outcome {
    compare_sent(t, plan, what, proposal, false).await
}

/// NEGOTIATE `proposal` (its members in reverse order when `reversed`) and compare the answer with the reference.
async fn compare_sent(t: &mut Trial<'_>, plan: &CapPlan, what: &str, proposal: &Value, reversed: bool) -> Outcome {
    let c = &plan.decl.input_schema;
    let body = negotiate_body(&plan.decl.name, proposal);
    let req = t.ctx.for_cap(plan, "POST", "/negotiate");
    let req = if reversed {
        req.set("content-type", "application/json").body(super::reversed_json(&body, false).into_bytes())
    } else {
        req.json(&body)
    };
    let r = t.send(format!("NEGOTIATE: {what}"), req).await?;
    let body = r.json().unwrap_or(Value::Null);
    match negotiation::tighten(proposal, c) {
        Ok(agreement) => {
            t.expect_status(&r, 200);
            t.check(
                same_json(&body["agreed_schema"], &agreement.agreed_schema),
                format!("agreed_schema {}", show(&agreement.agreed_schema)),
                show(&body["agreed_schema"]),
            );
            let want: Vec<(String, String)> =
                agreement.changes.iter().map(|c| (c.path.clone(), kind_name(c.kind))).collect();
            let got = changes_of(&body["changes"]);
            t.check(got == want, format!("changes (path, kind) {want:?}"), format!("{got:?}"));
            // NEG-30: each change is {path, kind, message}.
            let shaped = body["changes"].as_array().is_some_and(|a| {
                a.iter().all(|c| {
                    c["path"].is_string()
                        && c["kind"].is_string()
                        && c["message"].as_str().is_some_and(|m| !m.is_empty())
                })
            });
            t.check(shaped, "changes: an array of {path, kind, message}", show(&body["changes"]));
            t.check(
                body["tightened"] == !want.is_empty(),
                format!("tightened {}", !want.is_empty()),
                format!("{}", body["tightened"]),
            );
        }
        Err(conflicts) => {
            t.expect_error(&r, 409, "schema_incompatible");
            let mut want: Vec<String> = conflicts.iter().map(|c| c.path.clone()).collect();
            want.dedup();
            let got: Vec<String> = r.error_details()["conflicts"]
                .as_array()
                .map(|a| a.iter().map(|c| c["path"].as_str().unwrap_or("").to_owned()).collect())
                .unwrap_or_default();
            t.check(got == want, format!("details.conflicts at {want:?}"), format!("{got:?}"));
        }
    }
    Ok(())
}

async fn tightening(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    for (what, proposal) in variants(&plan.decl.input_schema) {
        compare_with_reference(t, &plan, &what, &proposal).await?;
        // NEG-10: the same proposal with every object's members in the reverse order gets the same answer.
        compare_sent(t, &plan, &format!("{what}, its members in reverse order"), &proposal, true).await?;
    }
    Ok(())
}

/// A proposal that conflicts with `c`, if one can be made: a property of another type, or (for a closed schema) an
/// extra property.
fn conflicting(c: &Value) -> Option<(String, Value)> {
    let mut p = c.as_object().cloned()?;
    if let Some((name, sub)) = c["properties"].as_object().and_then(|o| o.iter().find(|(_, s)| s["type"].is_string())) {
        let other = if sub["type"] == "string" { "number" } else { "string" };
        p.get_mut("properties")?.as_object_mut()?.insert(name.clone(), json!({"type": other}));
        return Some((format!("property {name:?} proposed as {other}"), Value::Object(p)));
    }
    if c["additionalProperties"] == false {
        let props = p.entry("properties").or_insert_with(|| json!({}));
        props.as_object_mut()?.insert("probe_extra".into(), json!({"type": "string"}));
        return Some(("an extra property the closed capability does not accept".into(), Value::Object(p)));
    }
    None
}

async fn conflict(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let Some((what, proposal)) = conflicting(&plan.decl.input_schema) else {
        return Err(Stop::Skip(format!(
            "{}'s input_schema accepts every proposal (no typed property, not closed)",
            plan.decl.name
        )));
    };
    compare_with_reference(t, &plan, &what, &proposal).await?;
    let req = t.ctx.for_cap(&plan, "POST", "/negotiate").json(&negotiate_body(&plan.decl.name, &proposal));
    let r = t.send("NEGOTIATE the conflicting proposal again (fallback options)", req).await?;
    let fb = r.json().map(|b| b["fallback_options"].clone()).unwrap_or(Value::Null);
    t.check(fb.is_array(), "fallback_options: an array (possibly empty)", show(&fb));
    Ok(())
}

async fn strict(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let open = json!({"type": "object"});
    let agreement = negotiation::tighten(&open, &plan.decl.input_schema);
    let counter = match agreement {
        Ok(a) if a.tightened() => {
            let body = json!({"target_capability": plan.decl.name, "proposed_schema": open, "strict": true});
            let r = t
                .send(
                    "NEGOTIATE {\"type\":\"object\"} with strict: true",
                    t.ctx.for_cap(&plan, "POST", "/negotiate").json(&body),
                )
                .await?;
            t.expect_error(&r, 409, "tightening_refused");
            let d = r.error_details();
            t.check(
                same_json(&d["counter_proposal"], &a.agreed_schema),
                format!("details.counter_proposal {}", show(&a.agreed_schema)),
                show(&d["counter_proposal"]),
            );
            let want: Vec<(String, String)> = a.changes.iter().map(|c| (c.path.clone(), kind_name(c.kind))).collect();
            t.check(
                changes_of(&d["changes"]) == want,
                format!("details.changes {want:?}"),
                format!("{:?}", changes_of(&d["changes"])),
            );
            a.agreed_schema
        }
        _ => plan.decl.input_schema.clone(),
    };
    let body = json!({"target_capability": plan.decl.name, "proposed_schema": counter, "strict": true});
    let r = t
        .send(
            "NEGOTIATE the counter-proposal with strict: true",
            t.ctx.for_cap(&plan, "POST", "/negotiate").json(&body),
        )
        .await?;
    t.expect_status(&r, 200);
    let b = r.json().unwrap_or(Value::Null);
    t.check(same_json(&b["agreed_schema"], &counter), "agreed_schema: the proposal exactly", show(&b["agreed_schema"]));
    t.check(b["tightened"] == false, "tightened false", format!("{}", b["tightened"]));
    Ok(())
}

async fn timeout(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let schema = plan.decl.input_schema.clone();
    let send = |t: &Trial<'_>, raw: &str| {
        let name = serde_json::to_string(&plan.decl.name).unwrap_or_default();
        let schema = serde_json::to_string(&schema).unwrap_or_default();
        t.ctx
            .for_cap(&plan, "POST", "/negotiate")
            .header("Content-Type", "application/json")
            .body(format!("{{\"target_capability\":{name},\"proposed_schema\":{schema},\"timeout_ms\":{raw}}}"))
    };
    for raw in ["0", "-5", "1.5", "\"1000\"", "9007199254740992", "18446744073709551616"] {
        let req = send(t, raw);
        let r = t.send(format!("NEGOTIATE with timeout_ms {raw}"), req).await?;
        t.expect_error(&r, 400, "invalid_request");
    }
    let req = send(t, "9007199254740991");
    let r = t.send("NEGOTIATE with timeout_ms 2^53-1", req).await?;
    t.expect_status(&r, 200);
    let agreed = r.json().and_then(|b| b["timeout_ms"].as_u64());
    match t.ctx.disc.limits.as_ref().map(|l| l.max_timeout_ms) {
        Some(max) => t.check(
            agreed == Some(max),
            format!("timeout_ms lowered to limits.max_timeout_ms ({max})"),
            format!("{agreed:?}"),
        ),
        None => t.check(agreed.is_some_and(|a| a >= 1), "an agreed timeout_ms", format!("{agreed:?}")),
    };
    let req = send(t, "1000");
    let r = t.send("NEGOTIATE with timeout_ms 1000", req).await?;
    t.expect_status(&r, 200);
    let agreed = r.json().and_then(|b| b["timeout_ms"].as_u64());
    t.check(agreed.is_some_and(|a| (1..=1000).contains(&a)), "timeout_ms 1000 (or lower)", format!("{agreed:?}"));
    Ok(())
}

async fn unknown_capability(t: &mut Trial<'_>) -> Outcome {
    let body = negotiate_body(MISSING_CAPABILITY, &json!({"type": "object"}));
    let r = t.send(format!("NEGOTIATE {MISSING_CAPABILITY}"), t.ctx.request("POST", "/negotiate").json(&body)).await?;
    t.expect_error(&r, 404, "no_matching_capability");
    let fb = r.json().map(|b| b["fallback_options"].clone()).unwrap_or(Value::Null);
    t.check(fb.is_array(), "fallback_options: an array (possibly empty)", show(&fb));
    Ok(())
}

async fn order(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let req = t
        .ctx
        .for_cap(&plan, "POST", "/negotiate")
        .without("a2a-version")
        .header("Content-Type", "application/json")
        .body("{not json");
    let r = t.send("NEGOTIATE without A2A-Version and with a body that is not JSON", req).await?;
    t.expect_error(&r, 400, "version_required");
    let bad = json!({"type": "object", "properties": {"x": {"type": "integer"}}});
    let body = negotiate_body(MISSING_CAPABILITY, &bad);
    let r = t
        .send(
            "NEGOTIATE an unknown capability with a schema that breaks the rules",
            t.ctx.for_cap(&plan, "POST", "/negotiate").json(&body),
        )
        .await?;
    t.expect_error(&r, 404, "no_matching_capability");
    let both = json!({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["missing"]});
    let r = t
        .send(
            "NEGOTIATE a schema that breaks the rules",
            t.ctx.for_cap(&plan, "POST", "/negotiate").json(&negotiate_body(&plan.decl.name, &both)),
        )
        .await?;
    t.expect_error(&r, 422, "schema_rule_violation");
    Ok(())
}

async fn usable(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let neg = super::negotiate(t, &plan, &plan.decl.input_schema).await?;
    t.step("read the negotiation");
    let expires = neg.body["expires_at"].as_str().and_then(a2a_core::wire::parse_timestamp);
    t.check(
        expires.is_some_and(|e| e > std::time::SystemTime::now()),
        "expires_at: an RFC 3339 time in the future",
        format!("{}", neg.body["expires_at"]),
    );
    t.check(
        neg.body["confirm_window_ms"].is_u64(),
        "confirm_window_ms: an integer",
        format!("{}", neg.body["confirm_window_ms"]),
    );
    for i in 1..=2 {
        let r = t
            .send(format!("EXECUTE #{i} with the negotiation"), super::execute_req(t, &plan, &neg.id, &plan.payload))
            .await?;
        t.expect_status(&r, 201);
    }
    Ok(())
}

async fn lifetime(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    let req =
        t.ctx.for_cap(&plan, "POST", "/negotiate").json(&negotiate_body(&plan.decl.name, &plan.decl.input_schema));
    let r = t.send("NEGOTIATE", req).await?;
    let now = r
        .header("date")
        .and_then(|d| time::OffsetDateTime::parse(d, &time::format_description::well_known::Rfc2822).ok())
        .map(std::time::SystemTime::from)
        .unwrap_or_else(std::time::SystemTime::now);
    let expires = r.json().and_then(|b| b["expires_at"].as_str().and_then(a2a_core::wire::parse_timestamp));
    let secs = expires.and_then(|e| e.duration_since(now).ok()).map(|d| d.as_secs());
    t.check(
        secs.is_some_and(|s| s >= 299),
        "expires_at at least 5 minutes after the response (its Date header)",
        format!("{secs:?} s"),
    );
    Ok(())
}

async fn sender_scoped(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    if !matches!(plan.auth, CallerAuth::None) {
        return Err(Stop::Skip("the only drivable capability needs credentials bound to one sender".into()));
    }
    let neg = super::negotiate(t, &plan, &plan.decl.input_schema).await?;
    let req = super::execute_req(t, &plan, &neg.id, &plan.payload).set("A2A-Sender-ID", SENDER_B);
    let r = t.send(format!("EXECUTE as {SENDER_B} with another sender's negotiation"), req).await?;
    t.expect_error(&r, 404, "unknown_negotiation");
    Ok(())
}

async fn region_order(t: &mut Trial<'_>) -> Outcome {
    let plan = t.ctx.plan.restricted.clone().map_err(Stop::Skip)?;
    t.uses(&plan);
    let bad = json!({"type": "object", "properties": {"x": {"type": "integer"}}});
    let req =
        t.ctx.for_cap(&plan, "POST", "/negotiate").without("a2a-region").json(&negotiate_body(&plan.decl.name, &bad));
    let r = t
        .send("NEGOTIATE the restricted capability without A2A-Region and with a schema that breaks the rules", req)
        .await?;
    t.expect_error(&r, 403, "region_restricted");
    Ok(())
}
