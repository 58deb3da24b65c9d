//! Authentication by capability (§10) for `api_key` and `oauth2`, and region restrictions (§4.4).

use a2a_core::capability::CapabilityDeclaration;
use a2a_core::keys::SigningKey;
use serde_json::{Value, json};

use super::applies::{API_KEY, OAUTH2, REGION};
use super::{negotiate_body, show};
use crate::check;
use crate::check::{Check, Outcome, Stop, Trial};
use crate::http::Req;
use crate::identity::{raw_token, unix_now};

pub(super) fn checks() -> Vec<Check> {
    vec![
        check!(
            "auth/api-key",
            ["AUTH-1", "AUTH-2", "CAP-9"],
            Must,
            API_KEY,
            "an api_key capability refuses NEGOTIATE without A2A-Api-Key (401 auth_required) and with a wrong key (401 auth_invalid), also one that differs from the --api-key only by its last character, an appended one or case",
            api_key
        ),
        check!(
            "auth/oauth2",
            ["AUTH-1", "AUTH-3", "ERR-3"],
            Must,
            OAUTH2,
            "an oauth2 capability refuses a missing bearer token (401 auth_required, WWW-Authenticate: Bearer realm) and invalid ones (401 auth_invalid, WWW-Authenticate: Bearer error=\"invalid_token\"), including an ES256 JWT from an unknown issuer key",
            oauth2
        ),
        check!(
            "auth/oauth2-algorithms",
            ["JWS-7"],
            Should,
            OAUTH2,
            "an oauth2 capability refuses bearer JWTs that are not ES256 (HS256, none) with 401 auth_invalid",
            oauth2_algorithms
        ),
        check!(
            "region/enforced",
            ["CAP-13", "FB-3"],
            Must,
            REGION,
            "a restricted capability refuses NEGOTIATE and EXECUTE without A2A-Region or from another region (403 region_restricted with details.allowed_regions and fallback_options); a malformed region is 400 invalid_header",
            region_enforced
        ),
        check!(
            "region/response-header",
            ["CAP-12"],
            Should,
            REGION,
            "NEGOTIATE and EXECUTE responses for a restricted capability carry A2A-Region with its regions, comma-separated",
            region_response_header
        ),
        check!(
            "execute/auth-before-payload",
            ["EXE-2"],
            Must,
            REGION,
            "EXECUTE meets the region (and authentication) before looking at the payload: a bad payload without A2A-Region is 403 region_restricted",
            auth_before_payload
        ),
    ]
}

/// A NEGOTIATE for `decl` proposing its own schema, with its region when restricted.
fn negotiate_for(t: &Trial<'_>, decl: &CapabilityDeclaration) -> Req {
    let mut req = t.ctx.request("POST", "/negotiate").json(&negotiate_body(&decl.name, &decl.input_schema));
    if let Some(r) = decl.region_restriction.first() {
        req = req.header("A2A-Region", r.clone());
    }
    req
}

async fn api_key(t: &mut Trial<'_>) -> Outcome {
    let decl = t
        .ctx
        .plan
        .api_key_decl
        .clone()
        .ok_or_else(|| Stop::Skip("the agent advertises no api_key capability".into()))?;
    let r = t.send(format!("NEGOTIATE {} without A2A-Api-Key", decl.name), negotiate_for(t, &decl)).await?;
    t.expect_error(&r, 401, "auth_required");
    let req = negotiate_for(t, &decl).header("A2A-Api-Key", "conformance-wrong-key-0000");
    let r = t.send(format!("NEGOTIATE {} with a wrong A2A-Api-Key", decl.name), req).await?;
    t.expect_error(&r, 401, "auth_invalid");
    if let Some(key) = t.ctx.opts.api_key.clone() {
        // AUTH-2 compares the whole key: not a prefix either way (a comparison that zips the two and stops at the
        // shorter), not ignoring case, not trimmed.
        let mut near: Vec<(&str, String)> = vec![
            ("the --api-key without its last character", key[..key.len().saturating_sub(1)].to_owned()),
            ("the --api-key with a character appended", format!("{key}0")),
        ];
        let flipped: String = key
            .chars()
            .map(|c| if c.is_ascii_lowercase() { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() })
            .collect();
        if flipped != key {
            near.push(("the --api-key in the other case", flipped));
        }
        for (what, wrong) in near.into_iter().filter(|(_, w)| !w.is_empty()) {
            let r = t
                .send(
                    format!("NEGOTIATE {} with {what}", decl.name),
                    negotiate_for(t, &decl).header("A2A-Api-Key", wrong),
                )
                .await?;
            t.expect_error(&r, 401, "auth_invalid");
        }
        let r = t
            .send(
                format!("NEGOTIATE {} with the --api-key", decl.name),
                negotiate_for(t, &decl).header("A2A-Api-Key", key),
            )
            .await?;
        t.expect_status(&r, 200);
    }
    Ok(())
}

fn jwt(key: &SigningKey, alg: &str, issuer: &str, aud: &str) -> String {
    let now = unix_now();
    let header = serde_json::to_vec(&json!({"alg": alg, "typ": "JWT"})).unwrap_or_default();
    let claims =
        serde_json::to_vec(&json!({"iss": issuer, "aud": aud, "iat": now, "exp": now + 60, "sub": "conformance"}))
            .unwrap_or_default();
    raw_token(key, &header, &claims)
}

async fn oauth2(t: &mut Trial<'_>) -> Outcome {
    let decl =
        t.ctx.plan.oauth2_decl.clone().ok_or_else(|| Stop::Skip("the agent advertises no oauth2 capability".into()))?;
    let r = t.send(format!("NEGOTIATE {} without Authorization", decl.name), negotiate_for(t, &decl)).await?;
    t.expect_error(&r, 401, "auth_required");
    let www = r.header("www-authenticate").unwrap_or("").to_owned();
    t.check(www.starts_with("Bearer") && www.contains("realm"), "WWW-Authenticate: Bearer realm=...", www);
    let key = SigningKey::generate().map_err(|e| Stop::Blocked(e.to_string()))?;
    let aud = t.ctx.agent_did().to_owned();
    for (what, token) in [
        ("a token that is not a JWT", "not-a-jwt".to_owned()),
        (
            "an ES256 JWT signed by a key the agent does not trust",
            jwt(&key, "ES256", "https://issuer.conformance.example", &aud),
        ),
    ] {
        let req = negotiate_for(t, &decl).header("Authorization", format!("Bearer {token}"));
        let r = t.send(format!("NEGOTIATE {} with {what}", decl.name), req).await?;
        t.expect_error(&r, 401, "auth_invalid");
        let www = r.header("www-authenticate").unwrap_or("").to_owned();
        t.check(
            www.starts_with("Bearer") && www.contains("invalid_token"),
            "WWW-Authenticate: Bearer error=\"invalid_token\"",
            www,
        );
    }
    Ok(())
}

async fn oauth2_algorithms(t: &mut Trial<'_>) -> Outcome {
    let decl =
        t.ctx.plan.oauth2_decl.clone().ok_or_else(|| Stop::Skip("the agent advertises no oauth2 capability".into()))?;
    let key = SigningKey::generate().map_err(|e| Stop::Blocked(e.to_string()))?;
    let aud = t.ctx.agent_did().to_owned();
    for alg in ["HS256", "none", "RS256"] {
        let req = negotiate_for(t, &decl)
            .header("Authorization", format!("Bearer {}", jwt(&key, alg, "https://issuer.conformance.example", &aud)));
        let r = t.send(format!("NEGOTIATE {} with an alg {alg} bearer token", decl.name), req).await?;
        t.expect_error(&r, 401, "auth_invalid");
    }
    Ok(())
}

fn region_plan(t: &Trial<'_>) -> Result<crate::ctx::CapPlan, Stop> {
    let plan = t.ctx.plan.restricted.clone().map_err(Stop::Skip)?;
    t.uses(&plan);
    Ok(plan)
}

async fn region_enforced(t: &mut Trial<'_>) -> Outcome {
    let plan = region_plan(t)?;
    let body = negotiate_body(&plan.decl.name, &plan.decl.input_schema);
    let regions = plan.decl.region_restriction.clone();
    for (what, region) in [("without A2A-Region", None), ("from region zz-conformance-1", Some("zz-conformance-1"))] {
        let mut req = t.ctx.for_cap(&plan, "POST", "/negotiate").without("a2a-region").json(&body);
        if let Some(r) = region {
            req = req.header("A2A-Region", r);
        }
        let r = t.send(format!("NEGOTIATE {} {what}", plan.decl.name), req).await?;
        t.expect_error(&r, 403, "region_restricted");
        let allowed = r.error_details()["allowed_regions"].clone();
        t.check(allowed == json!(regions), format!("details.allowed_regions {regions:?}"), show(&allowed));
        let fb = r.json().map(|b| b["fallback_options"].clone()).unwrap_or(Value::Null);
        t.check(fb.is_array(), "fallback_options: an array", show(&fb));
    }
    let req = t.ctx.for_cap(&plan, "POST", "/negotiate").set("A2A-Region", "eu west!").json(&body);
    let r = t.send("NEGOTIATE with a malformed A2A-Region", req).await?;
    t.expect_error(&r, 400, "invalid_header");
    let req = t
        .ctx
        .for_cap(&plan, "POST", "/negotiate")
        .set("A2A-Region", format!("  {}  ", regions.first().cloned().unwrap_or_default()))
        .json(&body);
    let r = t.send("NEGOTIATE with an allowed region (blanks around it)", req).await?;
    t.expect_status(&r, 200);
    let neg = r.json().and_then(|b| b["negotiation_id"].as_str().map(str::to_owned)).unwrap_or_default();
    let req = super::execute_req(t, &plan, &neg, &plan.payload).without("a2a-region");
    let r = t.send("EXECUTE without A2A-Region", req).await?;
    t.expect_error(&r, 403, "region_restricted");
    Ok(())
}

async fn region_response_header(t: &mut Trial<'_>) -> Outcome {
    let plan = region_plan(t)?;
    let want = plan.decl.region_restriction.join(", ");
    let req =
        t.ctx.for_cap(&plan, "POST", "/negotiate").json(&negotiate_body(&plan.decl.name, &plan.decl.input_schema));
    let r = t.send(format!("NEGOTIATE {}", plan.decl.name), req).await?;
    let norm = |v: Option<&str>| v.map(|s| s.split(',').map(str::trim).collect::<Vec<_>>().join(", "));
    t.check(
        norm(r.header("a2a-region")).as_deref() == Some(want.as_str()),
        format!("A2A-Region: {want}"),
        format!("{:?}", r.header("a2a-region")),
    );
    let neg = r.json().and_then(|b| b["negotiation_id"].as_str().map(str::to_owned)).unwrap_or_default();
    let r = t.send("EXECUTE", super::execute_req(t, &plan, &neg, &plan.payload)).await?;
    t.check(
        norm(r.header("a2a-region")).as_deref() == Some(want.as_str()),
        format!("A2A-Region: {want}"),
        format!("{:?}", r.header("a2a-region")),
    );
    Ok(())
}

async fn auth_before_payload(t: &mut Trial<'_>) -> Outcome {
    let plan = region_plan(t)?;
    let neg = super::negotiate(t, &plan, &plan.decl.input_schema).await?;
    let req = super::execute_req(t, &plan, &neg.id, &json!([1])).without("a2a-region");
    let r = t.send("EXECUTE an invalid payload without A2A-Region", req).await?;
    t.expect_error(&r, 403, "region_restricted");
    Ok(())
}
