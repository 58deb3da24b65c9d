//! Who is asking and from where: provenance and hops (POL-3, POL-4), the sessions' `auth_requirement` (SES-2), the
//! requester's `from` and the reserved keys (SES-11).

use std::time::Duration;

use serde_json::{Value, json};

use super::{end, fresh_key, inbox_delivery, listed, register, run_id, run_path, sender, session_req, status_of};
use crate::check::{Outcome, Stop, Trial};
use crate::checks::show;
use crate::ctx::SENDER_A;
use crate::http::Req;

/// The hop the suite takes to be beyond any agent's maximum (POL-4's default is 8).
const FAR_HOP: u32 = 1000;

/// A send to `key` with `A2A-Hop: hop`.
fn hop_send(t: &Trial<'_>, hop: u32, body: Value) -> Result<Req, Stop> {
    Ok(session_req(t, "POST", "/sessions/send")?.header("A2A-Hop", hop.to_string()).json(&body))
}

pub(super) async fn provenance_and_hops(t: &mut Trial<'_>) -> Outcome {
    let key = fresh_key("provenance");
    register(t, &key).await?;
    let mut trace = [0u8; 16];
    getrandom::fill(&mut trace).unwrap_or_default();
    let trace: String = trace.iter().map(|b| format!("{b:02x}")).collect();
    let body = json!({"target": key, "text": "where did this come from?", "announce": false, "trace_id": trace});
    let r = t.send("send with A2A-Hop: 2 and a trace_id", hop_send(t, 2, body)?).await?;
    t.check(r.status == 202 && status_of(&r) == "accepted", "202 accepted", r.summary());
    let run = run_id(t, &r)?;
    let delivery = inbox_delivery(t, &key, &run).await?;
    t.step("the provenance of the delivery");
    let source = sender(t);
    let expect = |p: &Value| -> Vec<String> {
        let mut wrong = Vec::new();
        for (member, want) in [
            ("kind", json!("inter_session")),
            ("source_agent", json!(source)),
            ("source_tool", json!("sessions_send")),
            ("is_user", json!(false)),
            ("hop", json!(2)),
            ("run_id", json!(run)),
            ("trace_id", json!(trace)),
        ] {
            if p[member] != want {
                wrong.push(format!("{member} {} (expected {want})", p[member]));
            }
        }
        wrong
    };
    let wrong = expect(&delivery["provenance"]);
    t.check(
        wrong.is_empty(),
        "provenance {kind inter_session, source_agent the sender, source_tool sessions_send, is_user false, hop 2, run_id, trace_id}",
        if wrong.is_empty() { show(&delivery["provenance"]) } else { wrong.join(", ") },
    );
    let r = t.send("history", session_req(t, "GET", &format!("/sessions/{key}/history"))?).await?;
    let b = r.json().unwrap_or(Value::Null);
    let msg = b["messages"].as_array().and_then(|m| m.iter().find(|x| x["run_id"] == run.as_str()).cloned());
    let wrong = msg.as_ref().map(|m| expect(&m["provenance"]));
    t.check(
        msg.as_ref().is_some_and(|m| m["role"] == "inter_session") && wrong.as_ref().is_some_and(Vec::is_empty),
        "the transcript message of the run: role inter_session with the same provenance",
        msg.map_or_else(|| show(&b), |m| show(&m)),
    );
    let body = json!({"target": key, "text": "a long chain", "announce": false});
    let r = t.send(format!("send with A2A-Hop: {FAR_HOP}"), hop_send(t, FAR_HOP, body.clone())?).await?;
    t.expect_error(&r, 409, "hop_limit");
    if let Some(max) =
        r.error_details()["max_hops"].as_u64().and_then(|m| u32::try_from(m).ok()).filter(|m| *m < FAR_HOP)
    {
        let r =
            t.send(format!("send with A2A-Hop: {max} (the maximum it names)"), hop_send(t, max, body.clone())?).await?;
        t.check(r.status == 202 && status_of(&r) == "accepted", "202 accepted (at the maximum)", r.summary());
        let r = t.send(format!("send with A2A-Hop: {}", max + 1), hop_send(t, max + 1, body)?).await?;
        t.expect_error(&r, 409, "hop_limit");
    }
    end(t, &key).await;
    Ok(())
}

/// A §17 request without the credential `auth` asks for: as the run's identity (unsigned) or the fixed sender.
fn without_credential(t: &Trial<'_>, method: &str, path: &str) -> Req {
    let did = t.ctx.identity.as_ref().map_or(SENDER_A.to_owned(), |i| i.did.clone());
    t.ctx.bare(method, path).header("A2A-Version", a2a_core::PROTOCOL_VERSION).header("A2A-Sender-ID", did)
}

pub(super) async fn auth_requirement(t: &mut Trial<'_>) -> Outcome {
    if !t.ctx.disc.has_feature("sessions") {
        return Err(Stop::Skip("the agent does not list sessions".into()));
    }
    t.step("sessions.auth_requirement of the capabilities document");
    let shown = t.ctx.disc.doc.as_ref().map(|d| d["sessions"]["auth_requirement"].clone()).unwrap_or(Value::Null);
    let auth = shown.as_str().unwrap_or("").to_owned();
    t.ensure(
        ["none", "api_key", "did_auth", "oauth2"].contains(&auth.as_str()),
        "sessions.auth_requirement: none, api_key, did_auth or oauth2",
        show(&shown),
    )?;
    let code = match auth.as_str() {
        "did_auth" => "signature_required",
        "api_key" | "oauth2" => "auth_required",
        _ => return Err(Stop::Skip("sessions.auth_requirement is none: the agent asks for nothing".into())),
    };
    let key = fresh_key("auth");
    let unknown_run = run_path(&format!("{SENDER_A}_1719000000000000001_h6fgdqwzjyd3liod5hyci3mlc4"));
    let registration = json!({"session_key": key, "summary": "the conformance suite's inbox session"});
    let requests: Vec<(&str, Req)> = vec![
        ("register", without_credential(t, "POST", "/sessions").json(&registration)),
        ("list", without_credential(t, "GET", "/sessions")),
        ("read one", without_credential(t, "GET", &format!("/sessions/{key}"))),
        ("send", without_credential(t, "POST", "/sessions/send").json(&json!({"target": key, "text": "hello"}))),
        ("history", without_credential(t, "GET", &format!("/sessions/{key}/history"))),
        ("inbox", without_credential(t, "GET", &format!("/sessions/{key}/inbox"))),
        ("await a run", without_credential(t, "GET", &unknown_run)),
        ("end", without_credential(t, "DELETE", &format!("/sessions/{key}"))),
    ];
    for (step, req) in requests {
        let r = t.send(format!("{step} without the {auth} credential"), req).await?;
        t.expect_error(&r, 401, code);
    }
    let mut open =
        t.open_stream(format!("events without the {auth} credential"), without_credential(t, "GET", "/events")).await?;
    let resp = open.stream.read_plain(Duration::from_secs(5)).await;
    t.close_stream(open);
    t.expect_error(&resp, 401, code);
    Ok(())
}

pub(super) async fn from_and_reserved(t: &mut Trial<'_>) -> Outcome {
    for reserved in ["send", "spawn"] {
        let body =
            json!({"session_key": reserved, "label": reserved, "summary": "the conformance suite's inbox session"});
        let r =
            t.send(format!("register the key {reserved:?}"), session_req(t, "POST", "/sessions")?.json(&body)).await?;
        t.expect_error(&r, 400, "invalid_request");
    }
    let key = fresh_key("from");
    register(t, &key).await?;
    let q = format!("/sessions?include_self=true&search={key}&from={key}");
    let r = t.send("list with from (the requester's session)", session_req(t, "GET", &q)?).await?;
    t.check(r.status == 200 && listed(&r, &key), format!("200 listing {key}"), r.summary());
    let r = t.send("read it with from", session_req(t, "GET", &format!("/sessions/{key}?from={key}"))?).await?;
    t.check(
        r.status == 200 && r.json().is_some_and(|b| b["session_key"] == key.as_str()),
        "200 with the Session",
        r.summary(),
    );
    let r =
        t.send("its history with from", session_req(t, "GET", &format!("/sessions/{key}/history?from={key}"))?).await?;
    t.check(r.status == 200 && r.json().is_some_and(|b| b["messages"].is_array()), "200 with a History", r.summary());
    let mut open = t
        .open_stream("its events with from", session_req(t, "GET", &format!("/events?session={key}&from={key}"))?)
        .await?;
    let streamed = open.stream.is_event_stream();
    let resp = if streamed { open.stream.resp() } else { open.stream.read_plain(Duration::from_secs(5)).await };
    t.close_stream(open);
    t.check(streamed, "200 text/event-stream", resp.summary());
    let r = t
        .send("list with a from that is not a session key", session_req(t, "GET", "/sessions?from=not%20a%20key!")?)
        .await?;
    t.check(r.status == 400 && r.error_code().is_some(), "400 with an ErrorBody", r.summary());
    end(t, &key).await;
    Ok(())
}
