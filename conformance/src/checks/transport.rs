//! Transport (§3.1), malformed requests, errors of the framework (§12) and limits (§13).

use serde_json::{Value, json};

use super::MISSING_CAPABILITY;
use super::applies::ALWAYS;
use crate::check;
use crate::check::{Check, Outcome, Stop, Trial};
use crate::http::Req;

pub(super) fn checks() -> Vec<Check> {
    vec![
        check!(
            "transport/endpoints-served",
            ["TR-1"],
            Must,
            ALWAYS,
            "every endpoint of §2 (capabilities, negotiate, execute, confirm, result, fallback) is served: none answers not_found or method_not_allowed to its own method",
            endpoints_served
        ),
        check!(
            "transport/content-type",
            ["TR-5"],
            Must,
            ALWAYS,
            "a POST body sent as another content type (or with none) is answered 415 unsupported_media_type; application/json with charset=utf-8 is accepted",
            content_type
        ),
        check!(
            "transport/invalid-json",
            ["TR-7", "JCS-2"],
            Must,
            ALWAYS,
            "a body that is not well-formed JSON is answered 400 invalid_json",
            invalid_json
        ),
        check!(
            "transport/invalid-request",
            ["TR-7"],
            Must,
            ALWAYS,
            "well-formed JSON that is not the expected message (a member missing or of the wrong type) is answered 400 invalid_request whose details name the member",
            invalid_request
        ),
        check!(
            "transport/unknown-members",
            ["TR-8"],
            Must,
            ALWAYS,
            "NegotiateRequest, ExecutionRef and FallbackRequest with an unknown member are answered 400 invalid_request",
            unknown_members
        ),
        check!(
            "errors/unknown-path",
            ["ERR-4", "ERR-1"],
            Must,
            ALWAYS,
            "an unknown path under the endpoint is answered 404 not_found with an ErrorBody (no HTML or plain-text page)",
            unknown_path
        ),
        check!(
            "errors/method-not-allowed",
            ["ERR-3", "ERR-4"],
            Must,
            ALWAYS,
            "a wrong method on an endpoint is answered 405 method_not_allowed with an Allow header and an ErrorBody",
            method_not_allowed
        ),
        check!(
            "limits/oversize-body",
            ["LIM-1", "LIM-3", "ERR-4"],
            Must,
            ALWAYS,
            "a body one byte over the announced max_body_bytes is answered 413 payload_too_large with details.limit_bytes",
            oversize_body
        ),
        check!(
            "limits/oversize-headers",
            ["LIM-1"],
            Must,
            ALWAYS,
            "80 request headers of 256 bytes (20 KiB) are answered 431 headers_too_large",
            oversize_headers
        ),
    ]
}

async fn endpoints_served(t: &mut Trial<'_>) -> Outcome {
    let cases: Vec<(&str, Req)> = vec![
        ("GET /a2a/capabilities", t.ctx.request("GET", "/capabilities")),
        ("POST /a2a/negotiate", t.ctx.request("POST", "/negotiate").json(&json!({}))),
        ("POST /a2a/execute", t.ctx.request("POST", "/execute").json(&json!({}))),
        ("POST /a2a/confirm", t.ctx.request("POST", "/confirm").json(&json!({}))),
        (
            "GET /a2a/result/{id}",
            t.ctx.request("GET", "/result/did:web:conformance.example_1_aaaaaaaaaaaaaaaaaaaaaaaaaa"),
        ),
        (
            "POST /a2a/fallback",
            t.ctx.request("POST", "/fallback").json(&json!({"target_capability": MISSING_CAPABILITY})),
        ),
    ];
    for (title, req) in cases {
        let r = t.send(title, req).await?;
        let code = r.error_code();
        t.check(
            r.status != 405 && code.as_deref() != Some("not_found") && code.as_deref() != Some("method_not_allowed"),
            "the endpoint exists (any answer but not_found / method_not_allowed)",
            r.summary(),
        );
    }
    Ok(())
}

fn fallback_body() -> Vec<u8> {
    serde_json::to_vec(&json!({"target_capability": MISSING_CAPABILITY})).unwrap_or_default()
}

async fn content_type(t: &mut Trial<'_>) -> Outcome {
    for ct in [Some("text/plain"), Some("application/x-www-form-urlencoded"), None] {
        let mut req = t.ctx.request("POST", "/fallback").body(fallback_body());
        if let Some(ct) = ct {
            req = req.header("Content-Type", ct);
        }
        let r = t.send(format!("FALLBACK with Content-Type {ct:?}"), req).await?;
        t.expect_error(&r, 415, "unsupported_media_type");
    }
    let req = t
        .ctx
        .request("POST", "/fallback")
        .header("Content-Type", "application/json; charset=utf-8")
        .body(fallback_body());
    let r = t.send("FALLBACK with Content-Type: application/json; charset=utf-8", req).await?;
    t.expect_status(&r, 200);
    Ok(())
}

async fn invalid_json(t: &mut Trial<'_>) -> Outcome {
    for (path, body) in [
        ("/fallback", &b"{\"target_capability\": "[..]),
        ("/fallback", &b"{'target_capability': 'x'}"[..]),
        ("/negotiate", &b"not json at all"[..]),
        ("/confirm", &b"{\"execution_id\": \"x\",}"[..]),
        ("/fallback", &b"{\"target_capability\": \"a_b\"} /* comment */"[..]),
        ("/fallback", &b"{\"target_capability\": \"a_b\"} {}"[..]),
    ] {
        let req = t.ctx.request("POST", path).header("Content-Type", "application/json").body(body.to_vec());
        let r = t.send(format!("POST /a2a{path} with {:?}", String::from_utf8_lossy(body)), req).await?;
        t.expect_error(&r, 400, "invalid_json");
    }
    Ok(())
}

fn names_member(details: &Value, member: &str) -> bool {
    match details {
        Value::String(s) => s.contains(member),
        Value::Array(a) => a.iter().any(|v| names_member(v, member)),
        Value::Object(o) => o.values().any(|v| names_member(v, member)),
        _ => false,
    }
}

async fn invalid_request(t: &mut Trial<'_>) -> Outcome {
    for (path, body, member) in [
        ("/fallback", json!({}), "target_capability"),
        ("/fallback", json!({"target_capability": 5}), "target_capability"),
        ("/negotiate", json!({"target_capability": MISSING_CAPABILITY}), "proposed_schema"),
        ("/confirm", json!({"execution_id": ["x"]}), "execution_id"),
    ] {
        let r = t.send(format!("POST /a2a{path} with {body}"), t.ctx.request("POST", path).json(&body)).await?;
        t.expect_error(&r, 400, "invalid_request");
        let details = r.error_details();
        t.check(names_member(&details, member), format!("details naming the member {member:?}"), super::show(&details));
    }
    Ok(())
}

async fn unknown_members(t: &mut Trial<'_>) -> Outcome {
    for (path, body) in [
        (
            "/negotiate",
            json!({"target_capability": MISSING_CAPABILITY, "proposed_schema": {"type": "object"}, "probe_unknown": 1}),
        ),
        (
            "/confirm",
            json!({"execution_id": "did:web:conformance.example_1_aaaaaaaaaaaaaaaaaaaaaaaaaa", "probe_unknown": 1}),
        ),
        ("/fallback", json!({"target_capability": MISSING_CAPABILITY, "probe_unknown": 1})),
    ] {
        let r =
            t.send(format!("POST /a2a{path} with an unknown member"), t.ctx.request("POST", path).json(&body)).await?;
        t.expect_error(&r, 400, "invalid_request");
    }
    if t.ctx.disc.has_feature("cancel") {
        let body =
            json!({"execution_id": "did:web:conformance.example_1_aaaaaaaaaaaaaaaaaaaaaaaaaa", "probe_unknown": 1});
        let r = t.send("POST /a2a/cancel with an unknown member", t.ctx.request("POST", "/cancel").json(&body)).await?;
        t.expect_error(&r, 400, "invalid_request");
    }
    Ok(())
}

fn is_error_body(v: &Value) -> bool {
    v["error"]["code"].is_string() && v["error"]["message"].is_string()
}

async fn unknown_path(t: &mut Trial<'_>) -> Outcome {
    for path in ["/nope", "/negotiate/extra", "/result"] {
        let r = t.send(format!("GET /a2a{path}"), t.ctx.request("GET", path)).await?;
        t.check(r.status == 404 || r.status == 405, "404 (or 405 for a known path)", r.summary());
        let body = r.json().unwrap_or(Value::Null);
        t.check(is_error_body(&body), "an ErrorBody {\"error\": {\"code\", \"message\"}}", r.summary());
        if path == "/nope" {
            t.expect_error(&r, 404, "not_found");
        }
    }
    Ok(())
}

async fn method_not_allowed(t: &mut Trial<'_>) -> Outcome {
    for (method, path, needs) in
        [("GET", "/negotiate", "POST"), ("DELETE", "/capabilities", "GET"), ("PUT", "/confirm", "POST")]
    {
        let r = t.send(format!("{method} /a2a{path}"), t.ctx.request(method, path)).await?;
        t.expect_error(&r, 405, "method_not_allowed");
        let allow = r.header("allow");
        t.check(
            allow.is_some_and(|a| a.to_ascii_uppercase().contains(needs)),
            format!("an Allow header listing {needs}"),
            format!("{allow:?}"),
        );
    }
    Ok(())
}

async fn oversize_body(t: &mut Trial<'_>) -> Outcome {
    let Some(limit) = t.ctx.disc.limits.as_ref().map(|l| l.max_body_bytes) else {
        return Err(Stop::Skip("the agent announces no limits.max_body_bytes".into()));
    };
    if limit > 64 * 1024 * 1024 {
        return Err(Stop::Skip(format!("the announced max_body_bytes ({limit}) is above the 64 MiB the suite sends")));
    }
    let prefix = format!("{{\"target_capability\":\"{MISSING_CAPABILITY}\",\"reason\":\"");
    let pad = (limit as usize + 1).saturating_sub(prefix.len() + 2);
    let mut body = prefix.into_bytes();
    body.extend(std::iter::repeat_n(b'x', pad));
    body.extend_from_slice(b"\"}");
    let req = t.ctx.request("POST", "/fallback").header("Content-Type", "application/json").body(body.clone());
    match t.try_send(format!("FALLBACK with a body of {} bytes (limit {limit})", body.len()), req).await {
        Ok(r) => {
            t.expect_error(&r, 413, "payload_too_large");
            let lb = r.error_details()["limit_bytes"].clone();
            t.check(lb.is_u64(), "details.limit_bytes", super::show(&lb));
        }
        Err(e) => {
            let hint = "the agent closed the connection before the suite could read an answer; read and drop the rest \
                        of an oversize body before closing (LIM-3)";
            t.check(false, "413 payload_too_large", format!("no response: {e} ({hint})"));
        }
    }
    Ok(())
}

async fn oversize_headers(t: &mut Trial<'_>) -> Outcome {
    let mut req = t.ctx.request("POST", "/fallback").json(&json!({"target_capability": MISSING_CAPABILITY}));
    for i in 0..80 {
        req = req.header(&format!("x-conformance-padding-{i}"), "p".repeat(256));
    }
    match t.try_send("FALLBACK with 80 headers of 256 bytes", req).await {
        Ok(r) => {
            t.expect_status(&r, 431);
            if !r.body.is_empty() {
                t.check(
                    r.error_code().as_deref() == Some("headers_too_large"),
                    "error.code \"headers_too_large\"",
                    r.summary(),
                );
            }
        }
        Err(e) => {
            t.check(false, "431 headers_too_large", format!("no response: {e}"));
        }
    }
    Ok(())
}
