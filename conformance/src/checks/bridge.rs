//! The optional bridge to Agent2Agent (A2A) 1.x (§20), checked from outside when the agent serves it: the Agent Card
//! and its signature (BR-3..BR-6), `SendMessage` / `GetTask` on the JSON-RPC binding (BR-7, BR-8, BR-11..BR-13), the
//! same on the HTTP+JSON binding (BR-1), the error forms (BR-2, BR-9, BR-14), streaming (BR-15) and `bridge_to` in
//! NEGOTIATE (BR-17; with `--gateway`, naming the gateway, BR-26).
//!
//! Whether the bridge is served is probed once per run: `GET /.well-known/agent-card.json` on the origin of the
//! endpoint. A `404` means "not served" (the bridge is optional), and every check is skipped with that reason. Card
//! signatures are read and verified with `a2a-core`'s A2A 1.x card code, the same that `a2a-client` verifies cards
//! with; the agent's key comes from its DID document, resolved as the other checks resolve it.

use std::time::Duration;

use a2a_core::a2a1x::{self, AGENT_CARD_PATH, ERROR_INFO_TYPE, PROTOCOL_VERSION};
use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use serde_json::{Value, json};

use super::{main_plan, negotiate_body, result_path, show};
use crate::check;
use crate::check::{Check, Outcome, Stop, Trial};
use crate::ctx::SENDER_A;
use crate::http::{Req, Resp};

/// When the bridge checks apply.
const BRIDGE: &str = "the agent serves the A2A 1.x bridge (GET /.well-known/agent-card.json on its origin is not 404)";

/// When the bridge checks that send a message apply.
const BRIDGE_SEND: &str = "the agent serves the A2A 1.x bridge and has a skill with auth_requirement none whose input schema the suite can fill";

/// Events read from one stream at most.
const MAX_EVENTS: usize = 1_000;

pub(super) fn checks() -> Vec<Check> {
    vec![
        check!(
            "bridge/agent-card",
            ["BR-3", "BR-4", "BR-5"],
            Must,
            BRIDGE,
            "GET /.well-known/agent-card.json is 200 application/json with Access-Control-Allow-Origin: * and A2A-Version: 1.0; the card names both interfaces at one origin, streaming and the handshake extension with the agent's DID; its skills are the capabilities that are not did_auth, in order, with BR-4's members and tags; no empty or false member; when signed, an ES256 signature verifies with the key of the agent's DID document its kid names",
            agent_card
        ),
        check!(
            "bridge/send-message",
            ["BR-7", "BR-8", "BR-11", "BR-12", "BR-13", "BR-10"],
            Must,
            BRIDGE_SEND,
            "JSON-RPC SendMessage with one data part from the skill's input schema answers {task} whose id is the execution id (RESULT of it, for the sending A2A-Sender-ID, has the status BR-12 maps to the task's state), metadata.skill and, when completed, the result artifact; GetTask of its id answers the same task; a resent message (same messageId) is the same task when the agent lists idempotency; two data parts are -32602, a url part -32005, a message.metadata.skill not on the card -32602; an unknown task id is -32001 TASK_NOT_FOUND",
            send_message
        ),
        check!(
            "bridge/errors",
            ["BR-2", "BR-14", "BR-9"],
            Must,
            BRIDGE,
            "JSON-RPC answers are HTTP 200 with A2A-Version: 1.0 and A2A errors (data: one google.rpc.ErrorInfo in domain a2a-handshake): not JSON -32700 with id null, a batch -32600, an unknown method -32601, an A2A 0.3 method name -32601 naming the 1.0 one, A2A-Version 9.9 -32009 naming 1.0 (1.0.2 is accepted), a body over max_body_bytes -32602 (HTTP 413 on HTTP+JSON)",
            errors
        ),
        check!(
            "bridge/http-json",
            ["BR-1", "BR-13", "BR-14", "BR-15"],
            Must,
            BRIDGE_SEND,
            "on the HTTP+JSON binding, POST /a2a1x/message:send answers {task}, GET /a2a1x/tasks/{id} the same task, an unknown task 404 {error: {code: 404, status, message, details: [ErrorInfo TASK_NOT_FOUND]}}; POST /a2a1x/message:stream answers text/event-stream whose events are the StreamResponses themselves (no JSON-RPC envelope), first {task}, the last a terminal state",
            http_json
        ),
        check!(
            "bridge/streaming",
            ["BR-15", "BR-16"],
            Must,
            BRIDGE_SEND,
            "SendStreamingMessage (to the slow capability when the suite has one, so that the task still runs at the first event) answers text/event-stream whose events are JSON-RPC responses with the request's id: first {task}, then statusUpdates, an artifactUpdate (lastChunk) before a completed final state; the stream ends after the terminal state, and GetTask answers that terminal state; SubscribeToTask of the task streams the task as it is first",
            streaming
        ),
        check!(
            "bridge/bridge-to",
            ["BR-17", "BR-26"],
            Must,
            BRIDGE,
            "NEGOTIATE with A2A-Bridges: a2a1x for a capability on the card answers bridge_to {binding a2a1x, protocol_version 1.0, url: the card's JSONRPC interface, agent_card, skill}; with --gateway, url and agent_card are at the gateway's origin (the endpoint's), never an agent's; without the header there is no bridge_to",
            bridge_to
        ),
    ]
}

/// The origin of the agent's endpoint (`http://host:port`).
fn origin(t: &Trial<'_>) -> String {
    url::Url::parse(&t.ctx.endpoint).map(|u| u.origin().ascii_serialization()).unwrap_or_default()
}

/// The card, or skip when the bridge is not served; probed once per run.
async fn card(t: &mut Trial<'_>) -> Result<(Resp, Value), Stop> {
    let url = format!("{}{AGENT_CARD_PATH}", origin(t));
    let res = match t.ctx.bridge_card.get() {
        Some(r) => r.clone(),
        None => {
            let r = t
                .try_send("GET /.well-known/agent-card.json (is the A2A 1.x bridge served?)", Req::new("GET", &url))
                .await;
            let _ = t.ctx.bridge_card.set(r.clone());
            r
        }
    };
    let resp = res.map_err(|e| Stop::Blocked(format!("GET {url}: no response: {e}")))?;
    if resp.status == 404 {
        return Err(Stop::Skip(format!("the agent does not serve the A2A 1.x bridge (GET {url} is 404)")));
    }
    let card = resp.json().filter(Value::is_object).unwrap_or(Value::Null);
    Ok((resp, card))
}

/// The card as a preparation: 200 with a JSON object, or block (bridge/agent-card reports it).
async fn card_ready(t: &mut Trial<'_>) -> Result<Value, Stop> {
    let (resp, card) = card(t).await?;
    t.step("the Agent Card (preparation)");
    t.require(resp.status == 200 && card.is_object(), "200 with an Agent Card", resp.summary())?;
    Ok(card)
}

/// The capabilities a 1.x caller can meet (BR-4), in the order of the capabilities document.
fn bridged(t: &Trial<'_>) -> Vec<CapabilityDeclaration> {
    t.ctx.disc.decls.iter().filter(|d| d.auth_requirement != AuthRequirement::DidAuth).cloned().collect()
}

/// The skill to send to (auth none) and its payload, or skip.
fn send_target(t: &Trial<'_>) -> Result<(String, Value), Stop> {
    let main = t.ctx.plan.main.as_ref().ok().filter(|p| p.decl.auth_requirement == AuthRequirement::None);
    if let Some(p) = main {
        return Ok((p.decl.name.clone(), p.payload.clone()));
    }
    t.ctx
        .disc
        .decls
        .iter()
        .filter(|d| d.auth_requirement == AuthRequirement::None)
        .find_map(|d| crate::payload::valid(&d.input_schema).map(|p| (d.name.clone(), p)))
        .ok_or_else(|| {
            Stop::Skip("no capability with auth_requirement none whose input schema the suite can fill".into())
        })
}

/// A `POST /a2a1x/jsonrpc` request with `body`, as the suite's unsigned sender.
fn rpc_req(t: &Trial<'_>, body: &Value) -> Req {
    Req::new("POST", format!("{}/a2a1x/jsonrpc", origin(t))).header("A2A-Sender-ID", SENDER_A).json(body)
}

/// A JSON-RPC request.
fn rpc(id: &str, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A `SendMessageRequest` with one data part, naming the skill.
fn send_params(skill: &str, payload: &Value) -> Value {
    let message_id = format!("conformance-{}", super::sessions::random_text(16));
    json!({"message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"data": payload}],
        "metadata": {"skill": skill}}})
}

/// The Task states of A2A 1.0 that are terminal.
fn terminal_state(s: &str) -> bool {
    matches!(s, "TASK_STATE_COMPLETED" | "TASK_STATE_FAILED" | "TASK_STATE_CANCELED" | "TASK_STATE_REJECTED")
}

/// BR-12's state of an execution status.
fn state_of(status: &str) -> &'static str {
    match status {
        "received" | "accepted" => "TASK_STATE_SUBMITTED",
        "running" => "TASK_STATE_WORKING",
        "succeeded" => "TASK_STATE_COMPLETED",
        "failed" | "timed_out" => "TASK_STATE_FAILED",
        "canceled" => "TASK_STATE_CANCELED",
        _ => "(no state)",
    }
}

/// Whether any member of `v`, at any depth, is an empty string, array or object or `false` (BR-4).
fn empties(v: &Value, path: &str, out: &mut Vec<String>) {
    match v {
        Value::String(s) if s.is_empty() => out.push(path.to_owned()),
        Value::Bool(false) => out.push(path.to_owned()),
        Value::Array(a) if a.is_empty() => out.push(path.to_owned()),
        Value::Object(o) if o.is_empty() => out.push(path.to_owned()),
        Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| empties(x, &format!("{path}/{i}"), out)),
        Value::Object(o) => o.iter().for_each(|(k, x)| empties(x, &format!("{path}/{k}"), out)),
        _ => {}
    }
}

/// BR-4's skill of a capability.
fn expected_skill(d: &CapabilityDeclaration) -> Value {
    let mut tags = vec![json!("a2a-handshake"), json!(format!("auth:{}", d.auth_requirement.as_str()))];
    tags.extend(d.region_restriction.iter().map(|r| json!(format!("region:{r}"))));
    let mut skill = json!({"id": d.name, "name": d.name, "tags": tags,
        "inputModes": ["application/json"], "outputModes": ["application/json"]});
    if !d.description.is_empty() {
        skill["description"] = json!(d.description);
    }
    skill
}

async fn agent_card(t: &mut Trial<'_>) -> Outcome {
    let (resp, card) = card(t).await?;
    t.step("the Agent Card");
    t.check(resp.status == 200, "status 200", resp.summary());
    t.check(
        crate::sse::mime(&resp) == "application/json",
        "Content-Type: application/json",
        format!("{:?}", resp.header("content-type")),
    );
    t.check(
        resp.header("access-control-allow-origin") == Some("*"),
        "Access-Control-Allow-Origin: *",
        format!("{:?}", resp.header("access-control-allow-origin")),
    );
    t.check(
        resp.header("a2a-version") == Some(PROTOCOL_VERSION),
        "A2A-Version: 1.0",
        format!("{:?}", resp.header("a2a-version")),
    );
    t.ensure(card.is_object(), "a JSON object", resp.summary())?;
    let ifaces = card["supportedInterfaces"].as_array().cloned().unwrap_or_default();
    let url_of = |binding: &str| {
        ifaces
            .iter()
            .find(|i| i["protocolBinding"] == binding && i["protocolVersion"] == PROTOCOL_VERSION)
            .and_then(|i| i["url"].as_str())
            .map(str::to_owned)
    };
    let rpc_url = url_of(a2a1x::BINDING_JSONRPC);
    let base = rpc_url.as_deref().and_then(|u| u.strip_suffix("/a2a1x/jsonrpc")).map(str::to_owned);
    t.check(
        base.is_some(),
        "supportedInterfaces: a JSONRPC interface, protocolVersion 1.0, at <origin>/a2a1x/jsonrpc",
        show(&card["supportedInterfaces"]),
    );
    let o = base.unwrap_or_default();
    t.check(
        url_of(a2a1x::BINDING_HTTP_JSON) == Some(format!("{o}/a2a1x")),
        format!("supportedInterfaces: an HTTP+JSON interface, protocolVersion 1.0, at {o}/a2a1x"),
        show(&card["supportedInterfaces"]),
    );
    t.check(card["capabilities"]["streaming"] == true, "capabilities.streaming true", show(&card["capabilities"]));
    let ext = card["capabilities"]["extensions"]
        .as_array()
        .and_then(|l| l.iter().find(|e| e["uri"] == "urn:a2a-handshake:0.3"))
        .cloned()
        .unwrap_or(Value::Null);
    let want = json!({"did": t.ctx.agent_did(), "endpoint": format!("{o}/a2a"), "capabilities": format!("{o}/a2a/capabilities")});
    // BR-3's three members, exactly; BR-27 adds `skill_selection` and `default_skill` beside them.
    let three = ["did", "endpoint", "capabilities"].map(|k| ext["params"][k].clone());
    t.check(
        three == ["did", "endpoint", "capabilities"].map(|k| want[k].clone()),
        format!("the handshake extension urn:a2a-handshake:0.3 with params {}", show(&want)),
        show(&ext),
    );
    t.check(
        card["capabilities"].get("pushNotifications").is_none(),
        "no capabilities.pushNotifications",
        show(&card["capabilities"]),
    );
    let expected: Vec<Value> = bridged(t).iter().map(expected_skill).collect();
    let skills = card["skills"].as_array().cloned().unwrap_or_default();
    t.check(
        skills.len() == expected.len()
            && skills.iter().zip(&expected).all(|(s, e)| {
                let mut tags: Vec<&Value> = s["tags"].as_array().map(|a| a.iter().collect()).unwrap_or_default();
                let mut want: Vec<&Value> = e["tags"].as_array().map(|a| a.iter().collect()).unwrap_or_default();
                tags.sort_by_key(|v| v.to_string());
                want.sort_by_key(|v| v.to_string());
                ["id", "name", "description", "inputModes", "outputModes"].iter().all(|k| s.get(*k) == e.get(*k))
                    && tags == want
            }),
        format!("skills: one per capability that is not did_auth, in order: {}", show(&Value::Array(expected))),
        show(&card["skills"]),
    );
    let mut found = Vec::new();
    empties(&card, "", &mut found);
    t.check(found.is_empty(), "no empty string, array or object and no false in the card", format!("{found:?}"));
    let sigs = match a2a1x::card_signatures(&card) {
        Ok(s) => s,
        Err(a2a1x::CardSignatureError::Unsigned) => {
            t.step("the card is unsigned: the agent has no signing key for it (BR-5 applies to agents with one)");
            return Ok(());
        }
        Err(e) => {
            t.check(false, "signatures: a list of JWS {protected, signature}", e.to_string());
            return Err(Stop::Failed);
        }
    };
    verify_signatures(t, &card, &sigs).await
}

/// BR-5, BR-6: an ES256 signature whose kid is `<agent DID>#<key id>` verifies with that key of the agent's document.
async fn verify_signatures(t: &mut Trial<'_>, card: &Value, sigs: &[a2a1x::CardSignature]) -> Outcome {
    let did = t.ctx.disc.agent_did.clone().ok_or_else(|| Stop::Blocked("DISCOVER gave no A2A-Sender-ID".into()))?;
    let parsed = a2a_core::did::Did::parse(&did).map_err(|e| Stop::Blocked(e.to_string()))?;
    let url = parsed
        .document_url(&a2a_core::did::ResolveOptions::with_http_loopback())
        .map_err(|e| Stop::Blocked(e.to_string()))?;
    let r = t.setup(format!("GET {url} (the agent's keys)"), Req::new("GET", url.to_string())).await?;
    let doc = a2a_core::did::DidDocument::parse(&r.body, &parsed);
    t.require(doc.is_ok(), "the agent's DID document", r.summary())?;
    let doc = doc.map_err(|e| Stop::Blocked(e.to_string()))?;
    t.step(format!("{} card signature(s)", sigs.len()));
    let mut reasons = Vec::new();
    for s in sigs {
        t.check(
            s.header.get("typ").and_then(Value::as_str) == Some("JOSE"),
            format!("signature {}: protected header typ JOSE", s.index),
            show(&Value::Object(s.header.clone())),
        );
        let Some((kid_did, key_id)) = s.kid.as_deref().and_then(|k| k.split_once('#')) else {
            reasons.push(format!("signature {}: kid {:?} is not <DID>#<key id>", s.index, s.kid));
            continue;
        };
        if kid_did != did {
            reasons.push(format!("signature {}: kid names {kid_did}, not the agent's DID {did}", s.index));
            continue;
        }
        let verdict = doc
            .find_signing_jwk(key_id)
            .map_err(|e| e.to_string())
            .and_then(|jwk| a2a_core::keys::VerifyingKey::from_jwk(jwk).map_err(|e| e.to_string()))
            .and_then(|key| s.verify(card, &key));
        match verdict {
            Ok(()) => {
                t.check(
                    true,
                    "a signature that verifies with the agent's DID key (BR-6)",
                    format!("signature {} verified", s.index),
                );
                return Ok(());
            }
            Err(e) => reasons.push(e),
        }
    }
    t.check(false, "a signature that verifies with the agent's DID key (BR-6)", reasons.join("; "));
    Err(Stop::Failed)
}

/// The `result` of a JSON-RPC answer with this id, or record why not.
fn rpc_result(t: &mut Trial<'_>, r: &Resp, id: &str, what: &str) -> Option<Value> {
    let body = r.json().unwrap_or(Value::Null);
    let ok = r.status == 200 && body["jsonrpc"] == "2.0" && body["id"] == id && body["result"].is_object();
    t.check(ok, format!("{what}: HTTP 200, a JSON-RPC 2.0 result with id {id:?}"), r.summary());
    ok.then(|| body["result"].clone())
}

/// Checks an A2A 1.0 JSON-RPC error (BR-14): HTTP 200, `A2A-Version: 1.0`, the request's id, the code, and one
/// ErrorInfo with the reason; answers the message.
fn rpc_error(t: &mut Trial<'_>, r: &Resp, id: &Value, code: i64, reason: &str) -> String {
    let body = r.json().unwrap_or(Value::Null);
    let info = &body["error"]["data"];
    let ok = r.status == 200
        && body["jsonrpc"] == "2.0"
        && body["id"] == *id
        && body["error"]["code"] == code
        && body["error"]["message"].is_string()
        && info.as_array().is_some_and(|l| l.len() == 1)
        && info[0]["@type"] == ERROR_INFO_TYPE
        && info[0]["reason"] == reason
        && info[0]["domain"] == "a2a-handshake";
    t.check(
        ok,
        format!(
            "HTTP 200, id {id}, error.code {code}, data: one ErrorInfo (domain a2a-handshake) with reason {reason}"
        ),
        r.summary(),
    );
    t.check(
        r.header("a2a-version") == Some(PROTOCOL_VERSION),
        "A2A-Version: 1.0",
        format!("{:?}", r.header("a2a-version")),
    );
    body["error"]["message"].as_str().unwrap_or("").to_owned()
}

/// Checks a Task as BR-12 describes it: id, contextId, a state, metadata.skill, the artifact when completed.
fn judge_task(t: &mut Trial<'_>, task: &Value, skill: &str) {
    let state = task["status"]["state"].as_str().unwrap_or("");
    t.check(
        task["id"].is_string() && task["contextId"].is_string() && state.starts_with("TASK_STATE_"),
        "a Task with id, contextId and status.state",
        show(task),
    );
    t.check(task["metadata"]["skill"] == skill, format!("metadata.skill {skill:?}"), show(&task["metadata"]));
    if state == "TASK_STATE_COMPLETED" {
        let a = &task["artifacts"][0];
        t.check(
            a["artifactId"] == "result" && a["name"] == "result" && !a["parts"][0]["data"].is_null(),
            "a completed task has the artifact {artifactId: result, name: result, parts: [{data: result}]}",
            show(&task["artifacts"]),
        );
    }
}

async fn send_message(t: &mut Trial<'_>) -> Outcome {
    card_ready(t).await?;
    let (skill, payload) = send_target(t)?;
    let first = send_params(&skill, &payload);
    let r = t.send(format!("SendMessage to {skill}"), rpc_req(t, &rpc("s1", "SendMessage", first.clone()))).await?;
    let task = rpc_result(t, &r, "s1", "SendMessage").map(|v| v["task"].clone()).unwrap_or(Value::Null);
    t.ensure(task.is_object(), "result {task: Task}", r.summary())?;
    judge_task(t, &task, &skill);
    let id = task["id"].as_str().unwrap_or("").to_owned();
    let res =
        t.send("RESULT of the task id, as the sender of the message", t.ctx.request("GET", &result_path(&id))).await?;
    let exec = res.json().unwrap_or(Value::Null);
    t.check(
        res.status == 200 && exec["execution_id"] == id.as_str(),
        "the task id is an execution id of the sender (RESULT 200)",
        res.summary(),
    );
    let status = exec["status"].as_str().unwrap_or("");
    let state = task["status"]["state"].as_str().unwrap_or("");
    if terminal_state(state) || super::is_terminal(status) {
        t.check(
            state_of(status) == state,
            format!("the task's state is BR-12's for the execution's status {status:?}: {}", state_of(status)),
            state.to_owned(),
        );
    }
    let r = t.send("GetTask of the task", rpc_req(t, &rpc("g1", "GetTask", json!({"id": id})))).await?;
    let got = rpc_result(t, &r, "g1", "GetTask").unwrap_or(Value::Null);
    t.check(
        got["id"] == task["id"] && got["contextId"] == task["contextId"] && got["metadata"] == task["metadata"],
        format!("the same task (id {id}, contextId, metadata)"),
        show(&got),
    );
    if terminal_state(state) {
        t.check(
            got["status"]["state"] == task["status"]["state"] && got["artifacts"] == task["artifacts"],
            "a terminal task read again has the same state and artifacts",
            show(&got),
        );
    }
    if t.ctx.disc.has_feature("idempotency") {
        let again = rpc("s2", "SendMessage", json!({"message": first["message"]}));
        let r = t.send("the same message again (same messageId)", rpc_req(t, &again)).await?;
        let task2 = rpc_result(t, &r, "s2", "SendMessage").map(|v| v["task"].clone()).unwrap_or(Value::Null);
        t.check(task2["id"] == id.as_str(), format!("the same task {id} (messageId as Idempotency-Key)"), show(&task2));
    }
    let mut two = send_params(&skill, &payload);
    two["message"]["parts"] = json!([{"data": payload}, {"data": payload}]);
    let r = t.send("a message with two data parts", rpc_req(t, &rpc("p1", "SendMessage", two))).await?;
    rpc_error(t, &r, &json!("p1"), -32602, "INVALID_PARAMS");
    let mut file = send_params(&skill, &payload);
    file["message"]["parts"] = json!([{"url": "https://example.com/report.pdf", "mediaType": "application/pdf"}]);
    let r = t.send("a message with a url part", rpc_req(t, &rpc("p2", "SendMessage", file))).await?;
    rpc_error(t, &r, &json!("p2"), -32005, "CONTENT_TYPE_NOT_SUPPORTED");
    // BR-7: the skill named in message.metadata is the one; one not on the card is refused, not replaced by the skill
    // the payload fits (BR-27 applies to messages that name none).
    let other = send_params("conformance_no_such_skill", &payload);
    let r = t.send("a message naming a skill not on the card", rpc_req(t, &rpc("p3", "SendMessage", other))).await?;
    rpc_error(t, &r, &json!("p3"), -32602, "INVALID_PARAMS");
    let unknown = format!("{id}x");
    let r = t.send("GetTask of an unknown task id", rpc_req(t, &rpc("g2", "GetTask", json!({"id": unknown})))).await?;
    rpc_error(t, &r, &json!("g2"), -32001, "TASK_NOT_FOUND");
    Ok(())
}

async fn errors(t: &mut Trial<'_>) -> Outcome {
    card_ready(t).await?;
    let url = format!("{}/a2a1x/jsonrpc", origin(t));
    let r = t
        .send("not JSON", Req::new("POST", &url).header("Content-Type", "application/json").body(b"{not json".to_vec()))
        .await?;
    rpc_error(t, &r, &Value::Null, -32700, "INVALID_REQUEST");
    let r = t.send("a batch", rpc_req(t, &json!([rpc("b1", "GetTask", json!({"id": "x"}))]))).await?;
    rpc_error(t, &r, &Value::Null, -32600, "INVALID_REQUEST");
    let r = t.send("an unknown method", rpc_req(t, &rpc("m1", "NoSuchMethod", json!({})))).await?;
    rpc_error(t, &r, &json!("m1"), -32601, "METHOD_NOT_FOUND");
    let r = t.send("the A2A 0.3 name tasks/get", rpc_req(t, &rpc("m2", "tasks/get", json!({"id": "x"})))).await?;
    let msg = rpc_error(t, &r, &json!("m2"), -32601, "METHOD_NOT_FOUND");
    t.check(msg.contains("GetTask"), "the message names the 1.0 method GetTask", msg);
    let get = rpc("v1", "GetTask", json!({"id": "conformance-unknown-task"}));
    let r = t.send("A2A-Version: 9.9", rpc_req(t, &get).header("A2A-Version", "9.9")).await?;
    let msg = rpc_error(t, &r, &json!("v1"), -32009, "VERSION_NOT_SUPPORTED");
    t.check(msg.contains("1.0"), "the message names 1.0", msg);
    let r = t
        .send("A2A-Version: 1.0.2 (the patch part is ignored)", rpc_req(t, &get).header("A2A-Version", "1.0.2"))
        .await?;
    rpc_error(t, &r, &json!("v1"), -32001, "TASK_NOT_FOUND");
    let Some(max) = t.ctx.disc.limits.as_ref().map(|l| l.max_body_bytes) else {
        t.step("the agent announces no max_body_bytes: the body limit is not checked");
        return Ok(());
    };
    let big = rpc(
        "o1",
        "GetTask",
        json!({"id": "x".repeat(usize::try_from(max).unwrap_or(usize::MAX - 1).saturating_add(1))}),
    );
    let r = t.try_send(format!("a body over max_body_bytes ({max})"), rpc_req(t, &big)).await;
    match r {
        Ok(r) => {
            let body = r.json().unwrap_or(Value::Null);
            t.check(
                body["error"]["code"] == -32602
                    && body["error"]["message"].as_str().is_some_and(|m| m.contains("max_body_bytes")),
                "error.code -32602 whose message names max_body_bytes",
                r.summary(),
            );
        }
        Err(e) => {
            t.check(false, "a JSON-RPC -32602 answer", format!("no response: {e}"));
        }
    }
    let big =
        send_params("x", &json!({"pad": "x".repeat(usize::try_from(max).unwrap_or(usize::MAX - 1).saturating_add(1))}));
    let req = Req::new("POST", format!("{}/a2a1x/message:send", origin(t))).json(&big);
    if let Ok(r) = t.try_send(format!("HTTP+JSON: a body over max_body_bytes ({max})"), req).await {
        let body = r.json().unwrap_or(Value::Null);
        t.check(
            r.status == 413
                && body["error"]["code"] == 413
                && body["error"]["details"][0]["reason"] == "INVALID_PARAMS",
            "413 {error: {code: 413, details: [ErrorInfo INVALID_PARAMS]}}",
            r.summary(),
        );
    }
    Ok(())
}

async fn http_json(t: &mut Trial<'_>) -> Outcome {
    card_ready(t).await?;
    let (skill, payload) = send_target(t)?;
    let base = format!("{}/a2a1x", origin(t));
    let req = Req::new("POST", format!("{base}/message:send"))
        .header("A2A-Sender-ID", SENDER_A)
        .json(&send_params(&skill, &payload));
    let r = t.send(format!("POST /a2a1x/message:send to {skill}"), req).await?;
    let task = r.json().map(|v| v["task"].clone()).unwrap_or(Value::Null);
    t.check(r.status == 200 && task.is_object(), "200 {task: Task}", r.summary());
    t.ensure(task.is_object(), "a Task", show(&task))?;
    judge_task(t, &task, &skill);
    let id = task["id"].as_str().unwrap_or("").to_owned();
    let req = Req::new("GET", format!("{base}/tasks/{id}")).header("A2A-Sender-ID", SENDER_A);
    let r = t.send("GET /a2a1x/tasks/{id}", req).await?;
    let got = r.json().unwrap_or(Value::Null);
    t.check(
        r.status == 200 && got["id"] == task["id"] && got["contextId"] == task["contextId"],
        format!("200, the same task {id}"),
        r.summary(),
    );
    let req = Req::new("GET", format!("{base}/tasks/{id}x")).header("A2A-Sender-ID", SENDER_A);
    let r = t.send("GET /a2a1x/tasks/{unknown}", req).await?;
    let body = r.json().unwrap_or(Value::Null);
    let e = &body["error"];
    t.check(
        r.status == 404
            && e["code"] == 404
            && e["status"].is_string()
            && e["message"].is_string()
            && e["details"][0]["@type"] == ERROR_INFO_TYPE
            && e["details"][0]["reason"] == "TASK_NOT_FOUND",
        "404 {error: {code: 404, status, message, details: [ErrorInfo TASK_NOT_FOUND]}}",
        r.summary(),
    );
    // BR-15 on the HTTP+JSON binding: message:stream streams the StreamResponse events themselves.
    let req = Req::new("POST", format!("{base}/message:stream"))
        .header("A2A-Sender-ID", SENDER_A)
        .json(&send_params(&skill, &payload));
    let mut open = t.open_stream(format!("HTTP+JSON: POST /a2a1x/message:stream to {skill}"), req).await?;
    let res = if open.stream.is_event_stream() {
        open.stream.events_to_end(MAX_EVENTS, t.ctx.opts.result_timeout).await.map_err(|(_, e)| e)
    } else {
        Err("not text/event-stream".to_owned())
    };
    let resp = t.close_stream(open);
    let events: Vec<Value> =
        res.as_ref().map(|e| e.iter().map(|x| x.json().unwrap_or(Value::Null)).collect()).unwrap_or_default();
    let last = events.last().cloned().unwrap_or(Value::Null);
    let last_state =
        last["statusUpdate"]["status"]["state"].as_str().or_else(|| last["task"]["status"]["state"].as_str());
    t.check(
        res.is_ok()
            && events.first().is_some_and(|e| e["task"].is_object())
            && events.iter().all(|e| e.is_object() && e.get("jsonrpc").is_none())
            && last_state.is_some_and(terminal_state),
        "text/event-stream whose events are StreamResponses themselves (no JSON-RPC envelope): first {task}, the last a terminal state",
        format!("{} {:?}", resp.summary(), events.iter().map(show).collect::<Vec<_>>()),
    );
    Ok(())
}

/// The skill a stream drives (BR-15) and its payload: the slow capability when the suite has one with
/// auth_requirement none, so that the task is still running at the stream's first event and the events before the
/// terminal one (the statusUpdates, and the artifactUpdate before a completed final state) are there to be seen;
/// else the skill the other bridge checks send to. A task already terminal at the first event makes a one-event
/// stream, which shows none of them.
fn stream_target(t: &Trial<'_>) -> Result<(String, Value), Stop> {
    if let Ok(p) = &t.ctx.plan.slow
        && p.decl.auth_requirement == AuthRequirement::None
    {
        t.uses(p);
        return Ok((p.decl.name.clone(), p.payload.clone()));
    }
    send_target(t)
}

async fn streaming(t: &mut Trial<'_>) -> Outcome {
    card_ready(t).await?;
    let (skill, payload) = stream_target(t)?;
    let req = rpc_req(t, &rpc("st1", "SendStreamingMessage", send_params(&skill, &payload)));
    let mut open = t.open_stream(format!("SendStreamingMessage to {skill}"), req).await?;
    if !open.stream.is_event_stream() {
        let resp = open.stream.read_plain(Duration::from_secs(5)).await;
        t.close_stream(open);
        t.check(false, "200 with Content-Type: text/event-stream", resp.summary());
        return Err(Stop::Failed);
    }
    let res = open.stream.events_to_end(MAX_EVENTS, t.ctx.opts.result_timeout).await;
    t.close_stream(open);
    let events = match res {
        Ok(e) => e,
        Err((e, why)) => {
            t.check(
                false,
                "the agent ends the stream after the terminal state",
                format!("after {} events: {why}", e.len()),
            );
            e
        }
    };
    let results: Vec<Value> = events.iter().map(|e| e.json().unwrap_or(Value::Null)).collect();
    t.check(
        !results.is_empty()
            && results.iter().all(|r| r["jsonrpc"] == "2.0" && r["id"] == "st1" && r["result"].is_object()),
        "every event a JSON-RPC response with id \"st1\" and a result",
        format!("{:?}", events.iter().map(crate::sse::Event::summary).collect::<Vec<_>>()),
    );
    let first = results.first().map(|r| r["result"]["task"].clone()).unwrap_or(Value::Null);
    t.ensure(
        first.is_object(),
        "the first event {task: Task}",
        show(&results.first().cloned().unwrap_or(Value::Null)),
    )?;
    judge_task(t, &first, &skill);
    if terminal_state(first["status"]["state"].as_str().unwrap_or("")) {
        t.step(format!(
            "the task was already terminal at the stream's first event: the statusUpdate and artifactUpdate events \
             of BR-15 could not be seen ({skill} ran too fast; name a slower capability with --slow-capability)"
        ));
    }
    let last = results.last().map(|r| r["result"].clone()).unwrap_or(Value::Null);
    let last_status = if last["statusUpdate"].is_object() {
        last["statusUpdate"]["status"].clone()
    } else {
        last["task"]["status"].clone()
    };
    let state = last_status["state"].as_str().unwrap_or("").to_owned();
    t.check(terminal_state(&state), "the last event a terminal state", show(&last));
    if state == "TASK_STATE_COMPLETED" && results.len() > 1 {
        let before = &results[results.len() - 2]["result"]["artifactUpdate"];
        t.check(
            before["taskId"] == first["id"]
                && before["lastChunk"] == true
                && before["artifact"]["artifactId"] == "result",
            "an artifactUpdate (lastChunk true, the result artifact) before the final statusUpdate",
            show(before),
        );
    }
    let r = t.send("GetTask after the stream", rpc_req(t, &rpc("st2", "GetTask", json!({"id": first["id"]})))).await?;
    let got = rpc_result(t, &r, "st2", "GetTask").unwrap_or(Value::Null);
    t.check(
        got["status"]["state"] == state.as_str(),
        format!("GetTask answers the terminal state {state}"),
        show(&got["status"]),
    );
    let req = rpc_req(t, &rpc("st3", "SubscribeToTask", json!({"id": first["id"]})));
    let mut open = t.open_stream("SubscribeToTask of the terminal task", req).await?;
    let res = if open.stream.is_event_stream() {
        open.stream.events_to_end(MAX_EVENTS, t.ctx.opts.result_timeout).await.map_err(|(_, e)| e)
    } else {
        Err("not text/event-stream".to_owned())
    };
    let resp = t.close_stream(open);
    let first_event =
        res.as_ref().ok().and_then(|e| e.first()).and_then(crate::sse::Event::json).unwrap_or(Value::Null);
    t.check(
        res.is_ok() && first_event["id"] == "st3" && first_event["result"]["task"]["status"]["state"] == state.as_str(),
        format!("a stream whose first event is the task as it is ({state}), then the end"),
        format!("{} {}", resp.summary(), show(&first_event)),
    );
    Ok(())
}

async fn bridge_to(t: &mut Trial<'_>) -> Outcome {
    let card = card_ready(t).await?;
    let plan = main_plan(t)?;
    if plan.decl.auth_requirement == AuthRequirement::DidAuth {
        return Err(Stop::Skip("the capability the suite drives is did_auth, not on the card".into()));
    }
    let name = plan.decl.name.clone();
    let rpc_url = card["supportedInterfaces"]
        .as_array()
        .and_then(|l| l.iter().find(|i| i["protocolBinding"] == a2a1x::BINDING_JSONRPC))
        .map_or(Value::Null, |i| i["url"].clone());
    let body = negotiate_body(&name, &plan.decl.input_schema);
    let req = t.ctx.for_cap(&plan, "POST", "/negotiate").header("A2A-Bridges", "a2a1x").json(&body);
    let r = t.send(format!("NEGOTIATE {name} with A2A-Bridges: a2a1x"), req).await?;
    let got = r.json().map(|v| v["bridge_to"].clone()).unwrap_or(Value::Null);
    let card_url =
        rpc_url.as_str().and_then(|u| u.strip_suffix("/a2a1x/jsonrpc")).map(|o| format!("{o}{AGENT_CARD_PATH}"));
    let want = json!({"binding": a2a1x::BRIDGE_BINDING, "protocol_version": PROTOCOL_VERSION, "url": rpc_url,
        "agent_card": card_url, "skill": name});
    t.check(r.status == 200 && got == want, format!("200 with bridge_to {}", show(&want)), r.summary());
    if t.ctx.opts.gateway {
        // BR-26: the gateway is the caller's edge; an agent's own bridge behind it must not be named.
        let gateway = origin(t);
        let at = |v: &Value| v.as_str().and_then(|u| url::Url::parse(u).ok()).map(|u| u.origin().ascii_serialization());
        t.check(
            at(&got["url"]).as_deref() == Some(gateway.as_str())
                && at(&got["agent_card"]).as_deref() == Some(gateway.as_str()),
            format!("bridge_to's url and agent_card at the gateway's origin {gateway} (BR-26), not an agent's"),
            show(&got),
        );
    }
    let req = t.ctx.for_cap(&plan, "POST", "/negotiate").json(&body);
    let r = t.send(format!("NEGOTIATE {name} without A2A-Bridges"), req).await?;
    let got = r.json().map(|v| v.get("bridge_to").cloned());
    t.check(r.status == 200 && got == Some(None), "200 without bridge_to", r.summary());
    Ok(())
}
