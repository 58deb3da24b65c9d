//! The bridge to A2A 1.x (spec §20, BR-1..BR-18) over real loopback HTTP: the signed card, the JSON-RPC and HTTP+JSON
//! operations, streams, limits, errors and `bridge_to`.

use std::sync::Arc;
use std::time::Duration;

use a2a_core::a2a1x;
use a2a_core::capability::AuthRequirement;
use a2a_core::keys::SigningKey;
use a2a_server::a2a1x::{Bridge, BridgeLimits, BridgeOptions};
use a2a_server::handler::ExecutionContext;
use a2a_server::{AgentBuilder, ApiKey, Limits};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::common::{decl, standard};

pub struct BridgedAgent {
    pub base: String,
    pub key: SigningKey,
    pub http: reqwest::Client,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// The standard test agent plus an api_key and a did_auth capability, bridged with a card signing key.
pub async fn start(limits: BridgeLimits, agent_limits: Limits) -> BridgedAgent {
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut keyed = decl("query_ledger", json!({"type": "object"}));
    keyed.auth_requirement = AuthRequirement::ApiKey;
    let mut signed = decl("sign_contract", json!({"type": "object"}));
    signed.auth_requirement = AuthRequirement::DidAuth;
    let builder: AgentBuilder = standard(runs)
        .name("Bridge test agent")
        .limits(agent_limits)
        .capability(keyed, |_c: ExecutionContext, p: Value| async move { Ok(json!({"ledger": p})) })
        .capability(signed, |_c: ExecutionContext, _p: Value| async move { Ok(json!({})) })
        .api_key(ApiKey::new("s3cret-key"));
    let agent = builder.build().expect("agent builds");
    let key = SigningKey::generate().expect("key");
    let bridge = Bridge::new(
        &agent,
        BridgeOptions {
            public_url: None,
            signing_key: Some(("key-1".into(), key.clone())),
            default_skill: None,
            limits,
        },
    )
    .expect("bridge");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let app = agent.router().merge(bridge.router());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let agent_limits = agent.engine().limits().clone();
    tokio::spawn(async move {
        let _keep = agent;
        let shutdown = async {
            let _ = rx.await;
        };
        let _ = a2a_server::serve::serve(listener, app, &agent_limits, shutdown, Duration::from_secs(1)).await;
    });
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client");
    BridgedAgent { base, key, http, _stop: tx }
}

impl BridgedAgent {
    pub async fn rpc_with(&self, method: &str, params: Value, headers: &[(&str, &str)]) -> Value {
        let mut rb = self
            .http
            .post(format!("{}/a2a1x/jsonrpc", self.base))
            .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}));
        for (k, v) in headers {
            rb = rb.header(*k, *v);
        }
        let resp = rb.send().await.expect("request");
        assert_eq!(resp.status(), 200, "JSON-RPC answers are HTTP 200");
        assert_eq!(resp.headers()["a2a-version"], "1.0");
        resp.json().await.expect("JSON")
    }

    pub async fn rpc(&self, method: &str, params: Value) -> Value {
        self.rpc_with(method, params, &[]).await
    }

    /// The text of an SSE answer, split into its events' `data`.
    pub async fn events(resp: reqwest::Response) -> Vec<Value> {
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        let text = resp.text().await.expect("stream");
        text.split("\n\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).expect("event JSON"))
            .collect()
    }
}

pub fn message(skill: &str, data: Value) -> Value {
    json!({"message": {"messageId": uuid(), "role": "ROLE_USER", "parts": [{"data": data}],
                       "metadata": {"skill": skill}}})
}

fn uuid() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("random");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn report() -> Value {
    json!({"title": "Lift 3 out of service", "timestamp": "2026-11-29T21:00:00Z"})
}

fn code(v: &Value) -> i64 {
    v["error"]["code"].as_i64().unwrap_or_else(|| panic!("not an error: {v}"))
}

fn reason_code(v: &Value) -> &str {
    v["error"]["data"][0]["metadata"]["code"].as_str().unwrap_or("")
}

#[tokio::test]
async fn the_card_lists_the_skills_a_1x_caller_can_meet_and_its_signature_verifies() {
    let a = start(BridgeLimits::default(), Limits::default()).await;
    let resp = a.http.get(format!("{}/.well-known/agent-card.json", a.base)).send().await.expect("test value");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["access-control-allow-origin"], "*");
    let card: Value = resp.json().await.expect("test value");
    assert_eq!(card["name"], "Bridge test agent");
    let ids: Vec<&str> =
        card["skills"].as_array().expect("test value").iter().map(|s| s["id"].as_str().expect("test value")).collect();
    // BR-4: every capability but the did_auth one, in order.
    assert_eq!(ids, ["submit_report", "run_slow_task", "fail_on_purpose", "crash_on_purpose", "query_ledger"]);
    assert_eq!(card["skills"][4]["tags"], json!(["a2a-handshake", "auth:api_key"]));
    assert_eq!(card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["name"], "A2A-Api-Key");
    assert_eq!(card["capabilities"]["streaming"], true);
    let ifaces = card["supportedInterfaces"].as_array().expect("test value");
    assert_eq!(ifaces[0]["url"], format!("{}/a2a1x/jsonrpc", a.base));
    assert_eq!(ifaces[0]["protocolBinding"], "JSONRPC");
    assert_eq!(ifaces[1]["protocolBinding"], "HTTP+JSON");
    assert_eq!(card["capabilities"]["extensions"][0]["params"]["did"], "did:web:agent.example.com");
    // BR-5: one ES256 signature by the agent's key, kid = DID URL.
    let sigs = a2a1x::card_signatures(&card).expect("test value");
    assert_eq!(sigs.len(), 1);
    assert_eq!(sigs[0].kid.as_deref(), Some("did:web:agent.example.com#key-1"));
    sigs[0].verify(&card, a.key.verifying_key()).expect("the card's signature verifies");
    let mut forged = card.clone();
    forged["skills"][0]["description"] = json!("something else");
    assert!(sigs[0].verify(&forged, a.key.verifying_key()).is_err(), "a changed card does not verify");
    // BR-4: no empty member and no false anywhere (the canonical form does not depend on dropping empties).
    assert_eq!(a2a1x::drop_empty(&card).expect("test value"), card);
}

#[tokio::test]
async fn send_message_runs_the_skill_and_get_and_list_read_the_task() {
    let a = start(BridgeLimits::default(), Limits::default()).await;
    let mut req = message("submit_report", report());
    req["message"]["contextId"] = json!("ctx-test-1");
    let v = a.rpc("SendMessage", req.clone()).await;
    assert_eq!(v["id"], 7);
    let task = &v["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
    assert_eq!(task["contextId"], "ctx-test-1");
    assert_eq!(task["artifacts"][0]["parts"][0]["data"], json!({"filed": report()}));
    assert_eq!(task["metadata"]["skill"], "submit_report");
    assert_eq!(task["history"][0]["parts"][0]["data"], report());
    let id = task["id"].as_str().expect("test value").to_owned();
    // BR-12: the task id is an execution id of the anonymous sender.
    assert!(id.starts_with("did:web:a2a1x.anonymous.invalid_"), "{id}");
    // BR-11: the same messageId again is the same task; nothing runs twice.
    let again = a.rpc("SendMessage", req).await;
    assert_eq!(again["result"]["task"]["id"], id.as_str());
    let got = a.rpc("GetTask", json!({"id": id})).await;
    assert_eq!(got["result"], *task);
    // BR-13: ListTasks by contextId; an anonymous caller must give one.
    let list = a.rpc("ListTasks", json!({"contextId": "ctx-test-1"})).await;
    assert_eq!(list["result"]["tasks"].as_array().expect("test value").len(), 1);
    assert_eq!(list["result"]["totalSize"], 1);
    assert_eq!(code(&a.rpc("ListTasks", json!({})).await), -32602);
    // A caller naming its DID sees only its own tasks.
    let me = [("A2A-Sender-ID", "did:web:caller.example.com")];
    let mine = a.rpc_with("SendMessage", message("submit_report", report()), &me).await;
    let mine_id = mine["result"]["task"]["id"].as_str().expect("test value").to_owned();
    assert!(mine_id.starts_with("did:web:caller.example.com_"));
    let list = a.rpc_with("ListTasks", json!({}), &me).await;
    assert_eq!(list["result"]["tasks"][0]["id"], mine_id.as_str());
    assert_eq!(code(&a.rpc("GetTask", json!({"id": mine_id})).await), -32001, "another sender's task is unknown");
}

#[tokio::test]
async fn a_text_message_to_the_only_skill_and_failures_map_to_failed_tasks() {
    let a = start(BridgeLimits::default(), Limits::default()).await;
    let v = a.rpc("SendMessage", message("fail_on_purpose", json!({}))).await;
    let task = &v["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{v}");
    assert_eq!(task["status"]["message"]["parts"][0]["text"], "it failed on purpose");
    assert_eq!(task["status"]["message"]["parts"][1]["data"]["code"], "handler_failed");
    // BR-8: one text part becomes {"text": ...} (here refused by the schema, with its §12 code).
    let text = json!({"message": {"messageId": "m-text-1", "role": "ROLE_USER", "parts": [{"text": "hello"}],
                                  "metadata": {"skill": "submit_report"}}});
    let v = a.rpc("SendMessage", text).await;
    assert_eq!(code(&v), -32602);
    assert_eq!(reason_code(&v), "payload_invalid");
    assert!(v["error"]["message"].as_str().expect("test value").contains("title"), "{v}");
}

#[tokio::test]
async fn bad_requests_get_a2a_1x_errors_with_readable_messages() {
    let a = start(BridgeLimits { max_parts: 2, max_text_bytes: 8, ..BridgeLimits::default() }, Limits::default()).await;
    // BR-7: several skills and none named.
    let v = a
        .rpc("SendMessage", json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"data": {}}]}}))
        .await;
    assert_eq!(code(&v), -32602);
    assert!(v["error"]["message"].as_str().expect("test value").contains("submit_report"), "names the skills: {v}");
    // A did_auth skill is not reachable over 1.x.
    let v = a.rpc("SendMessage", message("sign_contract", json!({}))).await;
    assert_eq!((code(&v), reason_code(&v)), (-32602, "no_matching_capability"));
    // BR-8: files are ContentTypeNotSupported.
    let mut file = message("submit_report", report());
    file["message"]["parts"] = json!([{"url": "https://example.com/a.pdf"}]);
    assert_eq!(code(&a.rpc("SendMessage", file).await), -32005);
    // BR-9: parts and text limits.
    let mut many = message("submit_report", report());
    many["message"]["parts"] = json!([{"text": "a"}, {"text": "b"}, {"data": report()}]);
    let v = a.rpc("SendMessage", many).await;
    assert_eq!(code(&v), -32602);
    assert!(v["error"]["message"].as_str().expect("test value").contains("max_parts"), "{v}");
    let mut long = message("submit_report", report());
    long["message"]["parts"] = json!([{"text": "more than eight bytes"}]);
    let v = a.rpc("SendMessage", long).await;
    assert!(v["error"]["message"].as_str().expect("test value").contains("max_text_bytes"), "{v}");
    // JSON-RPC framing.
    let raw = |body: &'static str| {
        a.http.post(format!("{}/a2a1x/jsonrpc", a.base)).header("content-type", "application/json").body(body)
    };
    let v: Value = raw("{not json").send().await.expect("test value").json().await.expect("test value");
    assert_eq!((code(&v), v["id"].clone()), (-32700, Value::Null));
    let v: Value = raw("[]").send().await.expect("test value").json().await.expect("test value");
    assert_eq!(code(&v), -32600);
    let v: Value = raw(r#"{"jsonrpc":"1.0","id":1,"method":"GetTask"}"#)
        .send()
        .await
        .expect("test value")
        .json()
        .await
        .expect("test value");
    assert_eq!(code(&v), -32600);
    let v = a.rpc("message/send", json!({})).await;
    assert_eq!(code(&v), -32601);
    assert!(
        v["error"]["message"].as_str().expect("test value").contains("SendMessage"),
        "the 0.3 name gets a hint: {v}"
    );
    assert_eq!(code(&a.rpc("CreateTaskPushNotificationConfig", json!({})).await), -32003);
    // BR-2: versions.
    let v = a.rpc_with("GetTask", json!({"id": "x"}), &[("A2A-Version", "0.3")]).await;
    assert_eq!(code(&v), -32009);
    assert_eq!(v["error"]["data"][0]["reason"], "VERSION_NOT_SUPPORTED");
    let v = a.rpc_with("GetTask", json!({"id": "x"}), &[("A2A-Version", "1.0.3")]).await;
    assert_eq!(code(&v), -32001, "1.0.3 is 1.0; the task is unknown: {v}");
    // BR-13: unknown task, not cancelable.
    assert_eq!(
        code(&a.rpc("CancelTask", json!({"id": "did:web:x.example.com_1_aaaaaaaaaaaaaaaaaaaaaaaaaa"})).await),
        -32001
    );
    let done = a.rpc("SendMessage", message("submit_report", report())).await;
    let id = done["result"]["task"]["id"].clone();
    assert_eq!(code(&a.rpc("CancelTask", json!({"id": id})).await), -32002);
    // BR-10: an api_key skill without and with its key.
    let v = a.rpc("SendMessage", message("query_ledger", json!({"n": 1}))).await;
    assert_eq!((code(&v), reason_code(&v)), (-32600, "auth_required"));
    let v = a.rpc_with("SendMessage", message("query_ledger", json!({"n": 1})), &[("A2A-Api-Key", "s3cret-key")]).await;
    assert_eq!(v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
}

#[tokio::test]
async fn the_body_limit_is_the_agents() {
    let mut limits = Limits::default();
    limits.max_body_bytes = 512;
    let a = start(BridgeLimits::default(), limits).await;
    let big = message("submit_report", json!({"title": "x".repeat(600), "timestamp": "2026-11-29T21:00:00Z"}));
    let v = a.rpc("SendMessage", big.clone()).await;
    assert_eq!((code(&v), reason_code(&v)), (-32602, "payload_too_large"));
    let resp = a.http.post(format!("{}/a2a1x/message:send", a.base)).json(&big).send().await.expect("test value");
    assert_eq!(resp.status(), 413);
    let body: Value = resp.json().await.expect("test value");
    assert_eq!(body["error"]["details"][0]["metadata"]["code"], "payload_too_large");
}

#[tokio::test]
async fn a_running_task_is_canceled_and_return_immediately_answers_at_once() {
    let a = start(BridgeLimits::default(), Limits::default()).await;
    let mut req = message("run_slow_task", json!({"ms": 20_000}));
    req["configuration"] = json!({"returnImmediately": true});
    let started = std::time::Instant::now();
    let v = a.rpc("SendMessage", req).await;
    // At once: long before the task's 20 s of work (10 s: ample on a loaded machine).
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    let task = &v["result"]["task"];
    assert!(matches!(task["status"]["state"].as_str(), Some("TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING")), "{v}");
    let v = a.rpc("CancelTask", json!({"id": task["id"]})).await;
    assert_eq!(v["result"]["status"]["state"], "TASK_STATE_CANCELED", "{v}");
    assert_eq!(v["result"]["status"]["message"]["parts"][1]["data"]["code"], "canceled");
}

#[tokio::test]
async fn a_stream_reports_each_state_and_ends_with_the_same_task_as_get() {
    let a = start(BridgeLimits::default(), Limits::default()).await;
    let resp = a
        .http
        .post(format!("{}/a2a1x/jsonrpc", a.base))
        .json(&json!({"jsonrpc": "2.0", "id": "s1", "method": "SendStreamingMessage",
                      "params": message("run_slow_task", json!({"ms": 600}))}))
        .send()
        .await
        .expect("test value");
    let events = BridgedAgent::events(resp).await;
    assert!(events.iter().all(|e| e["id"] == "s1" && e["jsonrpc"] == "2.0"));
    let results: Vec<&Value> = events.iter().map(|e| &e["result"]).collect();
    assert!(results[0]["task"].is_object(), "the first event is the task: {results:?}");
    // Each state once, in order, ending completed; the first event is the task as it was when it started.
    let mut states: Vec<&str> = vec![results[0]["task"]["status"]["state"].as_str().expect("test value")];
    states.extend(results.iter().filter_map(|r| r["statusUpdate"]["status"]["state"].as_str()));
    let order = ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"];
    let mut sorted = states.clone();
    sorted.sort_by_key(|s| order.iter().position(|o| o == s));
    sorted.dedup();
    assert_eq!(states, sorted, "{results:?}");
    assert_eq!(states.last(), Some(&"TASK_STATE_COMPLETED"));
    assert!(states.contains(&"TASK_STATE_WORKING"), "a 600 ms task is seen working: {results:?}");
    let n = results.len();
    assert_eq!(results[n - 2]["artifactUpdate"]["artifact"]["parts"][0]["data"], json!({"slept_ms": 600}));
    assert_eq!(results[n - 2]["artifactUpdate"]["lastChunk"], true);
    let id = results[0]["task"]["id"].clone();
    let got = a.rpc("GetTask", json!({"id": id})).await;
    assert_eq!(got["result"]["status"], results[n - 1]["statusUpdate"]["status"]);
    assert_eq!(got["result"]["artifacts"][0], results[n - 2]["artifactUpdate"]["artifact"]);
    // BR-16: resubscribing to a finished task gives the task as it is, then ends.
    let resp = a
        .http
        .post(format!("{}/a2a1x/jsonrpc", a.base))
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": id}}))
        .send()
        .await
        .expect("test value");
    let again = BridgedAgent::events(resp).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0]["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn a_dropped_stream_loses_nothing_and_the_stream_limit_holds() {
    let a = start(BridgeLimits { max_streams: 1, ..BridgeLimits::default() }, Limits::default()).await;
    let url = format!("{}/a2a1x/message:stream", a.base);
    // The task lasts long enough that the first stream is still open when the second is asked for.
    let mut first =
        a.http.post(&url).json(&message("run_slow_task", json!({"ms": 3000}))).send().await.expect("test value");
    let chunk = first.chunk().await.expect("test value").expect("the first event");
    let ev: Value =
        serde_json::from_slice(chunk.strip_prefix(b"data: ").expect("test value").trim_ascii()).expect("test value");
    let id = ev["task"]["id"].as_str().expect("test value").to_owned();
    // The only slot is taken.
    let resp = a.http.post(&url).json(&message("run_slow_task", json!({"ms": 1}))).send().await.expect("test value");
    assert_eq!(resp.status(), 503);
    assert_eq!(resp.headers().get("retry-after").map(|v| v.as_bytes()), Some(&b"1"[..]));
    let body: Value = resp.json().await.expect("test value");
    assert_eq!(body["error"]["details"][0]["metadata"]["code"], "overloaded");
    // Drop the stream; the task runs on and a resubscription sees it finish.
    drop(first);
    // The agent notices the closed connection and frees its slot (how soon depends on the machine's load).
    let until = std::time::Instant::now() + Duration::from_secs(20);
    let resp = loop {
        let resp = a.http.get(format!("{}/a2a1x/tasks/{id}:subscribe", a.base)).send().await.expect("test value");
        if resp.status() != 503 {
            break resp;
        }
        assert!(std::time::Instant::now() < until, "the slot of the dropped stream was not freed in 20 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let events = BridgedAgent::events(resp).await;
    let last = events.last().expect("test value");
    // A re-subscription that lands after the task ended gets the task itself (its terminal state), one that lands
    // before gets the status update that ends the stream: either way nothing is lost.
    let state = if last.get("task").is_some() {
        &last["task"]["status"]["state"]
    } else {
        &last["statusUpdate"]["status"]["state"]
    };
    assert_eq!(state, "TASK_STATE_COMPLETED", "{events:?}");
}

#[tokio::test]
async fn the_http_json_binding_serves_the_same_operations() {
    let a = start(BridgeLimits::default(), Limits::default()).await;
    let b = |p: &str| format!("{}/a2a1x{p}", a.base);
    let resp =
        a.http.post(b("/message:send")).json(&message("submit_report", report())).send().await.expect("test value");
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.expect("test value");
    let id = v["task"]["id"].as_str().expect("test value").to_owned();
    let ctx = v["task"]["contextId"].as_str().expect("test value").to_owned();
    let got: Value =
        a.http.get(b(&format!("/tasks/{id}"))).send().await.expect("test value").json().await.expect("test value");
    assert_eq!(got, v["task"]);
    let list: Value = a
        .http
        .get(b(&format!("/tasks?contextId={ctx}")))
        .send()
        .await
        .expect("test value")
        .json()
        .await
        .expect("test value");
    assert_eq!(list["tasks"][0]["id"], id.as_str());
    let resp = a.http.post(b(&format!("/tasks/{id}:cancel"))).json(&json!({})).send().await.expect("test value");
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.expect("test value");
    assert_eq!(body["error"]["details"][0]["reason"], "TASK_NOT_CANCELABLE");
    let resp = a.http.get(b("/tasks/nope")).send().await.expect("test value");
    assert_eq!(resp.status(), 404);
    let body: Value = resp.json().await.expect("test value");
    assert_eq!(body["error"]["details"][0]["reason"], "TASK_NOT_FOUND");
    let resp = a.http.get(b("/nowhere")).send().await.expect("test value");
    assert_eq!(resp.status(), 404);
    let resp =
        a.http.post(b("/message:stream")).json(&message("submit_report", report())).send().await.expect("test value");
    let events = BridgedAgent::events(resp).await;
    assert!(events[0]["task"].is_object());
    assert_eq!(events.last().expect("test value")["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn negotiate_offers_bridge_to_when_the_caller_announces_a2a1x() {
    let a = start(BridgeLimits::default(), Limits::default()).await;
    let neg = |bridges: Option<&'static str>, cap: &'static str| {
        let mut rb = a
            .http
            .post(format!("{}/a2a/negotiate", a.base))
            .header("A2A-Version", "0.3")
            .header("A2A-Sender-ID", "did:web:caller.example.com")
            .json(&json!({"target_capability": cap, "proposed_schema": {"type": "object"}}));
        if let Some(b) = bridges {
            rb = rb.header("A2A-Bridges", b);
        }
        async move { rb.send().await.expect("test value").json::<Value>().await.expect("test value") }
    };
    let v = neg(Some("grpc, a2a1x"), "fail_on_purpose").await;
    assert_eq!(
        v["bridge_to"],
        json!({"binding": "a2a1x", "protocol_version": "1.0", "url": format!("{}/a2a1x/jsonrpc", a.base),
               "agent_card": format!("{}/.well-known/agent-card.json", a.base), "skill": "fail_on_purpose"})
    );
    assert!(v["negotiation_id"].is_string(), "the negotiation is made as usual");
    assert!(neg(None, "fail_on_purpose").await.get("bridge_to").is_none());
    assert!(neg(Some("a2a1x"), "sign_contract").await.get("bridge_to").is_none(), "not for a did_auth skill");
}

/// BR-27: the default skill must be a skill of the card (not a did_auth capability, not an unknown name).
#[test]
fn a_default_skill_that_is_not_on_the_card_is_refused_at_build() {
    let mut signed = decl("sign_contract", json!({"type": "object"}));
    signed.auth_requirement = AuthRequirement::DidAuth;
    let agent = standard(Arc::new(std::sync::atomic::AtomicUsize::new(0)))
        .capability(signed, |_c: ExecutionContext, _p: Value| async move { Ok(json!({})) })
        .build()
        .expect("agent builds");
    for wrong in ["sign_contract", "no_such_skill"] {
        let opts = BridgeOptions { default_skill: Some(wrong.into()), ..BridgeOptions::default() };
        let e = Bridge::new(&agent, opts).err().expect("refused");
        assert!(e.to_string().contains(wrong) && e.to_string().contains("submit_report"), "{e}");
    }
    let opts = BridgeOptions { default_skill: Some("submit_report".into()), ..BridgeOptions::default() };
    assert!(Bridge::new(&agent, opts).is_ok());
}

#[tokio::test]
async fn a_full_body_budget_is_answered_503_overloaded_with_retry_after() {
    // LIM-7 on the bridge's HTTP+JSON binding: a body stalled after 3 KiB holds the budget of 4 KiB; a second body
    // that would take it past is refused 503 `overloaded` with `Retry-After`.
    use tokio::io::AsyncWriteExt;
    let mut limits = Limits::default();
    limits.max_body_bytes = 64 * 1024;
    limits.max_buffered_body_bytes = 4096;
    // The stalled body must outlive the test's polling however loaded the machine.
    limits.body_read_timeout_ms = 120_000;
    let a = start(BridgeLimits::default(), limits).await;
    let addr = a.base.trim_start_matches("http://").to_owned();
    let stall = |addr: String| async move {
        let mut c = tokio::net::TcpStream::connect(&addr).await.expect("connect");
        let head = format!(
            "POST /a2a1x/message:send HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 16384\r\n\r\n"
        );
        c.write_all(head.as_bytes()).await.expect("head");
        c.write_all(&[b' '; 3072]).await.expect("3 KiB");
        c
    };
    let mut stalled = stall(addr.clone()).await;
    let mut big = message("query_ledger", json!({}));
    big["pad"] = json!("x".repeat(2048));
    // Polled: the stalled bytes are held once the agent has read them.
    let until = std::time::Instant::now() + Duration::from_secs(30);
    let refused = loop {
        // A stalled body that arrived after a probe's was the one refused (answered): it is sent again.
        let mut seen = [0u8; 64];
        if !matches!(stalled.try_read(&mut seen), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock) {
            stalled = stall(addr.clone()).await;
        }
        let resp = a.http.post(format!("{}/a2a1x/message:send", a.base)).json(&big).send().await.expect("test value");
        if resp.status() == 503 {
            break resp;
        }
        assert!(std::time::Instant::now() < until, "never refused: {}", resp.status());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(refused.headers().get("retry-after").map(|v| v.as_bytes()), Some(&b"1"[..]), "{refused:?}");
    let body: Value = refused.json().await.expect("test value");
    assert_eq!(body["error"]["details"][0]["metadata"]["code"], "overloaded", "{body}");
    drop(stalled);
}
