//! CORS: agents called from a browser (§5.2). The origin is `--origin` (default `https://app.conformance.example`).

use a2a_core::headers as h;

use super::applies::ALWAYS;
use super::list_covers;
use crate::check;
use crate::check::{Check, Outcome, Trial};
use crate::http::Resp;

pub(super) fn checks() -> Vec<Check> {
    vec![
        check!(
            "cors/discover-headers",
            ["DISC-2", "DISC-12"],
            Must,
            ALWAYS,
            "DISCOVER from a browser origin carries Access-Control-Allow-Origin, -Allow-Methods, -Allow-Headers, -Expose-Headers and -Max-Age with at least the protocol's methods and headers; without Origin, the same but for Access-Control-Allow-Origin and -Expose-Headers, which are absent",
            discover_headers
        ),
        check!(
            "cors/preflight",
            ["DISC-5"],
            Must,
            ALWAYS,
            "a CORS preflight on every path below the endpoint is answered 2xx with the Allow-* and Max-Age headers, without A2A-Version, A2A-Sender-ID or credentials",
            preflight
        ),
        check!(
            "cors/options-below-endpoint",
            ["DISC-13"],
            Must,
            ALWAYS,
            "OPTIONS on an endpoint below /a2a is never DISCOVER: bare and with A2A-Version and sender it is 204 with Allow listing its methods, and neither form nor a preflight carries A2A-Capabilities or A2A-Region; on a path that names no endpoint it is 404 not_found",
            options_below_endpoint
        ),
        check!(
            "cors/actual-responses",
            ["DISC-6"],
            Must,
            ALWAYS,
            "every response to a request carrying Origin, successes and errors, carries Access-Control-Allow-Origin and Access-Control-Expose-Headers",
            actual_responses
        ),
        check!(
            "cors/disallowed-origin",
            ["DISC-7"],
            May,
            ALWAYS,
            "an agent that restricts origins answers a disallowed one without CORS headers and otherwise as usual",
            disallowed_origin
        ),
    ]
}

/// Checks Access-Control-Allow-Origin for `origin`.
fn allow_origin(t: &mut Trial<'_>, r: &Resp, origin: &str) -> bool {
    let acao = r.header("access-control-allow-origin");
    let ok = match acao {
        Some("*") => true,
        Some(o) if o == origin => r.header_all("vary").iter().any(|v| v.to_ascii_lowercase().contains("origin")),
        _ => false,
    };
    t.check(
        ok,
        format!("Access-Control-Allow-Origin: * (or {origin} with Vary: Origin)"),
        format!("{acao:?}, vary {:?}", r.header_all("vary")),
    )
}

fn covers(t: &mut Trial<'_>, r: &Resp, header: &str, needed: &str) -> bool {
    let missing = list_covers(r.header(header), needed);
    t.check(
        missing.is_empty(),
        format!("{header} with at least {needed}"),
        match r.header(header) {
            None => "absent".to_owned(),
            Some(v) => format!("{v:?} (missing: {})", missing.join(", ")),
        },
    )
}

fn allow_headers(t: &mut Trial<'_>, r: &Resp) {
    covers(t, r, "access-control-allow-methods", "OPTIONS, POST, GET");
    covers(
        t,
        r,
        "access-control-allow-headers",
        "A2A-Version, A2A-Sender-ID, A2A-Negotiation-ID, A2A-Execution-ID, A2A-Signature, A2A-Api-Key, A2A-Region, Idempotency-Key, Authorization, Content-Type",
    );
    let max_age = r.header("access-control-max-age");
    t.check(
        max_age.is_some_and(|v| v.trim().parse::<u64>().is_ok()),
        "Access-Control-Max-Age: a number of seconds",
        format!("{max_age:?}"),
    );
}

const EXPOSE: &str = "A2A-Version, A2A-Sender-ID, A2A-Capabilities, A2A-Region, A2A-Negotiation-ID, A2A-Execution-ID, A2A-Signature, Location, Retry-After";

async fn discover_headers(t: &mut Trial<'_>) -> Outcome {
    let origin = t.ctx.opts.origin.clone();
    let req = t.ctx.request("OPTIONS", "").header("Origin", origin.clone());
    let r = t.send(format!("DISCOVER with Origin: {origin}"), req).await?;
    allow_origin(t, &r, &origin);
    allow_headers(t, &r);
    covers(t, &r, "access-control-expose-headers", EXPOSE);
    // DISC-12: without Origin there is no origin to allow: the two origin headers are absent, the others present.
    let r = t.send("DISCOVER without Origin", t.ctx.request("OPTIONS", "")).await?;
    for h in ["access-control-allow-origin", "access-control-expose-headers"] {
        t.check(r.header(h).is_none(), format!("no {h} (the request has no Origin)"), format!("{:?}", r.header(h)));
    }
    allow_headers(t, &r);
    Ok(())
}

async fn preflight(t: &mut Trial<'_>) -> Outcome {
    let origin = t.ctx.opts.origin.clone();
    for (path, method) in [
        ("", "OPTIONS"),
        ("/capabilities", "GET"),
        ("/negotiate", "POST"),
        ("/execute", "POST"),
        ("/confirm", "POST"),
        ("/result/did:web:conformance.example_1_aaaaaaaaaaaaaaaaaaaaaaaaaa", "GET"),
        ("/cancel", "POST"),
        ("/fallback", "POST"),
    ] {
        let req = t
            .ctx
            .bare("OPTIONS", path)
            .header("Origin", origin.clone())
            .header("Access-Control-Request-Method", method)
            .header("Access-Control-Request-Headers", "a2a-version,a2a-sender-id,a2a-signature,content-type");
        let r = t.send(format!("preflight of {method} /a2a{path}"), req).await?;
        t.check((200..300).contains(&r.status), "a 2xx status", r.summary());
        allow_origin(t, &r, &origin);
        allow_headers(t, &r);
        if path.is_empty() {
            t.check(
                r.header(h::A2A_CAPABILITIES).is_some(),
                "the full DISCOVER response (A2A-Capabilities) on /a2a",
                format!("{:?}", r.header(h::A2A_CAPABILITIES)),
            );
        }
    }
    Ok(())
}

async fn options_below_endpoint(t: &mut Trial<'_>) -> Outcome {
    for (path, method) in [
        ("/capabilities", "GET"),
        ("/negotiate", "POST"),
        ("/execute", "POST"),
        ("/confirm", "POST"),
        ("/result/did:web:conformance.example_1_aaaaaaaaaaaaaaaaaaaaaaaaaa", "GET"),
        ("/cancel", "POST"),
        ("/fallback", "POST"),
    ] {
        // DISC-13 holds "whether or not it is a preflight" and whatever headers come with it: bare, as a client
        // sends DISCOVER (A2A-Version and A2A-Sender-ID), and as a browser's preflight.
        let origin = t.ctx.opts.origin.clone();
        let forms = [
            (format!("OPTIONS /a2a{path} (not a preflight, no A2A headers)"), t.ctx.bare("OPTIONS", path)),
            (format!("OPTIONS /a2a{path} with A2A-Version and A2A-Sender-ID"), t.ctx.request("OPTIONS", path)),
            (
                format!("preflight of {method} /a2a{path}"),
                t.ctx
                    .bare("OPTIONS", path)
                    .header("Origin", origin)
                    .header("Access-Control-Request-Method", method)
                    .header("Access-Control-Request-Headers", "a2a-version,a2a-sender-id,content-type"),
            ),
        ];
        for (i, (title, req)) in forms.into_iter().enumerate() {
            let preflight = i == 2;
            let r = t.send(title, req).await?;
            if preflight {
                // DISC-5 has the preflight's status and headers (cors/preflight); here only: it is no DISCOVER.
                t.check((200..300).contains(&r.status), "a 2xx status", r.summary());
            } else {
                t.expect_status(&r, 204);
                let allow = r.header("allow").map(str::to_ascii_uppercase);
                t.check(
                    allow.as_deref().is_some_and(|a| a.contains(method) && a.contains("OPTIONS")),
                    format!("Allow listing {method} and OPTIONS"),
                    format!("{allow:?}"),
                );
            }
            t.check(
                r.header(h::A2A_CAPABILITIES).is_none() && r.header(h::A2A_REGION).is_none(),
                "no A2A-Capabilities or A2A-Region (only OPTIONS /a2a is DISCOVER)",
                format!("{:?} {:?}", r.header(h::A2A_CAPABILITIES), r.header(h::A2A_REGION)),
            );
        }
    }
    let r =
        t.send("OPTIONS /a2a/no-such-endpoint (not a preflight)", t.ctx.bare("OPTIONS", "/no-such-endpoint")).await?;
    t.expect_error(&r, 404, "not_found");
    Ok(())
}

async fn actual_responses(t: &mut Trial<'_>) -> Outcome {
    let origin = t.ctx.opts.origin.clone();
    let cases = [
        ("GET /a2a/capabilities (a success)", t.ctx.request("GET", "/capabilities")),
        (
            "NEGOTIATE without A2A-Version (an error)",
            t.ctx.request("POST", "/negotiate").without("a2a-version").json(&serde_json::json!({})),
        ),
        ("GET /a2a/nope (an unknown path)", t.ctx.request("GET", "/nope")),
    ];
    for (title, req) in cases {
        let r = t.send(title, req.header("Origin", origin.clone())).await?;
        allow_origin(t, &r, &origin);
        covers(t, &r, "access-control-expose-headers", EXPOSE);
    }
    Ok(())
}

async fn disallowed_origin(t: &mut Trial<'_>) -> Outcome {
    let plain = t.send("GET /a2a/capabilities without Origin", t.ctx.request("GET", "/capabilities")).await?;
    let other = "https://disallowed.conformance.invalid";
    let r = t
        .send(
            format!("GET /a2a/capabilities with Origin: {other}"),
            t.ctx.request("GET", "/capabilities").header("Origin", other),
        )
        .await?;
    match r.header("access-control-allow-origin") {
        Some(_) => {
            t.check(
                true,
                "either CORS headers (the origin is allowed) or none",
                "the origin is allowed: the agent does not restrict origins",
            );
        }
        None => {
            t.check(
                r.status == plain.status,
                format!("no CORS headers, otherwise as usual: status {}", plain.status),
                r.summary(),
            );
        }
    }
    Ok(())
}
