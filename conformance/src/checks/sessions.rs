//! Sessions and conversations (§17, the optional `sessions` feature).
//!
//! The suite drives its own inbox session (SES-4): it registers one, sends to it, reads its inbox and answers from it
//! (SES-5), so it needs no knowledge of the sessions the target hosts.

use std::time::Duration;

use a2a_core::execution_id::ExecutionId;
use a2a_core::integrity::Coverage;
use serde_json::{Value, json};

use super::show;
use crate::check;
use crate::check::{Check, Outcome, Stop, Trial};
use crate::ctx::SENDER_A;
use crate::http::{Req, Resp, Signing};

mod bounds;
mod events;
mod policy;

/// When the session checks apply.
const SESSIONS: &str = "the agent lists \"sessions\" in features (under did_auth, with a caller identity)";

pub(super) fn checks() -> Vec<Check> {
    vec![
        check!(
            "sessions/registry",
            ["SES-3", "SES-4", "SES-7", "SES-8"],
            Must,
            SESSIONS,
            "an inbox session registers (201, then 200 on refresh), is listed with include_self and the filters, left out without include_self, read alone, and ended by DELETE (then 404 unknown_session)",
            registry
        ),
        check!(
            "sessions/send-accepted-at-once",
            ["SND-7", "SND-9"],
            Must,
            SESSIONS,
            "a send with wait_ms 0 is answered 202 accepted with a run_id at once; so is one with reply: false and a wait",
            accepted_at_once
        ),
        check!(
            "sessions/wait-is-not-timeout",
            ["SND-8", "SND-6", "SES-5", "SND-10"],
            Must,
            SESSIONS,
            "a send whose wait ends while the run is within run_timeout_ms is 202 accepted, never timeout; the delivery waits in the inbox (which another sender may not read: 404 unknown_session), a late reply is kept on the run (GET /a2a/runs/{id})",
            wait_not_timeout
        ),
        check!(
            "sessions/no-reply-ends-run",
            ["SND-14", "SND-7"],
            Must,
            SESSIONS,
            "answering NO_REPLY ends the run no_reply with the token kept as reply and no ping-pong turns",
            no_reply
        ),
        check!(
            "sessions/unknown",
            ["SND-5", "SND-10"],
            Must,
            SESSIONS,
            "a send to an unknown session is 404 unknown_session; GET of an unknown run is 404 unknown_run",
            unknown
        ),
        check!(
            "sessions/wait-cycle",
            ["POL-5", "SND-4"],
            Must,
            SESSIONS,
            "a waiting send whose A2A-Wait-Chain already holds the target is 409 wait_cycle with details.cycle, at once; a waiting send to the requester's own session too",
            wait_cycle
        ),
        check!(
            "sessions/malformed",
            ["SES-1", "SND-1"],
            Must,
            SESSIONS,
            "a send with an unknown member is 400 invalid_request naming it in details.member; a body that is not JSON is a 400 ErrorBody",
            malformed
        ),
        check!(
            "sessions/history-bounds",
            ["HIS-1", "HIS-2"],
            Must,
            SESSIONS,
            "the history of a session answers its messages newest last, at most limit of them, with a flag when older ones were left out",
            history
        ),
        check!(
            "sessions/attachment-bounds",
            ["SND-2"],
            Must,
            SESSIONS,
            "a send with more than 8 attachments, or one whose decoded data is over the agent's limit, is 413 payload_too_large with details.limit_bytes; data that is not base64, or a media_type that is not type/subtype, is 400 invalid_request naming the attachment; a small one is delivered unchanged",
            bounds::attachment_bounds
        ),
        check!(
            "sessions/context-mode",
            ["SND-11"],
            Must,
            SESSIONS,
            "context_mode decides what a delivery carries: none, no context; current, only this run's exchange (nothing yet in round one); full, the requester's context, bounded to its newest 50 messages and 80 KiB",
            bounds::context_mode
        ),
        check!(
            "sessions/run-deadline",
            ["SND-13"],
            Must,
            SESSIONS,
            "a run's round-one deadline is its creation plus run_timeout_ms, and a run_timeout_ms beyond the agent's maximum (10^12 ms) is lowered",
            bounds::run_deadline
        ),
        check!(
            "sessions/history-redacted",
            ["HIS-4"],
            Must,
            SESSIONS,
            "secrets in a message and in a reply (a password assignment, sk-, AKIA and ghp_ keys, a JWT, a bearer token, an api_key assignment) do not leave the agent in the history: each is [REDACTED], none appears in the body, and redacted counts them",
            bounds::history_redacted
        ),
        check!(
            "sessions/provenance-and-hops",
            ["POL-3", "POL-4"],
            Must,
            SESSIONS,
            "a delivery and its transcript message carry provenance {kind inter_session, source_agent the sender, source_tool sessions_send, is_user false, hop from A2A-Hop, run_id, trace_id}; a send whose A2A-Hop is beyond the agent's maximum (1000, and the maximum it names plus one) is 409 hop_limit, one at the maximum is not",
            policy::provenance_and_hops
        ),
        check!(
            "sessions/auth-requirement",
            ["SES-2"],
            Must,
            SESSIONS,
            "the capabilities document shows sessions.auth_requirement and every session endpoint enforces it: without the credential it asks for, register, list, read, send, history, inbox, runs and events are 401 (signature_required for did_auth, auth_required for api_key and oauth2)",
            policy::auth_requirement
        ),
        check!(
            "sessions/from-and-reserved-keys",
            ["SES-11"],
            Must,
            SESSIONS,
            "the keys send and spawn cannot be registered (400 invalid_request); list, read, history and events accept from, the requester's own session key, and refuse a from that is not a session key with 400",
            policy::from_and_reserved
        ),
        check!(
            "sessions/announce",
            ["ANN-1", "ANN-2", "ANN-3"],
            Must,
            SESSIONS,
            "after round one the target is asked to announce (step announce with the original, the round-one and the last reply, and the instruction); its answer is published on GET /a2a/events?session= as an announce event {session, run_id, text, from, provenance, at} whose id the run records (published), then the run event; ANNOUNCE_SKIP publishes nothing (skipped), announce: false asks nothing (not_requested)",
            events::announce
        ),
        check!(
            "sessions/events-resume",
            ["ANN-4", "ANN-6"],
            Must,
            SESSIONS,
            "a fresh event stream starts with a \": connected\" comment; Last-Event-ID n resumes with exactly the session's later events, in order, none twice, and 0 with the whole buffer; a session another sender may not see is 404 on its channel and left out of its stream",
            events::events_resume
        ),
    ]
}

/// The §17 requests of this run: under `did_auth` signed by the run's identity, under `none` as the suite's fixed
/// unsigned sender; other requirements, or `did_auth` without an identity, skip.
fn session_req(t: &Trial<'_>, method: &str, path: &str) -> Result<Req, Stop> {
    if !t.ctx.disc.has_feature("sessions") {
        return Err(Stop::Skip("the agent does not list sessions".into()));
    }
    let auth = t.ctx.disc.doc.as_ref().and_then(|d| d["sessions"]["auth_requirement"].as_str()).unwrap_or("did_auth");
    let base = t.ctx.bare(method, path).header("A2A-Version", a2a_core::PROTOCOL_VERSION);
    match auth {
        "none" => Ok(base.header("A2A-Sender-ID", SENDER_A)),
        "did_auth" => {
            let id = t.ctx.identity.clone().ok_or_else(|| {
                Stop::Skip(
                    "the sessions need did_auth and the run has no caller identity (--identity/--did or --serve-did)"
                        .into(),
                )
            })?;
            let coverage =
                if method == "GET" || method == "DELETE" { Coverage::HeaderOnly } else { Coverage::PayloadHash };
            Ok(base.header("A2A-Sender-ID", id.did.clone()).signed(Signing::new(id, coverage)))
        }
        other => Err(Stop::Skip(format!("the sessions need {other}, which the suite does not drive"))),
    }
}

/// A §17 request as a second sender (another caller than the run's): under `did_auth` signed by the suite's second
/// served identity (`--serve-did`), under `none` as the second unsigned sender; skips otherwise.
fn session_req_as_second(t: &Trial<'_>, method: &str, path: &str) -> Result<Req, Stop> {
    session_req(t, method, path)?;
    let base = t.ctx.bare(method, path).header("A2A-Version", a2a_core::PROTOCOL_VERSION);
    if auth_requirement_of(t) == "none" {
        return Ok(base.header("A2A-Sender-ID", crate::ctx::SENDER_B));
    }
    let second = t
        .ctx
        .didhost
        .as_ref()
        .map(|h| h.second.clone())
        .ok_or_else(|| Stop::Skip("a second signed sender needs the suite's own DIDs (--serve-did)".into()))?;
    let coverage = if method == "GET" || method == "DELETE" { Coverage::HeaderOnly } else { Coverage::PayloadHash };
    Ok(base.header("A2A-Sender-ID", second.did.clone()).signed(Signing::new(second, coverage)))
}

/// `sessions.auth_requirement` of the capabilities document (`did_auth` when it says nothing, the default of SES-2).
fn auth_requirement_of(t: &Trial<'_>) -> String {
    t.ctx.disc.doc.as_ref().and_then(|d| d["sessions"]["auth_requirement"].as_str()).unwrap_or("did_auth").to_owned()
}

/// `len` random letters and digits.
pub(crate) fn random_text(len: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut b = vec![0u8; len];
    getrandom::fill(&mut b).unwrap_or_default();
    b.iter().map(|x| ALPHABET[usize::from(*x) % ALPHABET.len()] as char).collect()
}

/// The sender DID the session requests of this run carry.
fn sender(t: &Trial<'_>) -> String {
    match t.ctx.disc.doc.as_ref().and_then(|d| d["sessions"]["auth_requirement"].as_str()) {
        Some("none") => SENDER_A.to_owned(),
        _ => t.ctx.identity.as_ref().map(|i| i.did.clone()).unwrap_or_default(),
    }
}

/// A fresh session key for this check.
fn fresh_key(tag: &str) -> String {
    let mut b = [0u8; 6];
    getrandom::fill(&mut b).unwrap_or_default();
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("conformance-{tag}-{hex}")
}

/// The path segment of a run id (the `execution_id` format, EID-11).
fn run_path(id: &str) -> String {
    let seg = ExecutionId::parse(id).map(|e| e.to_path_segment()).unwrap_or_else(|_| id.replace('%', "%25"));
    format!("/runs/{seg}")
}

/// Registers the suite's inbox session `key`, as a preparatory step.
async fn register(t: &mut Trial<'_>, key: &str) -> Result<Resp, Stop> {
    let body =
        json!({"session_key": key, "label": key, "kind": "other", "summary": "the conformance suite's inbox session"});
    let req = session_req(t, "POST", "/sessions")?.json(&body);
    let r = t.setup(format!("register inbox session {key} (preparation)"), req).await?;
    t.require(r.status == 201 || r.status == 200, "201 with a Session", r.summary())?;
    Ok(r)
}

/// Ends the suite's session `key` (cleanup; not judged).
async fn end(t: &mut Trial<'_>, key: &str) {
    if let Ok(req) = session_req(t, "DELETE", &format!("/sessions/{key}")) {
        let _ = t.setup(format!("end session {key} (cleanup)"), req).await;
    }
}

/// Sends `body` to the agent's sessions.
async fn send(t: &mut Trial<'_>, title: impl Into<String>, body: Value, extra_wait: Duration) -> Result<Resp, Stop> {
    let req = session_req(t, "POST", "/sessions/send")?.json(&body).timeout(t.ctx.opts.timeout + extra_wait);
    t.send(title, req).await
}

/// The run id of a SendResponse, or block.
fn run_id(t: &mut Trial<'_>, r: &Resp) -> Result<String, Stop> {
    let id = r.json().and_then(|b| b["run_id"].as_str().map(str::to_owned));
    t.require(id.is_some(), "a SendResponse with a run_id", r.summary())?;
    Ok(id.unwrap_or_default())
}

/// Reads the inbox of `key` until it holds the delivery of `run`, as preparatory steps.
async fn inbox_delivery(t: &mut Trial<'_>, key: &str, run: &str) -> Result<Value, Stop> {
    inbox_step(t, key, run, None).await
}

/// Reads the inbox of `key` until it holds a delivery of `run` (of `step`, when given), as preparatory steps.
async fn inbox_step(t: &mut Trial<'_>, key: &str, run: &str, step: Option<&str>) -> Result<Value, Stop> {
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        let req = session_req(t, "GET", &format!("/sessions/{key}/inbox?wait_ms=2000"))?
            .timeout(t.ctx.opts.timeout + Duration::from_secs(2));
        let r = t.setup(format!("read the inbox of {key}"), req).await?;
        t.require(r.status == 200, "200 with an Inbox", r.summary())?;
        let body = r.json().unwrap_or(Value::Null);
        let found = body["deliveries"]
            .as_array()
            .and_then(|l| l.iter().find(|d| d["run_id"] == run && step.is_none_or(|s| d["step"] == s)));
        if let Some(d) = found {
            return Ok(d.clone());
        }
        if body["deliveries"].as_array().is_some_and(|l| !l.is_empty()) {
            // The inbox answered at once with other deliveries; ours may not be queued yet.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let what = step.map_or_else(String::new, |s| format!(" (step {s})"));
    Err(Stop::Blocked(format!("the delivery of run {run}{what} never appeared in the inbox of {key}")))
}

/// Answers the delivery of `run` with `reply`.
async fn answer(t: &mut Trial<'_>, run: &str, reply: &str) -> Result<Resp, Stop> {
    let req = session_req(t, "POST", &format!("{}/reply", run_path(run)))?.json(&json!({"reply": reply}));
    t.send(format!("reply {reply:?} to run {run}"), req).await
}

/// Reads a run, waiting for `until` (`reply` or `done`).
async fn read_run(t: &mut Trial<'_>, run: &str, until: &str) -> Result<Resp, Stop> {
    let req = session_req(t, "GET", &format!("{}?wait_ms=5000&until={until}", run_path(run)))?
        .timeout(t.ctx.opts.timeout + Duration::from_secs(5));
    t.send(format!("GET the run {run} (until={until})"), req).await
}

fn listed(r: &Resp, key: &str) -> bool {
    r.json().and_then(|b| b["sessions"].as_array().cloned()).is_some_and(|l| l.iter().any(|s| s["session_key"] == key))
}

async fn registry(t: &mut Trial<'_>) -> Outcome {
    let key = fresh_key("registry");
    let body =
        json!({"session_key": key, "label": key, "kind": "other", "summary": "the conformance suite's inbox session"});
    let r = t.send(format!("register inbox session {key}"), session_req(t, "POST", "/sessions")?.json(&body)).await?;
    t.expect_status(&r, 201);
    let b = r.json().unwrap_or(Value::Null);
    t.check(b["session_key"] == key.as_str() && b["handler"] == "inbox", "a Session of handler inbox", show(&b));
    let r = t.send("register the same key again (refresh)", session_req(t, "POST", "/sessions")?.json(&body)).await?;
    t.expect_status(&r, 200);
    let q = format!("/sessions?include_self=true&kind=other&label={key}&search={}", key.to_uppercase());
    let r = t.send("list with include_self, kind, label and search", session_req(t, "GET", &q)?).await?;
    t.expect_status(&r, 200);
    t.check(listed(&r, &key), format!("{key} listed"), r.summary());
    let r = t.send("list without include_self", session_req(t, "GET", "/sessions?limit=200")?).await?;
    t.check(r.status == 200 && !listed(&r, &key), format!("200 without {key} (the sender's own)"), r.summary());
    let q = "/sessions?include_self=true&kind=cron&search=conformance-registry";
    let r = t.send("list with a kind filter it does not match", session_req(t, "GET", q)?).await?;
    t.check(r.status == 200 && !listed(&r, &key), format!("200 without {key}"), r.summary());
    let r = t.send(format!("read {key}"), session_req(t, "GET", &format!("/sessions/{key}"))?).await?;
    t.check(
        r.status == 200 && r.json().is_some_and(|b| b["session_key"] == key.as_str()),
        "200 with the Session",
        r.summary(),
    );
    let r = t.send(format!("end {key}"), session_req(t, "DELETE", &format!("/sessions/{key}"))?).await?;
    t.check(r.status == 200 && r.json().is_some_and(|b| b["ended_at"].is_string()), "200 with ended_at", r.summary());
    let r = t.send(format!("read {key} after its end"), session_req(t, "GET", &format!("/sessions/{key}"))?).await?;
    t.expect_error(&r, 404, "unknown_session");
    let q = format!("/sessions?include_self=true&search={key}");
    let r = t.send("list after its end", session_req(t, "GET", &q)?).await?;
    t.check(r.status == 200 && !listed(&r, &key), format!("200 without {key}"), r.summary());
    Ok(())
}

fn status_of(r: &Resp) -> String {
    r.json().and_then(|b| b["status"].as_str().map(str::to_owned)).unwrap_or_default()
}

async fn accepted_at_once(t: &mut Trial<'_>) -> Outcome {
    let key = fresh_key("accepted");
    register(t, &key).await?;
    let r =
        send(t, "send with wait_ms 0", json!({"target": key, "text": "hello", "wait_ms": 0}), Duration::ZERO).await?;
    t.check(
        r.status == 202 && status_of(&r) == "accepted" && r.json().is_some_and(|b| b["run_id"].is_string()),
        "202 accepted with a run_id",
        r.summary(),
    );
    t.check(r.elapsed < Duration::from_secs(2), "an answer at once (under 2 s)", format!("{:?}", r.elapsed));
    let body = json!({"target": key, "text": "no reply wanted", "reply": false, "wait_ms": 3000});
    let r = send(t, "send with reply: false and wait_ms 3000", body, Duration::from_secs(3)).await?;
    t.check(r.status == 202 && status_of(&r) == "accepted", "202 accepted", r.summary());
    t.check(r.elapsed < Duration::from_millis(2500), "an answer before the wait ends", format!("{:?}", r.elapsed));
    end(t, &key).await;
    Ok(())
}

async fn wait_not_timeout(t: &mut Trial<'_>) -> Outcome {
    let key = fresh_key("wait");
    register(t, &key).await?;
    let body = json!({"target": key, "text": "are you there?", "wait_ms": 1000, "run_timeout_ms": 60000});
    let r =
        send(t, "send with wait_ms 1000, run_timeout_ms 60000, nobody answering", body, Duration::from_secs(1)).await?;
    t.check(
        r.status == 202 && status_of(&r) == "accepted",
        "202 accepted (the run is within its timeout)",
        r.summary(),
    );
    let run = run_id(t, &r)?;
    let delivery = inbox_delivery(t, &key, &run).await?;
    t.check(
        delivery["text"].as_str().is_some_and(|s| s.contains("are you there?")),
        "the delivery carries the text",
        show(&delivery),
    );
    // SES-5: only the owner reads an inbox; another sender gets 404 unknown_session.
    match session_req_as_second(t, "GET", &format!("/sessions/{key}/inbox?wait_ms=0")) {
        Err(Stop::Skip(why)) => t.step(format!("the inbox read by a second sender: not checked ({why})")),
        Err(e) => return Err(e),
        Ok(req) => {
            let r = t.send(format!("read the inbox of {key} as a second sender"), req).await?;
            t.expect_error(&r, 404, "unknown_session");
        }
    }
    let r = answer(t, &run, "here, late").await?;
    t.expect_status(&r, 200);
    let r = read_run(t, &run, "reply").await?;
    let b = r.json().unwrap_or(Value::Null);
    t.check(
        r.status == 200 && b["status"] == "ok" && b["reply"] == "here, late",
        "200 Run with status ok and the late reply \"here, late\"",
        show(&b),
    );
    end(t, &key).await;
    Ok(())
}

async fn no_reply(t: &mut Trial<'_>) -> Outcome {
    let key = fresh_key("noreply");
    register(t, &key).await?;
    let r = send(t, "send with wait_ms 0", json!({"target": key, "text": "anything to add?"}), Duration::ZERO).await?;
    let run = run_id(t, &r)?;
    inbox_delivery(t, &key, &run).await?;
    let r = answer(t, &run, "NO_REPLY").await?;
    t.expect_status(&r, 200);
    let r = read_run(t, &run, "done").await?;
    let b = r.json().unwrap_or(Value::Null);
    t.check(
        r.status == 200 && b["status"] == "no_reply" && b["reply"] == "NO_REPLY",
        "status no_reply with reply \"NO_REPLY\"",
        show(&b),
    );
    let turns = b["turns"].as_array().map_or(0, Vec::len);
    t.check(
        turns == 0 && b["state"] == "done",
        "state done with no turns",
        format!("state {} with {turns} turns", b["state"]),
    );
    t.step("the inbox after the skip token");
    let req = session_req(t, "GET", &format!("/sessions/{key}/inbox?wait_ms=0"))?;
    let r = t.send(format!("read the inbox of {key}"), req).await?;
    let more = r.json().and_then(|b| b["deliveries"].as_array().cloned()).unwrap_or_default();
    t.check(r.status == 200 && more.is_empty(), "200 with no further delivery", r.summary());
    end(t, &key).await;
    Ok(())
}

async fn unknown(t: &mut Trial<'_>) -> Outcome {
    let key = fresh_key("missing");
    let r =
        send(t, format!("send to {key}, never registered"), json!({"target": key, "text": "hello"}), Duration::ZERO)
            .await?;
    t.expect_error(&r, 404, "unknown_session");
    let run = format!("{}_1719000000000000001_h6fgdqwzjyd3liod5hyci3mlc4", sender(t));
    let r = t.send("GET an unknown run", session_req(t, "GET", &run_path(&run))?).await?;
    t.expect_error(&r, 404, "unknown_run");
    Ok(())
}

async fn wait_cycle(t: &mut Trial<'_>) -> Outcome {
    let key = fresh_key("cycle");
    register(t, &key).await?;
    let address = format!("{}#{key}", t.ctx.agent_did());
    let chain = format!("{}#elsewhere,{address}", sender(t));
    let body = json!({"target": key, "text": "loop?", "wait_ms": 5000});
    let req = session_req(t, "POST", "/sessions/send")?
        .header("A2A-Wait-Chain", chain.clone())
        .json(&body)
        .timeout(t.ctx.opts.timeout + Duration::from_secs(5));
    let r = t.send(format!("send with wait_ms 5000 and A2A-Wait-Chain {chain}"), req).await?;
    t.expect_error(&r, 409, "wait_cycle");
    let cycle = r.error_details()["cycle"].clone();
    t.check(
        cycle.as_array().is_some_and(|c| c.iter().any(|a| a == address.as_str())),
        format!("details.cycle naming {address}"),
        show(&cycle),
    );
    t.check(r.elapsed < Duration::from_secs(2), "an answer at once, not after the wait", format!("{:?}", r.elapsed));
    let body = json!({"target": key, "from": key, "text": "myself?", "wait_ms": 5000});
    let r = send(t, "send from the target session to itself with wait_ms 5000", body, Duration::from_secs(5)).await?;
    // Only when the requester's agent is the target's can `from` be the target (SND-4); the suite is another agent
    // unless the sessions run unsigned.
    if sender(t) == t.ctx.agent_did() {
        t.expect_error(&r, 409, "wait_cycle");
    } else {
        t.step(
            "SND-4 (a session that waits on itself) shows only to a requester of the agent's own DID: run the suite \
             with the agent's identity (--identity, --did) to see it",
        );
    }
    end(t, &key).await;
    Ok(())
}

async fn malformed(t: &mut Trial<'_>) -> Outcome {
    let key = fresh_key("malformed");
    let body = json!({"target": key, "text": "hello", "probe_unknown_member": true});
    let r = send(t, "send with an unknown member", body, Duration::ZERO).await?;
    t.expect_error(&r, 400, "invalid_request");
    let member = r.error_details()["member"].clone();
    t.check(member == "probe_unknown_member", "details.member \"probe_unknown_member\"", show(&member));
    let req = session_req(t, "POST", "/sessions/send")?
        .header("Content-Type", "application/json")
        .body(b"{not json".to_vec());
    let r = t.send("send a body that is not JSON", req).await?;
    t.check(r.status == 400 && r.error_code().is_some(), "400 with an ErrorBody", r.summary());
    Ok(())
}

async fn history(t: &mut Trial<'_>) -> Outcome {
    let key = fresh_key("history");
    register(t, &key).await?;
    for (i, text) in ["first question", "second question"].iter().enumerate() {
        let r =
            send(t, format!("send {text}"), json!({"target": key, "text": text, "announce": false}), Duration::ZERO)
                .await?;
        let run = run_id(t, &r)?;
        inbox_delivery(t, &key, &run).await?;
        answer(t, &run, &format!("answer {}", i + 1)).await?;
    }
    let r = t.send("history", session_req(t, "GET", &format!("/sessions/{key}/history"))?).await?;
    let b = r.json().unwrap_or(Value::Null);
    let texts: Vec<String> = b["messages"]
        .as_array()
        .map(|m| m.iter().filter_map(|x| x["text"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    t.check(r.status == 200 && texts.len() >= 4, "200 with at least 4 messages", show(&b));
    t.check(texts.last().is_some_and(|s| s.contains("answer 2")), "newest last (\"answer 2\")", format!("{texts:?}"));
    let r = t.send("history with limit=1", session_req(t, "GET", &format!("/sessions/{key}/history?limit=1"))?).await?;
    let b = r.json().unwrap_or(Value::Null);
    let n = b["messages"].as_array().map_or(0, Vec::len);
    t.check(r.status == 200 && n == 1, "200 with 1 message", show(&b));
    t.check(b["truncated"] == true, "truncated: true (older messages left out)", show(&b["truncated"]));
    let r = t.send("history with limit=0", session_req(t, "GET", &format!("/sessions/{key}/history?limit=0"))?).await?;
    t.expect_error(&r, 400, "invalid_request");
    end(t, &key).await;
    Ok(())
}
