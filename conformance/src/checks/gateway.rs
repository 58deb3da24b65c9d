//! Gateways (§15): what a caller can see of a gateway's routing, forwarding, edge policy and versions, run when the
//! target is declared a gateway (`--gateway`); and what every agent does with a forwarding header from a sender it
//! does not trust as a gateway (GW-9), run against agents.

use serde_json::{Value, json};

use super::{MISSING_CAPABILITY, execute_req, main_plan, negotiate, result_path, show, wait_terminal};
use crate::check;
use crate::check::{Check, Outcome, Stop, Trial};

/// When a check applies: the target is a gateway.
pub(crate) const GATEWAY: &str = "the target is a gateway (--gateway)";
/// When a check applies: the target is an agent.
pub(crate) const AGENT: &str = "the target is an agent, not a gateway (without --gateway)";

/// How many full handshakes `gateway/routes-follow` makes: with agents behind the gateway balanced per negotiation,
/// a step sent to the wrong agent would fail one of them.
const ROUNDS: usize = 4;

pub(super) fn checks() -> Vec<Check> {
    vec![
        check!(
            "gateway/routes-follow",
            ["GW-2", "GW-6"],
            Must,
            GATEWAY,
            "every EXECUTE, CONFIRM and RESULT reaches the agent holding its negotiation or execution (several handshakes in a row succeed), and ids the gateway never issued are answered 404 unknown_negotiation / unknown_execution",
            routes_follow
        ),
        check!(
            "gateway/own-sender-id",
            ["GW-7"],
            Should,
            GATEWAY,
            "the gateway answers under its own DID: A2A-Sender-ID of DISCOVER, of the capabilities document's agent.id and of every step's answer are the same",
            own_sender_id
        ),
        check!(
            "gateway/forwarded-sender-removed",
            ["GW-8"],
            Must,
            GATEWAY,
            "A2A-Forwarded-Sender and A2A-Forwarded-Verified sent by a caller are removed, not honoured: the negotiation belongs to the caller's own A2A-Sender-ID",
            forwarded_removed
        ),
        check!(
            "agent/forwarded-sender-refused",
            ["GW-9"],
            Must,
            AGENT,
            "a request carrying A2A-Forwarded-Sender from a sender that is not a trusted gateway is answered 403 forbidden",
            forwarded_refused
        ),
        check!(
            "gateway/date-skew",
            ["GW-10"],
            Should,
            GATEWAY,
            "an unsigned request whose Date header is 60 s off the gateway's clock is refused 401 clock_skew before it reaches an agent; one with the current Date is served",
            date_skew
        ),
        check!(
            "gateway/ambiguous-framing",
            ["GW-16"],
            Must,
            GATEWAY,
            "a FALLBACK whose body is delimited two ways (Content-Length and Transfer-Encoding: chunked; two different Content-Length values) is refused 400 invalid_request and its connection closed (request smuggling)",
            ambiguous_framing
        ),
        check!(
            "gateway/unsupported-version",
            ["GW-11"],
            Must,
            GATEWAY,
            "a version the gateway neither speaks nor translates is answered 400 unsupported_version, details.supported_versions listing 0.3",
            unsupported_version
        ),
    ]
}

fn gateway_only(t: &Trial<'_>) -> Outcome {
    if t.ctx.opts.gateway { Ok(()) } else { Err(Stop::Skip("the target is not declared a gateway (--gateway)".into())) }
}

async fn routes_follow(t: &mut Trial<'_>) -> Outcome {
    gateway_only(t)?;
    let plan = main_plan(t)?;
    for round in 1..=ROUNDS {
        let neg = negotiate(t, &plan, &plan.decl.input_schema).await?;
        // GW-2: a negotiation the gateway issued reaches its agent; a 404 here is the gateway's routing, not a
        // preparation that failed.
        let r = t.send(format!("EXECUTE #{round}"), execute_req(t, &plan, &neg.id, &plan.payload)).await?;
        let exe = r.json().and_then(|b| b["execution_id"].as_str().map(str::to_owned)).unwrap_or_default();
        t.ensure(
            r.status == 201 && !exe.is_empty(),
            format!("201 with an execution_id: EXECUTE #{round} reaches the agent holding negotiation {}", neg.id),
            r.summary(),
        )?;
        let r = t
            .send(
                format!("CONFIRM #{round}"),
                t.ctx.for_cap(&plan, "POST", "/confirm").json(&super::execution_ref(&exe)),
            )
            .await?;
        t.expect_status(&r, 202);
        let (_, last) = wait_terminal(t, &plan, &exe).await?;
        t.check(
            last["execution_id"] == exe.as_str() && super::is_terminal(last["status"].as_str().unwrap_or("")),
            format!("RESULT #{round}: execution {exe} in a terminal state"),
            show(&last),
        );
    }
    let r = t
        .send(
            "EXECUTE under a negotiation id never issued",
            execute_req(t, &plan, "n_never_issued_by_this_gateway", &plan.payload),
        )
        .await?;
    t.expect_error(&r, 404, "unknown_negotiation");
    let unknown = format!("{}_1_aaaaaaaaaaaaaaaaaaaaaaaaaa", plan.sender());
    let r =
        t.send("RESULT of an execution id never issued", t.ctx.for_cap(&plan, "GET", &result_path(&unknown))).await?;
    t.expect_error(&r, 404, "unknown_execution");
    Ok(())
}

async fn own_sender_id(t: &mut Trial<'_>) -> Outcome {
    gateway_only(t)?;
    let did = t.ctx.agent_did().to_owned();
    t.require(!did.is_empty(), "DISCOVER's A2A-Sender-ID", "none")?;
    let doc_id = t.ctx.disc.doc.as_ref().map(|d| d["agent"]["id"].clone()).unwrap_or(Value::Null);
    t.check(doc_id == did.as_str(), format!("agent.id {did}"), format!("{doc_id}"));
    let plan = main_plan(t)?;
    let neg = negotiate(t, &plan, &plan.decl.input_schema).await?;
    let r = t.send("EXECUTE", execute_req(t, &plan, &neg.id, &plan.payload)).await?;
    t.check(
        r.header("A2A-Sender-ID") == Some(did.as_str()),
        format!("A2A-Sender-ID {did}"),
        format!("{:?}", r.header("A2A-Sender-ID")),
    );
    let r = t
        .send("FALLBACK", t.ctx.request("POST", "/fallback").json(&json!({"target_capability": MISSING_CAPABILITY})))
        .await?;
    t.check(
        r.header("A2A-Sender-ID") == Some(did.as_str()),
        format!("A2A-Sender-ID {did}"),
        format!("{:?}", r.header("A2A-Sender-ID")),
    );
    Ok(())
}

const CLAIMED: &str = "did:web:forwarded.conformance.example";

/// A NEGOTIATE of the plan's capability claiming to forward [`CLAIMED`] (`A2A-Forwarded-Verified: verified`).
fn forwarding_negotiate(t: &Trial<'_>, plan: &crate::ctx::CapPlan, verified: &str) -> crate::http::Req {
    let body = super::negotiate_body(&plan.decl.name, &plan.decl.input_schema);
    t.ctx
        .for_cap(plan, "POST", "/negotiate")
        .header("A2A-Forwarded-Sender", CLAIMED)
        .header("A2A-Forwarded-Verified", verified)
        .json(&body)
}

async fn forwarded_removed(t: &mut Trial<'_>) -> Outcome {
    gateway_only(t)?;
    let plan = main_plan(t)?;
    let req = forwarding_negotiate(t, &plan, "true");
    let r = t.send(format!("NEGOTIATE claiming to forward {CLAIMED}"), req).await?;
    t.expect_status(&r, 200);
    let id = r.json().and_then(|b| b["negotiation_id"].as_str().map(str::to_owned));
    t.require(id.is_some(), "a negotiation_id", r.summary())?;
    let id = id.unwrap_or_default();
    let r = t
        .send(
            format!("EXECUTE as {} (the caller, not the claimed sender)", plan.sender()),
            execute_req(t, &plan, &id, &plan.payload),
        )
        .await?;
    t.expect_status(&r, 201);
    let exe = r.json().and_then(|b| b["execution_id"].as_str().map(str::to_owned)).unwrap_or_default();
    t.check(!exe.starts_with(CLAIMED), format!("an execution id not naming {CLAIMED} (EID-2)"), exe);
    Ok(())
}

async fn forwarded_refused(t: &mut Trial<'_>) -> Outcome {
    if t.ctx.opts.gateway {
        return Err(Stop::Skip("the target is a gateway, which removes forwarding headers (GW-8)".into()));
    }
    let plan = main_plan(t)?;
    let req = forwarding_negotiate(t, &plan, "false");
    let r = t.send(format!("NEGOTIATE from {} claiming to forward {CLAIMED}", plan.sender()), req).await?;
    t.expect_error(&r, 403, "forbidden");
    Ok(())
}

fn http_date(offset_s: i64) -> String {
    let t = time::OffsetDateTime::now_utc() + time::Duration::seconds(offset_s);
    let f = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
    );
    t.format(&f).unwrap_or_default()
}

async fn date_skew(t: &mut Trial<'_>) -> Outcome {
    gateway_only(t)?;
    let body = json!({"target_capability": MISSING_CAPABILITY});
    for offset in [-60, 60] {
        let req = t.ctx.request("POST", "/fallback").header("Date", http_date(offset)).json(&body);
        let r = t.send(format!("FALLBACK with a Date {offset:+} s off"), req).await?;
        t.expect_error(&r, 401, "clock_skew");
    }
    let req = t.ctx.request("POST", "/fallback").header("Date", http_date(0)).json(&body);
    let r = t.send("FALLBACK with the current Date", req).await?;
    t.expect_status(&r, 200);
    Ok(())
}

async fn unsupported_version(t: &mut Trial<'_>) -> Outcome {
    gateway_only(t)?;
    let req = t
        .ctx
        .request("POST", "/fallback")
        .set("A2A-Version", "9.9")
        .json(&json!({"target_capability": MISSING_CAPABILITY}));
    let r = t.send("FALLBACK in version 9.9", req).await?;
    t.expect_error(&r, 400, "unsupported_version");
    let versions = r.error_details()["supported_versions"].clone();
    t.check(
        versions.as_array().is_some_and(|a| a.iter().any(|v| v == a2a_core::PROTOCOL_VERSION)),
        format!("details.supported_versions listing {}", a2a_core::PROTOCOL_VERSION),
        show(&versions),
    );
    Ok(())
}

/// What a raw HTTP/1.1 exchange gave: the status, the error code of a JSON body, whether the connection was closed
/// after the answer.
struct RawAnswer {
    status: u16,
    code: String,
    closed: bool,
    text: String,
}

/// Sends `message` on a new connection to the endpoint's host and reads until the connection closes, 64 KiB or 5 s.
async fn raw_exchange(host: &str, port: u16, message: &[u8]) -> Result<RawAnswer, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let connect = tokio::net::TcpStream::connect((host, port));
    let mut stream = tokio::time::timeout(std::time::Duration::from_secs(10), connect)
        .await
        .map_err(|_| "no connection within 10 s".to_owned())?
        .map_err(|e| format!("cannot connect: {e}"))?;
    stream.write_all(message).await.map_err(|e| format!("cannot send: {e}"))?;
    let mut got = Vec::new();
    let mut closed = false;
    let until = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    while got.len() < 64 * 1024 {
        let mut chunk = [0u8; 4096];
        match tokio::time::timeout_at(until, stream.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                closed = true;
                break;
            }
            Ok(Ok(n)) => got.extend_from_slice(&chunk[..n]),
            Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let code = serde_json::from_str::<Value>(body.trim())
        .ok()
        .and_then(|v| v["error"]["code"].as_str().map(str::to_owned))
        .unwrap_or_default();
    Ok(RawAnswer { status, code, closed, text })
}

async fn ambiguous_framing(t: &mut Trial<'_>) -> Outcome {
    gateway_only(t)?;
    let url = url::Url::parse(&t.ctx.endpoint).map_err(|e| Stop::Skip(format!("the endpoint: {e}")))?;
    if url.scheme() != "http" {
        return Err(Stop::Skip("the suite sends hand-framed requests over plain http:// only".into()));
    }
    let host = url.host_str().unwrap_or("localhost").trim_start_matches('[').trim_end_matches(']').to_owned();
    let port = url.port_or_known_default().unwrap_or(80);
    let body = json!({"target_capability": MISSING_CAPABILITY}).to_string();
    let chunked = format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len());
    let cases = [
        (
            "FALLBACK with Content-Length and Transfer-Encoding: chunked",
            format!("Content-Length: {}\r\nTransfer-Encoding: chunked\r\n", chunked.len()),
            chunked.clone(),
        ),
        (
            "FALLBACK with two different Content-Length values",
            format!("Content-Length: {}\r\nContent-Length: {}\r\n", body.len(), body.len() + 1),
            body.clone(),
        ),
    ];
    for (title, framing, payload) in cases {
        t.step(title);
        let message = format!(
            "POST {}/fallback HTTP/1.1\r\nHost: {}\r\nA2A-Version: {}\r\nA2A-Sender-ID: {}\r\nContent-Type: \
             application/json\r\n{framing}\r\n{payload}",
            url.path(),
            url.host_str().unwrap_or("localhost"),
            a2a_core::PROTOCOL_VERSION,
            crate::ctx::SENDER_A,
        );
        match raw_exchange(&host, port, message.as_bytes()).await {
            Ok(a) => {
                let first = a.text.lines().next().unwrap_or("").to_owned();
                t.check(
                    a.status == 400 && a.code == "invalid_request",
                    "400 invalid_request",
                    format!("{first} {}", a.code),
                );
                t.check(a.closed, "the connection closed after the refusal", if a.closed { "closed" } else { "open" });
            }
            Err(e) => {
                t.check(false, "400 invalid_request", e);
            }
        }
    }
    Ok(())
}
