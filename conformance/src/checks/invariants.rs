//! Requirements on every response: checked over the transcript of the whole run, after every other check.

use a2a_core::error::{ErrorCode, ErrorKind};
use serde_json::Value;

use super::applies::ALWAYS;
use super::show;
use crate::check::{Check, Outcome, Stop, Trial};
use crate::ctx::Exchange;
use crate::run_fn;

macro_rules! after_all {
    ($id:literal, [$($req:literal),+], $level:ident, $title:literal, $f:path) => {
        Check {
            id: $id,
            requirements: &[$($req),+],
            level: crate::report::Level::$level,
            title: $title,
            applies: ALWAYS,
            after_all: true,
            run: run_fn!($f),
        }
    };
}

pub(super) fn checks() -> Vec<Check> {
    vec![
        after_all!(
            "responses/a2a-version",
            ["HDR-2"],
            Must,
            "every response of the run (errors, DISCOVER and preflights included) carries A2A-Version: 0.3",
            version
        ),
        after_all!(
            "responses/a2a-sender-id",
            ["HDR-7"],
            Must,
            "every response of the run carries A2A-Sender-ID with the agent's DID",
            sender
        ),
        after_all!(
            "responses/json",
            ["TR-6"],
            Must,
            "every response body of the run is JSON sent as Content-Type: application/json (DISCOVER and preflights have no body)",
            json_bodies
        ),
        after_all!(
            "responses/error-bodies",
            ["ERR-1", "ERR-4"],
            Must,
            "every error response of the run is an ErrorBody {error: {code, message, details?}, fallback_options?} with the HTTP status of the error table for its code",
            error_bodies
        ),
        after_all!(
            "responses/required-headers",
            ["ERR-3"],
            Must,
            "every 405 of the run carries Allow, every 429 and 503 Retry-After",
            required_headers
        ),
        after_all!(
            "responses/result-shape",
            ["ST-4"],
            Must,
            "every ResultResponse of the run has result exactly when succeeded and error (with an execution code) exactly when failed, timed_out or canceled",
            result_shape
        ),
        after_all!(
            "responses/clock",
            ["INT-11"],
            Should,
            "the agent's clock (its Date headers) is within 30 s of the suite's",
            clock
        ),
        after_all!(
            "responses/signatures",
            ["INT-5", "INT-10", "KEY-8"],
            Must,
            "every signed response of the run verifies (iss the agent, aud the requester, htm/htu of its request, sts its status) with a key of the agent's DID document, and no two signatures share an ECDSA nonce or a jti",
            signatures
        ),
        after_all!(
            "limits/still-alive",
            ["LIM-2"],
            Must,
            "after every malformed, oversize and hostile input of the run the agent still answers DISCOVER",
            still_alive
        ),
    ]
}

/// The exchanges with the agent itself (not the agent's DID document, not the suite's own host).
fn agent_exchanges(t: &Trial<'_>) -> Vec<Exchange> {
    let endpoint = t.ctx.endpoint.clone();
    t.ctx
        .transcript()
        .into_iter()
        .filter(|e| {
            e.url == endpoint
                || e.url.starts_with(&format!("{endpoint}/"))
                || e.url.starts_with(&format!("{endpoint}?"))
        })
        .filter(|e| e.response.is_some())
        .collect()
}

/// Records at most `limit` failures, each naming the check and the request.
fn scan(t: &mut Trial<'_>, expected: &str, mut bad: impl FnMut(&Exchange) -> Option<String>) {
    let exchanges = agent_exchanges(t);
    t.step(format!("{} responses of the run", exchanges.len()));
    let mut failures = 0;
    for e in &exchanges {
        if let Some(why) = bad(e) {
            failures += 1;
            if failures <= 10 {
                t.check(false, expected.to_owned(), format!("{} {} (in {}): {why}", e.method, e.url, e.check));
            }
        }
    }
    if failures > 10 {
        t.check(false, expected.to_owned(), format!("... and {} more responses", failures - 10));
    }
    if failures == 0 {
        t.check(true, expected.to_owned(), format!("all {} responses", exchanges.len()));
    }
}

async fn version(t: &mut Trial<'_>) -> Outcome {
    scan(t, "A2A-Version: 0.3", |e| {
        let r = e.response.as_ref()?;
        (r.header("a2a-version").map(str::trim) != Some("0.3"))
            .then(|| format!("{} with A2A-Version {:?}", r.status, r.header("a2a-version")))
    });
    Ok(())
}

async fn sender(t: &mut Trial<'_>) -> Outcome {
    let did = t.ctx.disc.agent_did.clone().ok_or_else(|| Stop::Blocked("DISCOVER gave no A2A-Sender-ID".into()))?;
    scan(t, &format!("A2A-Sender-ID: {did}"), |e| {
        let r = e.response.as_ref()?;
        (r.header("a2a-sender-id").map(str::trim) != Some(did.as_str()))
            .then(|| format!("{} with A2A-Sender-ID {:?}", r.status, r.header("a2a-sender-id")))
    });
    Ok(())
}

async fn json_bodies(t: &mut Trial<'_>) -> Outcome {
    scan(t, "a JSON body with Content-Type: application/json", |e| {
        let r = e.response.as_ref()?;
        if is_event_stream(e, r) {
            return None;
        }
        if r.body.is_empty() {
            return (e.method != "OPTIONS" && r.status != 204).then(|| format!("{} with no body", r.status));
        }
        let ct = r.header("content-type").unwrap_or("").to_ascii_lowercase();
        let mime = ct.split(';').next().unwrap_or("").trim().to_owned();
        if mime != "application/json" {
            return Some(format!("{} with Content-Type {ct:?}", r.status));
        }
        r.json().is_none().then(|| format!("{} with a body that is not JSON", r.status))
    });
    Ok(())
}

/// The two exceptions to TR-6: a streamed RESULT (STR-1, asked for with `A2A-Stream`) and the sessions' event
/// channel (ANN-3), each a `200 text/event-stream`.
fn is_event_stream(e: &Exchange, r: &crate::http::Resp) -> bool {
    let asked = e.request_headers.iter().any(|(n, _)| n == "a2a-stream")
        || url::Url::parse(&e.url).is_ok_and(|u| u.path().ends_with("/a2a/events"));
    r.status == 200 && asked && crate::sse::mime(r) == "text/event-stream"
}

fn error_body_problem(status: u16, v: &Value) -> Option<String> {
    let err = &v["error"];
    let (Some(code), Some(_)) = (err["code"].as_str(), err["message"].as_str()) else {
        return Some(format!("{status} whose body is not an ErrorBody: {}", show(v)));
    };
    if !v.is_object() || v.as_object().is_some_and(|o| o.keys().any(|k| k != "error" && k != "fallback_options")) {
        return Some(format!("{status} {code}: members other than error and fallback_options"));
    }
    if !v["fallback_options"].is_null() && !v["fallback_options"].is_array() {
        return Some(format!("{status} {code}: fallback_options is not an array"));
    }
    let known = ErrorCode(code.to_owned().into());
    match known.entry().map(|e| e.kind) {
        Some(ErrorKind::Http(s)) if s != status => {
            Some(format!("{code} answered with {status}; the error table says {s}"))
        }
        Some(ErrorKind::Execution) => Some(format!("{code} is an execution error code, not an HTTP error")),
        _ => None,
    }
}

async fn error_bodies(t: &mut Trial<'_>) -> Outcome {
    scan(t, "an ErrorBody with the status of the error table", |e| {
        let r = e.response.as_ref()?;
        if r.status < 400 {
            return None;
        }
        match r.json() {
            Some(v) => error_body_problem(r.status, &v),
            None => Some(format!(
                "{} with a body that is not JSON: {:?}",
                r.status,
                String::from_utf8_lossy(&r.body[..r.body.len().min(120)])
            )),
        }
    });
    Ok(())
}

async fn required_headers(t: &mut Trial<'_>) -> Outcome {
    scan(t, "Allow on 405, Retry-After on 429 and 503", |e| {
        let r = e.response.as_ref()?;
        match r.status {
            405 if r.header("allow").is_none() => Some("405 without Allow".into()),
            429 | 503 if r.header("retry-after").is_none() => Some(format!("{} without Retry-After", r.status)),
            _ => None,
        }
    });
    Ok(())
}

async fn result_shape(t: &mut Trial<'_>) -> Outcome {
    const EXECUTION_CODES: [&str; 5] =
        ["handler_failed", "timed_out", "canceled", "confirm_window_elapsed", "output_invalid"];
    scan(t, "result only when succeeded; error with an execution code only when failed, timed_out or canceled", |e| {
        let r = e.response.as_ref()?;
        let is_result =
            (e.method == "GET" && e.url.contains("/result/")) || (e.method == "POST" && e.url.ends_with("/cancel"));
        if !is_result || r.status != 200 {
            return None;
        }
        let b = r.json()?;
        let s = b["status"].as_str().unwrap_or("");
        let has_result = b.get("result").is_some_and(|x| !x.is_null());
        let has_error = b.get("error").is_some_and(|x| !x.is_null());
        let ok = match s {
            "succeeded" => has_result && !has_error,
            "failed" | "timed_out" | "canceled" => {
                !has_result && b["error"]["code"].as_str().is_some_and(|c| EXECUTION_CODES.contains(&c))
            }
            "received" | "accepted" | "running" => !has_result && !has_error,
            _ => false,
        };
        (!ok).then(|| format!("status {s:?} with result {} and error {}", has_result, show(&b["error"])))
    });
    Ok(())
}

async fn clock(t: &mut Trial<'_>) -> Outcome {
    let exchanges = agent_exchanges(t);
    t.step("Date headers of the run");
    let mut worst: Option<(i64, String)> = None;
    for e in &exchanges {
        let Some(r) = &e.response else { continue };
        let Some(date) = r.header("date") else { continue };
        let Ok(at) = time::OffsetDateTime::parse(date, &time::format_description::well_known::Rfc2822) else {
            continue;
        };
        // Compared with when the response arrived, not with the end of the run.
        let skew = (at.unix_timestamp() - e.at).abs();
        if worst.as_ref().is_none_or(|(w, _)| skew > *w) {
            worst = Some((skew, date.to_owned()));
        }
    }
    match worst {
        None => Err(Stop::Skip("the agent sends no Date header".into())),
        Some((skew, date)) => {
            t.check(skew <= 30, "within 30 s of the suite's clock", format!("{skew} s apart (Date: {date})"));
            Ok(())
        }
    }
}

async fn still_alive(t: &mut Trial<'_>) -> Outcome {
    let r = t.send("DISCOVER at the end of the run", t.ctx.request("OPTIONS", "")).await?;
    t.expect_status(&r, 204);
    Ok(())
}

async fn signatures(t: &mut Trial<'_>) -> Outcome {
    use a2a_core::integrity::{self, MessageParts};
    let signed: Vec<Exchange> = agent_exchanges(t)
        .into_iter()
        .filter(|e| e.response.as_ref().is_some_and(|r| r.header("a2a-signature").is_some()))
        .collect();
    if signed.is_empty() {
        return Err(Stop::Skip("the agent signs no responses".into()));
    }
    let did = t.ctx.disc.agent_did.clone().ok_or_else(|| Stop::Blocked("DISCOVER gave no A2A-Sender-ID".into()))?;
    let parsed = a2a_core::did::Did::parse(&did).map_err(|e| Stop::Blocked(e.to_string()))?;
    let url = parsed
        .document_url(&a2a_core::did::ResolveOptions::with_http_loopback())
        .map_err(|e| Stop::Blocked(e.to_string()))?;
    let r = t.setup(format!("GET {url} (the agent's keys)"), crate::http::Req::new("GET", url.to_string())).await?;
    let doc = a2a_core::did::DidDocument::parse(&r.body, &parsed);
    t.require(doc.is_ok(), "the agent's DID document", r.summary())?;
    let doc = doc.map_err(|e| Stop::Blocked(e.to_string()))?;
    t.step(format!("{} signed responses", signed.len()));
    let mut nonces = std::collections::HashSet::new();
    let mut jtis = std::collections::HashSet::new();
    for e in signed.iter().take(50) {
        let Some(resp) = &e.response else { continue };
        let token = resp.header("a2a-signature").unwrap_or("").to_owned();
        let target = crate::http::Req::new(&e.method, e.url.clone()).target();
        let headers: Vec<(&str, &str)> = resp.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let aud = e.request_headers.iter().find(|(n, _)| n == "a2a-sender-id").map_or("", |(_, v)| v.as_str());
        let parts = MessageParts {
            method: &e.method,
            target: &target,
            headers: &headers,
            body: &resp.body,
            status: Some(resp.status),
        };
        let verdict = integrity::prepare(&token, &parts, aud, crate::identity::unix_now()).and_then(|p| {
            let jwk =
                doc.find_signing_jwk(p.key_id()).map_err(|e| integrity::IntegrityError::Malformed(e.to_string()))?;
            let key = a2a_core::keys::VerifyingKey::from_jwk(jwk)?;
            p.finish(&key, &parts)
        });
        t.check(
            verdict.is_ok(),
            format!("a valid signature of {} {} ({})", e.method, e.url, resp.status),
            match verdict {
                Ok(_) => "verified".to_owned(),
                Err(err) => format!("{} ({})", err, err.code()),
            },
        );
        if let Some(sig) = token.rsplit('.').next().and_then(|s| a2a_core::jws::base64url_decode(s).ok()) {
            let r = sig.get(..32).map(<[u8]>::to_vec).unwrap_or_default();
            t.check(
                nonces.insert(r),
                "a fresh ECDSA nonce (r) for every signature",
                format!("r repeated in the response to {} {}", e.method, e.url),
            );
        }
        // INT-5: a jti is never reused (the agent's replay memory of its callers is keyed on it, INT-9).
        if let Ok(jws) = a2a_core::jws::decode_typed::<integrity::SignatureClaims>(&token) {
            let jti = jws.claims().jti.clone();
            t.check(
                jtis.insert(jti.clone()),
                "a fresh jti in every signature (INT-5)",
                format!("jti {jti:?} repeated in the response to {} {}", e.method, e.url),
            );
        }
    }
    Ok(())
}
