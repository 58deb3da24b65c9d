//! FALLBACK (§11).

use serde_json::{Value, json};

use super::applies::ALWAYS;
use super::{MISSING_CAPABILITY, show};
use crate::check;
use crate::check::{Check, Outcome, Stop, Trial};

pub(super) fn checks() -> Vec<Check> {
    vec![
        check!(
            "fallback/response",
            ["FB-1"],
            Must,
            ALWAYS,
            "FALLBACK is answered 200 with a FallbackResponse: requested_capability and fallback_options (possibly empty), each with a capability",
            response
        ),
        check!(
            "fallback/degraded-options",
            ["FB-2"],
            Must,
            "a declaration lists fallback_for",
            "FALLBACK for X offers every local capability declaring fallback_for X (relation degraded, source local), groups in the order same, degraded, sub_capability, each sorted by estimated_cost then estimated_latency_ms",
            degraded
        ),
    ]
}

async fn response(t: &mut Trial<'_>) -> Outcome {
    let body = json!({"target_capability": MISSING_CAPABILITY, "reason": "conformance probe"});
    let r =
        t.send(format!("FALLBACK for {MISSING_CAPABILITY}"), t.ctx.request("POST", "/fallback").json(&body)).await?;
    t.expect_status(&r, 200);
    let b = r.json().unwrap_or(Value::Null);
    let parsed: Result<a2a_core::wire::FallbackResponse, _> = serde_json::from_value(b.clone());
    t.check(
        parsed.is_ok(),
        "a FallbackResponse",
        match &parsed {
            Ok(_) => "a FallbackResponse".into(),
            Err(e) => format!("{e}: {}", show(&b)),
        },
    );
    t.check(
        b["requested_capability"] == MISSING_CAPABILITY,
        format!("requested_capability {MISSING_CAPABILITY:?}"),
        format!("{}", b["requested_capability"]),
    );
    Ok(())
}

fn group(o: &Value) -> u8 {
    match (o["relation"].as_str(), o["source"].as_str()) {
        (Some("same"), _) => 0,
        (Some("degraded"), Some("local")) => 1,
        (Some("degraded"), _) => 2,
        (Some("sub_capability"), _) => 3,
        _ => 4,
    }
}

async fn degraded(t: &mut Trial<'_>) -> Outcome {
    let decls = t.ctx.disc.decls.clone();
    let targets: Vec<String> = decls.iter().flat_map(|d| d.fallback_for.iter().cloned()).collect();
    if targets.is_empty() {
        return Err(Stop::Skip("no declaration lists fallback_for".into()));
    }
    let me = t.ctx.agent_did().to_owned();
    for target in targets.iter().take(3) {
        let r = t
            .send(
                format!("FALLBACK for {target}"),
                t.ctx.request("POST", "/fallback").json(&json!({"target_capability": target})),
            )
            .await?;
        t.expect_status(&r, 200);
        let options = r.json().map(|b| b["fallback_options"].clone()).unwrap_or(Value::Null);
        let list = options.as_array().cloned().unwrap_or_default();
        for d in decls.iter().filter(|d| d.fallback_for.contains(target)) {
            let found = list.iter().any(|o| {
                o["capability"] == d.name.as_str()
                    && o["relation"] == "degraded"
                    && (o["agent"].is_null() || o["agent"] == me.as_str())
            });
            t.check(
                found,
                format!("an option {{capability: {:?}, relation: degraded}} offered by this agent", d.name),
                show(&options),
            );
        }
        let groups: Vec<u8> = list.iter().map(group).collect();
        t.check(
            groups.windows(2).all(|w| w[0] <= w[1]),
            "groups in the order same, degraded (local, then registry), sub_capability",
            format!("{groups:?}"),
        );
        let key = |o: &Value| {
            (
                o["estimated_cost"].as_f64().unwrap_or(f64::INFINITY),
                o["estimated_latency_ms"].as_u64().unwrap_or(u64::MAX),
            )
        };
        let sorted = list.windows(2).all(|w| {
            group(&w[0]) != group(&w[1]) || {
                let (a, b) = (key(&w[0]), key(&w[1]));
                a.0 < b.0 || (a.0 == b.0 && a.1 <= b.1)
            }
        });
        t.check(
            sorted,
            "each group sorted by estimated_cost, then estimated_latency_ms (unknown last)",
            show(&options),
        );
    }
    Ok(())
}
