//! `A2A-Version`, `A2A-Sender-ID` and the other request headers (§3), and the did:web syntax an agent applies to
//! senders (§9.1.1). FALLBACK is the probe for most of them: it needs no capability and no credentials.

use serde_json::json;

use super::applies::{ALWAYS, IDEMPOTENCY, MAIN};
use super::{MISSING_CAPABILITY, main_plan};
use crate::check;
use crate::check::{Check, Outcome, Stop, Trial};
use crate::ctx::{CallerAuth, SENDER_A};
use crate::http::Req;

pub(super) fn checks() -> Vec<Check> {
    vec![
        check!(
            "version/missing",
            ["HDR-4", "HDR-3"],
            Must,
            ALWAYS,
            "a request without A2A-Version is answered 400 version_required",
            missing_version
        ),
        check!(
            "version/unsupported",
            ["HDR-4", "HDR-5"],
            Must,
            ALWAYS,
            "a request for another version is answered 400 unsupported_version with details.supported_versions listing \"0.3\"",
            unsupported_version
        ),
        check!(
            "version/syntax",
            ["HDR-5"],
            Must,
            ALWAYS,
            "blanks around the version are ignored; anything but exactly 0.3 (00.3, 0.03, 0.3.0, v0.3) is unsupported_version",
            version_syntax
        ),
        check!(
            "sender/missing",
            ["HDR-6"],
            Must,
            ALWAYS,
            "a request without A2A-Sender-ID is answered 400 sender_required",
            missing_sender
        ),
        check!(
            "sender/invalid-dids",
            ["HDR-6", "DID-1", "DID-2", "DID-3", "DID-4", "DID-5", "DID-6", "DID-7", "DID-8", "DID-11"],
            Must,
            ALWAYS,
            "an A2A-Sender-ID that is not a valid did:web DID (another method, upper case, non-ASCII, an IP address, a single label, %3a, a leading-zero port, `..`, another escape, blanks, over 512 bytes) is answered 400 invalid_sender",
            invalid_dids
        ),
        check!(
            "sender/valid-dids",
            ["DID-2", "DID-7"],
            Must,
            ALWAYS,
            "valid did:web DIDs (a port, path segments, punycode, a numeric path segment) are accepted as senders",
            valid_dids
        ),
        check!(
            "sender/compared-byte-for-byte",
            ["DID-9", "NEG-4"],
            Must,
            MAIN,
            "DIDs are compared byte for byte: did:web:X%3A443 is not did:web:X, and cannot use its negotiation",
            byte_for_byte
        ),
        check!(
            "headers/malformed-negotiation-id",
            ["HDR-1"],
            Must,
            ALWAYS,
            "a malformed A2A-Negotiation-ID (a blank, a forbidden character, 129 characters) is answered 400 invalid_header naming the header",
            malformed_negotiation_id
        ),
        check!(
            "headers/malformed-idempotency-key",
            ["HDR-1"],
            Must,
            IDEMPOTENCY,
            "a malformed Idempotency-Key is answered 400 invalid_header naming the header",
            malformed_idempotency_key
        ),
        check!(
            "headers/trace-context",
            ["HDR-9"],
            Should,
            ALWAYS,
            "requests carrying W3C traceparent and tracestate are accepted",
            trace_context
        ),
    ]
}

/// A FALLBACK request (needs no capability and no credentials).
fn fallback(t: &Trial<'_>) -> Req {
    t.ctx.request("POST", "/fallback").json(&json!({"target_capability": MISSING_CAPABILITY}))
}

async fn missing_version(t: &mut Trial<'_>) -> Outcome {
    let r = t.send("FALLBACK without A2A-Version", fallback(t).without("a2a-version")).await?;
    t.expect_error(&r, 400, "version_required");
    let req =
        t.ctx.request("GET", "/result/did:web:conformance.example_1_aaaaaaaaaaaaaaaaaaaaaaaaaa").without("a2a-version");
    let r = t.send("RESULT without A2A-Version", req).await?;
    t.expect_error(&r, 400, "version_required");
    let req = t
        .ctx
        .request("POST", "/negotiate")
        .without("a2a-version")
        .json(&json!({"target_capability": MISSING_CAPABILITY, "proposed_schema": {"type": "object"}}));
    let r = t.send("NEGOTIATE without A2A-Version", req).await?;
    t.expect_error(&r, 400, "version_required");
    Ok(())
}

async fn unsupported_version(t: &mut Trial<'_>) -> Outcome {
    for v in ["0.4", "1.0", "0.2"] {
        let r = t.send(format!("FALLBACK with A2A-Version: {v}"), fallback(t).set("A2A-Version", v)).await?;
        t.expect_error(&r, 400, "unsupported_version");
        let supported = r.error_details()["supported_versions"].clone();
        t.check(
            supported.as_array().is_some_and(|a| a.iter().any(|x| x == "0.3")),
            "details.supported_versions listing \"0.3\"",
            super::show(&supported),
        );
    }
    Ok(())
}

async fn version_syntax(t: &mut Trial<'_>) -> Outcome {
    for v in [" 0.3", "0.3 ", "\t0.3\t"] {
        let r = t.send(format!("FALLBACK with A2A-Version {v:?}"), fallback(t).set("A2A-Version", v)).await?;
        t.check(r.status == 200, "200 (blanks around the value are ignored)", r.summary());
    }
    for v in ["00.3", "0.03", "0.3.0", "v0.3", "0.3 beta", "0", "0."] {
        let r = t.send(format!("FALLBACK with A2A-Version {v:?}"), fallback(t).set("A2A-Version", v)).await?;
        t.expect_error(&r, 400, "unsupported_version");
    }
    Ok(())
}

async fn missing_sender(t: &mut Trial<'_>) -> Outcome {
    let r = t.send("FALLBACK without A2A-Sender-ID", fallback(t).without("a2a-sender-id")).await?;
    t.expect_error(&r, 400, "sender_required");
    let req = t
        .ctx
        .request("GET", "/result/did:web:conformance.example_1_aaaaaaaaaaaaaaaaaaaaaaaaaa")
        .without("a2a-sender-id");
    let r = t.send("RESULT without A2A-Sender-ID", req).await?;
    t.expect_error(&r, 400, "sender_required");
    Ok(())
}

async fn invalid_dids(t: &mut Trial<'_>) -> Outcome {
    let long = format!("did:web:example.com:{}", "a".repeat(520));
    let cases: Vec<(&str, String)> = vec![
        ("another DID method (DID-1)", "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK".into()),
        ("not a DID", "caller.example.com".into()),
        ("upper-case host (DID-3)", "did:web:Example.com".into()),
        ("an IP address host (DID-4)", "did:web:127.0.0.1%3A8080".into()),
        ("a numeric last label (DID-4)", "did:web:example.123".into()),
        ("a single label (DID-5)", "did:web:example".into()),
        ("a non-ASCII host (DID-6)", "did:web:bücher.example".into()),
        ("a lower-case %3a (DID-7)", "did:web:example.com%3a8443".into()),
        ("a port with a leading zero (DID-2)", "did:web:example.com%3A08443".into()),
        ("a `..` path segment (DID-2)", "did:web:example.com:..".into()),
        ("another percent-escape (DID-7)", "did:web:example.com%2Fuser".into()),
        ("an empty host (DID-2)", "did:web:".into()),
        ("more than 512 bytes (DID-8)", long),
    ];
    for (what, did) in cases {
        let r = t.send(format!("FALLBACK from {what}"), fallback(t).set("A2A-Sender-ID", did)).await?;
        t.expect_error(&r, 400, "invalid_sender");
    }
    Ok(())
}

async fn valid_dids(t: &mut Trial<'_>) -> Outcome {
    for did in [
        "did:web:example.com",
        "did:web:example.com%3A8443:user:alice",
        "did:web:localhost%3A8080",
        "did:web:xn--bcher-kva.example",
        "did:web:example.com:8443",
        "did:web:w3c-ccg.github.io:user:alice",
    ] {
        let r = t.send(format!("FALLBACK from {did}"), fallback(t).set("A2A-Sender-ID", did)).await?;
        t.check(r.status == 200, "200 (a valid did:web sender)", r.summary());
    }
    Ok(())
}

async fn byte_for_byte(t: &mut Trial<'_>) -> Outcome {
    let plan = main_plan(t)?;
    if !matches!(plan.auth, CallerAuth::None) {
        return Err(Stop::Skip("the only drivable capability needs credentials bound to one sender".into()));
    }
    let neg = super::negotiate(t, &plan, &plan.decl.input_schema).await?;
    let twin = format!("{}%3A443", SENDER_A.split(':').take(3).collect::<Vec<_>>().join(":"));
    let req = super::execute_req(t, &plan, &neg.id, &plan.payload).set("A2A-Sender-ID", twin.clone());
    let r = t.send(format!("EXECUTE as {twin} with {SENDER_A}'s negotiation"), req).await?;
    t.expect_error(&r, 404, "unknown_negotiation");
    Ok(())
}

async fn malformed_negotiation_id(t: &mut Trial<'_>) -> Outcome {
    for (what, id) in
        [("a blank", "n 1".to_owned()), ("a slash", "n/1".to_owned()), ("129 characters", "n".repeat(129))]
    {
        let req = t.ctx.request("POST", "/execute").header("A2A-Negotiation-ID", id).json(&json!({}));
        let r = t.send(format!("EXECUTE with an A2A-Negotiation-ID of {what}"), req).await?;
        t.expect_error(&r, 400, "invalid_header");
        let named = r.error_details()["header"].as_str().map(str::to_ascii_lowercase);
        t.check(
            named.as_deref() == Some("a2a-negotiation-id"),
            "details.header: A2A-Negotiation-ID",
            format!("{:?}", r.error_details()["header"]),
        );
    }
    Ok(())
}

async fn malformed_idempotency_key(t: &mut Trial<'_>) -> Outcome {
    if !t.ctx.disc.has_feature("idempotency") {
        return Err(Stop::Skip("the agent does not list idempotency".into()));
    }
    let plan = main_plan(t)?;
    let neg = super::negotiate(t, &plan, &plan.decl.input_schema).await?;
    for (what, key) in [("a blank", "k 1".to_owned()), ("129 characters", "k".repeat(129))] {
        let req = super::execute_req(t, &plan, &neg.id, &plan.payload).header("Idempotency-Key", key);
        let r = t.send(format!("EXECUTE with an Idempotency-Key of {what}"), req).await?;
        t.expect_error(&r, 400, "invalid_header");
        let named = r.error_details()["header"].as_str().map(str::to_ascii_lowercase);
        t.check(
            named.as_deref() == Some("idempotency-key"),
            "details.header: Idempotency-Key",
            format!("{:?}", r.error_details()["header"]),
        );
    }
    Ok(())
}

async fn trace_context(t: &mut Trial<'_>) -> Outcome {
    let req = fallback(t)
        .header("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        .header("tracestate", "conformance=1");
    let r = t.send("FALLBACK with traceparent and tracestate", req).await?;
    t.expect_status(&r, 200);
    Ok(())
}
