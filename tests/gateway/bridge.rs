//! The A2A 1.x bridge through the gateway (spec §20.10, BR-20..BR-26): a gateway in front of two real a2a-server
//! agents serving their bridges, with different skills — the card union and its signature, messages routed by
//! skill, task operations following their task (also across two gateways on one Redis), streams passed through as
//! they arrive, the edge limits, NEGOTIATE's `bridge_to` naming the gateway (and none from a gateway without the
//! bridge), and the official a2a-sdk client (`A2A_SDK_PYTHON`, else the venv `.ci/run` creates; fails without either) against the gateway. Also §18 streaming RESULT
//! passed through the gateway (STR-1, STR-11).

use std::time::{Duration, Instant};

use a2a_core::a2a1x;
use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use a2a_server::a2a1x::{Bridge, BridgeOptions};
use a2a_server::handler::{ExecutionContext, HandlerError};
use a2a_server::{AgentBuilder, ApiKey};
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::common::*;
use crate::redis_support::{shared_server, unique_prefix};

const REPORT: &str = r#"{"title": "Lift 3 out of service", "timestamp": "2026-11-29T21:00:00Z"}"#;

fn report() -> Value {
    serde_json::from_str(REPORT).expect("report")
}

fn skill(name: &str, auth: AuthRequirement) -> CapabilityDeclaration {
    let mut d = decl(name, auth);
    d.input_schema = json!({"type": "object"});
    d
}

/// An a2a-server agent with its bridge (card signed by its own key), serving on the test's runtime.
struct BridgedAgent {
    url: String,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// Which skills an agent has: `submit_report` (answers `{"filed": payload}`), `run_slow_task` (sleeps `ms`, answers
/// `{"slept_ms": ms}`), `query_ledger` (api_key), `sign_contract` (did_auth), `count_words` (§18 progress events).
async fn bridged(name: &str, skills: &[&str], world: &World) -> BridgedAgent {
    let did = format!("did:web:{name}.example.com");
    let mut b = AgentBuilder::new(did)
        .resolver(world.resolver.clone())
        .trusted_gateways(vec![GATEWAY.to_owned()])
        .api_key(ApiKey::new("secret-key"))
        .streaming(a2a_server::streaming::StreamConfig { enabled: true, poll_ms: 20, ..Default::default() });
    for s in skills {
        b = match *s {
            "submit_report" => b
                .capability(skill(s, AuthRequirement::None), |_c: ExecutionContext, p: Value| async move {
                    Ok(json!({"filed": p}))
                }),
            "run_slow_task" => {
                b.capability(skill(s, AuthRequirement::None), |_c: ExecutionContext, p: Value| async move {
                    // ProtoJSON clients (a2a-sdk) send every number as a double.
                    let ms = p["ms"].as_f64().unwrap_or(0.0) as u64;
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Ok(json!({"slept_ms": ms}))
                })
            }
            "query_ledger" => b
                .capability(skill(s, AuthRequirement::ApiKey), |_c: ExecutionContext, p: Value| async move {
                    Ok(json!({"ledger": p}))
                }),
            "sign_contract" => b
                .capability(skill(s, AuthRequirement::DidAuth), |_c: ExecutionContext, _p: Value| async move {
                    Ok(json!({}))
                }),
            "count_words" => {
                b.capability(skill(s, AuthRequirement::None), |ctx: ExecutionContext, p: Value| async move {
                    let text = p["text"].as_str().unwrap_or("").to_owned();
                    for (i, w) in text.split_whitespace().enumerate() {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        ctx.events
                            .emit(json!({"index": i, "word": w}))
                            .await
                            .map_err(|e| HandlerError::new(e.to_string()))?;
                    }
                    Ok(json!({"words": text.split_whitespace().count()}))
                })
            }
            other => panic!("no test skill {other}"),
        };
    }
    let agent = b.build().expect("agent");
    let key = a2a_core::keys::SigningKey::generate().expect("key");
    let bridge = Bridge::new(&agent, BridgeOptions { signing_key: Some((KEY_ID.into(), key)), ..Default::default() })
        .expect("bridge");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/a2a", listener.local_addr().expect("addr"));
    let app = agent.router().merge(bridge.router());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let limits = agent.engine().limits().clone();
    tokio::spawn(async move {
        let _keep = agent;
        let shutdown = async {
            let _ = rx.await;
        };
        let _ = a2a_server::serve::serve(listener, app, &limits, shutdown, Duration::from_secs(1)).await;
    });
    BridgedAgent { url, _stop: tx }
}

/// The agents `TestGateway::start` takes are `TestAgent`s; a bridged agent's gateway is configured by URL.
async fn gateway(agents: &[&BridgedAgent], world: &World, extra: &str) -> TestGateway {
    gateway_with(agents, world, "", extra).await
}

/// As [`gateway`], with `keys` added to the `[gateway]` section.
async fn gateway_with(agents: &[&BridgedAgent], world: &World, keys: &str, extra: &str) -> TestGateway {
    // `TestGateway::start` writes `[gateway]` and then this text: keys before the first table are the gateway's.
    let mut text = keys.to_owned();
    for a in agents {
        text.push_str(&format!("[[agents]]\nurl = \"{}\"\n", a.url));
    }
    text.push_str(extra);
    TestGateway::start(&[], world, &text).await
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(60)).build().expect("client")
}

fn message_id() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("random");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn message(skill: &str, data: Value) -> Value {
    json!({"message": {"messageId": message_id(), "role": "ROLE_USER", "parts": [{"data": data}],
                       "metadata": {"skill": skill}}})
}

async fn rpc(base: &str, method: &str, params: Value, headers: &[(&str, &str)]) -> Value {
    let mut rb = http()
        .post(format!("{base}/a2a1x/jsonrpc"))
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}));
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    let resp = rb.send().await.expect("request");
    assert_eq!(resp.status(), 200, "JSON-RPC answers are HTTP 200");
    assert_eq!(resp.headers()["a2a-version"], "1.0");
    resp.json().await.expect("JSON")
}

fn code(v: &Value) -> i64 {
    v["error"]["code"].as_i64().unwrap_or_else(|| panic!("not an error: {v}"))
}

fn reason_code(v: &Value) -> &str {
    v["error"]["data"][0]["metadata"]["code"].as_str().unwrap_or("")
}

fn path_segment(task_id: &str) -> String {
    a2a_core::execution_id::ExecutionId::parse(task_id).expect("task id is an execution id").to_path_segment()
}

/// Reads an SSE answer chunk by chunk: each event's `data` with the time it arrived.
async fn timed_events(resp: reqwest::Response) -> Vec<(Duration, Value)> {
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let start = Instant::now();
    let mut body = resp.bytes_stream();
    let (mut buf, mut out) = (String::new(), Vec::new());
    while let Some(chunk) = body.next().await {
        buf.push_str(std::str::from_utf8(&chunk.expect("chunk")).expect("utf-8"));
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            let data: Vec<&str> = event.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
            if !data.is_empty() {
                out.push((start.elapsed(), serde_json::from_str(&data.join("\n")).expect("event JSON")));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_card_is_the_union_of_its_agents_skills_signed_by_the_gateway() {
    let world = World::new();
    let a = bridged("bridge-a", &["submit_report", "sign_contract"], &world).await;
    let b = bridged("bridge-b", &["run_slow_task", "query_ledger", "submit_report"], &world).await;
    let g = gateway(&[&a, &b], &world, "").await;
    let resp = http().get(format!("{}/.well-known/agent-card.json", g.base)).send().await.expect("card");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["access-control-allow-origin"], "*");
    assert_eq!(resp.headers()["a2a-version"], "1.0");
    let card: Value = resp.json().await.expect("JSON");
    let ids: Vec<&str> = card["skills"].as_array().expect("skills").iter().filter_map(|s| s["id"].as_str()).collect();
    // BR-20: each skill once, in the order of the gateway's capabilities; the did_auth one left out (BR-4).
    assert_eq!(ids, ["submit_report", "run_slow_task", "query_ledger"]);
    assert_eq!(card["skills"][2]["tags"], json!(["a2a-handshake", "auth:api_key"]));
    assert_eq!(card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["name"], "A2A-Api-Key");
    assert_eq!(card["name"], GATEWAY, "the gateway has no name: its DID");
    assert_eq!(card["supportedInterfaces"][0]["url"], format!("{}/a2a1x/jsonrpc", g.base));
    assert_eq!(card["supportedInterfaces"][1]["url"], format!("{}/a2a1x", g.base));
    assert_eq!(card["capabilities"]["extensions"][0]["params"]["did"], GATEWAY);
    assert_eq!(card["capabilities"]["extensions"][0]["params"]["endpoint"], format!("{}/a2a", g.base));
    // BR-5: signed by the gateway's key, kid = the gateway's DID URL.
    let sigs = a2a1x::card_signatures(&card).expect("signatures");
    assert_eq!(sigs.len(), 1);
    assert_eq!(sigs[0].kid.as_deref(), Some(format!("{GATEWAY}#{KEY_ID}").as_str()));
    sigs[0].verify(&card, world.gateway_key.verifying_key()).expect("the gateway's signature verifies");
    assert!(sigs[0].verify(&card, world.client_key.verifying_key()).is_err(), "another key does not verify it");
    let mut forged = card.clone();
    forged["skills"][0]["id"] = json!("something_else");
    assert!(sigs[0].verify(&forged, world.gateway_key.verifying_key()).is_err(), "a changed card does not verify");
    // The same card again (cached while the union does not change), and it is not a probe of /a2a.
    let again: Value = http()
        .get(format!("{}/.well-known/agent-card.json", g.base))
        .send()
        .await
        .expect("card")
        .json()
        .await
        .expect("JSON");
    assert_eq!(again, card);
    assert_eq!(g.metric("a2a_gateway_probes_total", &[]), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_go_to_the_agent_with_the_skill_and_task_operations_follow_the_task() {
    let world = World::new();
    let a = bridged("route-a", &["submit_report"], &world).await;
    let b = bridged("route-b", &["run_slow_task", "query_ledger"], &world).await;
    let g = gateway(&[&a, &b], &world, "").await;
    let sender = [("a2a-sender-id", CLIENT)];
    // Each skill runs at the only agent that has it (the other would refuse it: BR-7).
    let v = rpc(&g.base, "SendMessage", message("submit_report", report()), &sender).await;
    let task = &v["result"]["task"];
    assert_eq!(v["id"], 7, "the answer has the request's id: {v}");
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
    assert_eq!(task["artifacts"][0]["parts"][0]["data"], json!({"filed": report()}));
    let report_id = task["id"].as_str().expect("id").to_owned();
    let v = rpc(&g.base, "SendMessage", message("run_slow_task", json!({"ms": 10})), &sender).await;
    assert_eq!(v["result"]["task"]["artifacts"][0]["parts"][0]["data"], json!({"slept_ms": 10}), "{v}");
    let slow_id = v["result"]["task"]["id"].as_str().expect("id").to_owned();
    // GetTask follows each task to its agent, on both bindings.
    let got = rpc(&g.base, "GetTask", json!({"id": report_id}), &sender).await;
    assert_eq!(got["result"]["id"], report_id.as_str(), "{got}");
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_COMPLETED");
    let resp = http()
        .get(format!("{}/a2a1x/tasks/{}", g.base, path_segment(&slow_id)))
        .header("a2a-sender-id", CLIENT)
        .send()
        .await
        .expect("get");
    assert_eq!(resp.status(), 200);
    let got: Value = resp.json().await.expect("JSON");
    assert_eq!(got["id"], slow_id.as_str(), "{got}");
    // A running task is canceled at its agent; a finished one is not cancelable there.
    let mut m = message("run_slow_task", json!({"ms": 20000}));
    m["configuration"] = json!({"returnImmediately": true});
    let v = rpc(&g.base, "SendMessage", m, &sender).await;
    assert_eq!(v["result"]["task"]["status"]["state"], "TASK_STATE_SUBMITTED", "{v}");
    let running = v["result"]["task"]["id"].as_str().expect("id").to_owned();
    let c = rpc(&g.base, "CancelTask", json!({"id": running}), &sender).await;
    assert_eq!(c["result"]["status"]["state"], "TASK_STATE_CANCELED", "{c}");
    let resp = http()
        .post(format!("{}/a2a1x/tasks/{}:cancel", g.base, path_segment(&report_id)))
        .header("a2a-sender-id", CLIENT)
        .json(&json!({}))
        .send()
        .await
        .expect("cancel");
    assert_eq!(resp.status(), 400);
    let e: Value = resp.json().await.expect("JSON");
    assert_eq!(e["error"]["details"][0]["reason"], "TASK_NOT_CANCELABLE", "{e}");
    // Another sender's task is unknown to it (RES-1), as is a task no gateway routed.
    let other =
        rpc(&g.base, "GetTask", json!({"id": report_id}), &[("a2a-sender-id", "did:web:other.example.com")]).await;
    assert_eq!(code(&other), -32001, "{other}");
    let unknown =
        rpc(&g.base, "GetTask", json!({"id": "did:web:nobody.example.com_1_aaaaaaaaaaaaaaaaaaaaaaaaaa"}), &sender)
            .await;
    assert_eq!(code(&unknown), -32001, "{unknown}");
    assert_eq!(reason_code(&unknown), "unknown_execution");
    assert!(unknown["error"]["message"].as_str().unwrap_or("").contains("through this gateway"), "{unknown}");
    // BR-7 at the gateway: an unknown skill is refused naming the skills of every agent; a message without a skill
    // when the gateway has several too.
    let v = rpc(&g.base, "SendMessage", message("no_such_skill", json!({})), &sender).await;
    assert_eq!(code(&v), -32602);
    let msg = v["error"]["message"].as_str().unwrap_or("");
    assert!(msg.contains("submit_report") && msg.contains("run_slow_task"), "{msg}");
    let mut m = message("x", json!({}));
    m["message"]["metadata"] = json!({});
    let v = rpc(&g.base, "SendMessage", m, &sender).await;
    assert_eq!(code(&v), -32602, "{v}");
    // The api_key skill needs its key at the edge (BR-24): -32600 on JSON-RPC, 401 on HTTP+JSON.
    let v = rpc(&g.base, "SendMessage", message("query_ledger", json!({})), &sender).await;
    assert_eq!(code(&v), -32600, "{v}");
    assert_eq!(reason_code(&v), "auth_required");
    let resp = http()
        .post(format!("{}/a2a1x/message:send", g.base))
        .json(&message("query_ledger", json!({})))
        .send()
        .await
        .expect("send");
    assert_eq!(resp.status(), 401);
    let resp = http()
        .post(format!("{}/a2a1x/message:send", g.base))
        .header("a2a-api-key", "secret-key")
        .json(&message("query_ledger", json!({"q": 1})))
        .send()
        .await
        .expect("send");
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.expect("JSON");
    assert_eq!(v["task"]["artifacts"][0]["parts"][0]["data"], json!({"ledger": {"q": 1}}), "{v}");
    // Errors of the bridge's own: a version, a method, a probe of an unknown path (counted, BR-24).
    let v = rpc(&g.base, "GetTask", json!({"id": report_id}), &[("a2a-version", "0.3")]).await;
    assert_eq!(code(&v), -32009, "{v}");
    let v = rpc(&g.base, "tasks/get", json!({"id": report_id}), &sender).await;
    assert_eq!(code(&v), -32601, "{v}");
    assert!(v["error"]["message"].as_str().unwrap_or("").contains("GetTask"), "{v}");
    let probes = g.metric("a2a_gateway_probes_total", &[]);
    let resp = http().get(format!("{}/a2a1x/admin", g.base)).send().await.expect("probe");
    assert_eq!(resp.status(), 404);
    let e: Value = resp.json().await.expect("JSON");
    assert_eq!(e["error"]["details"][0]["reason"], "METHOD_NOT_FOUND", "{e}");
    assert_eq!(g.metric("a2a_gateway_probes_total", &[]), probes + 1.0);
    let resp = http()
        .post(format!("{}/a2a1x/jsonrpc", g.base))
        .body("[1, 2]")
        .header("content-type", "application/json")
        .send()
        .await
        .expect("batch");
    let v: Value = resp.json().await.expect("JSON");
    assert_eq!(code(&v), -32600, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_tasks_pages_through_every_agent() {
    let world = World::new();
    let a = bridged("list-a", &["submit_report"], &world).await;
    let b = bridged("list-b", &["run_slow_task"], &world).await;
    let g = gateway(&[&a, &b], &world, "").await;
    let ctx = format!("ctx-{}", message_id());
    let mut ids = Vec::new();
    for (skill, data) in [("submit_report", report()), ("run_slow_task", json!({"ms": 1})), ("submit_report", report())]
    {
        let mut m = message(skill, data);
        m["message"]["contextId"] = json!(ctx);
        let v = rpc(&g.base, "SendMessage", m, &[]).await;
        ids.push(v["result"]["task"]["id"].as_str().unwrap_or_else(|| panic!("{v}")).to_owned());
    }
    // Anonymous callers list by contextId (BR-13); pages of 2 across the two agents.
    let mut seen = Vec::new();
    let mut token = String::new();
    for page in 0..3 {
        let mut p = json!({"contextId": ctx, "pageSize": 2});
        if !token.is_empty() {
            p["pageToken"] = json!(token);
        }
        let v = rpc(&g.base, "ListTasks", p, &[]).await;
        let r = &v["result"];
        assert_eq!(r["pageSize"], 2, "{v}");
        if page == 0 {
            assert_eq!(r["totalSize"], 3, "{v}");
        }
        seen.extend(r["tasks"].as_array().expect("tasks").iter().filter_map(|t| t["id"].as_str().map(str::to_owned)));
        token = r["nextPageToken"].as_str().unwrap_or("").to_owned();
        if token.is_empty() {
            break;
        }
    }
    // Agent a's tasks newest first, then agent b's.
    assert_eq!(seen, [ids[2].clone(), ids[0].clone(), ids[1].clone()]);
    // The HTTP+JSON binding lists the same, filtered by status.
    let resp = http()
        .get(format!("{}/a2a1x/tasks?contextId={ctx}&status=TASK_STATE_COMPLETED&pageSize=10", g.base))
        .send()
        .await
        .expect("list");
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.expect("JSON");
    assert_eq!(v["tasks"].as_array().map(Vec::len), Some(3), "{v}");
    let v = rpc(&g.base, "ListTasks", json!({"pageSize": 2}), &[]).await;
    assert_eq!(code(&v), -32602, "anonymous without contextId: {v}");
    let v = rpc(&g.base, "ListTasks", json!({"contextId": ctx, "pageToken": "bm90IG91cnM"}), &[]).await;
    assert_eq!(code(&v), -32602, "a token the gateway did not give: {v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_started_through_one_gateway_is_read_and_canceled_through_another_on_one_redis() {
    let redis = shared_server();
    let world = World::new();
    let a = bridged("redis-a", &["submit_report"], &world).await;
    // Both agents have submit_report: a task must be followed, not found by skill.
    let b = bridged("redis-b", &["run_slow_task", "submit_report"], &world).await;
    let store = format!("[store]\nredis_url = \"{}\"\nkey_prefix = \"{}\"\n", redis.url(), unique_prefix("gwbr"));
    let g1 = gateway(&[&a, &b], &world, &store).await;
    let g2 = gateway(&[&a, &b], &world, &store).await;
    let sender = [("a2a-sender-id", CLIENT)];
    let v = rpc(&g1.base, "SendMessage", message("submit_report", report()), &sender).await;
    let done = v["result"]["task"]["id"].as_str().unwrap_or_else(|| panic!("{v}")).to_owned();
    let got = rpc(&g2.base, "GetTask", json!({"id": done}), &sender).await;
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_COMPLETED", "read through the other gateway: {got}");
    let mut m = message("run_slow_task", json!({"ms": 20000}));
    m["configuration"] = json!({"returnImmediately": true});
    let resp = http()
        .post(format!("{}/a2a1x/message:send", g1.base))
        .header("a2a-sender-id", CLIENT)
        .json(&m)
        .send()
        .await
        .expect("send");
    let v: Value = resp.json().await.expect("JSON");
    let running = v["task"]["id"].as_str().unwrap_or_else(|| panic!("{v}")).to_owned();
    let resp = http()
        .post(format!("{}/a2a1x/tasks/{}:cancel", g2.base, path_segment(&running)))
        .header("a2a-sender-id", CLIENT)
        .json(&json!({}))
        .send()
        .await
        .expect("cancel");
    assert_eq!(resp.status(), 200);
    let c: Value = resp.json().await.expect("JSON");
    assert_eq!(c["status"]["state"], "TASK_STATE_CANCELED", "canceled through the other gateway: {c}");
    // A resent message (same messageId) reaches the agent that has it, through either gateway: the same task, never
    // a second run at the other agent.
    let m = message("submit_report", report());
    let first = rpc(&g1.base, "SendMessage", m.clone(), &sender).await;
    let first_id = first["result"]["task"]["id"].as_str().unwrap_or_else(|| panic!("{first}")).to_owned();
    for g in [&g2, &g1, &g2, &g1] {
        let again = rpc(&g.base, "SendMessage", m.clone(), &sender).await;
        assert_eq!(again["result"]["task"]["id"], first_id.as_str(), "{again}");
    }
    // Tasks at both agents are each read where they are, through both gateways.
    for _ in 0..4 {
        let v = rpc(&g1.base, "SendMessage", message("submit_report", report()), &sender).await;
        let id = v["result"]["task"]["id"].as_str().unwrap_or_else(|| panic!("{v}")).to_owned();
        for g in [&g1, &g2] {
            let got = rpc(&g.base, "GetTask", json!({"id": id}), &sender).await;
            assert_eq!(got["result"]["status"]["state"], "TASK_STATE_COMPLETED", "{got}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_pass_through_the_gateway_as_they_arrive() {
    let world = World::new();
    let a = bridged("stream-a", &["submit_report"], &world).await;
    let b = bridged("stream-b", &["run_slow_task"], &world).await;
    let g = gateway(&[&a, &b], &world, "").await;
    // The task takes 4 s: time enough for a loaded machine to pass the stream's head and first event on before it
    // ends, which a stream buffered by the gateway could not.
    let task = Duration::from_millis(4_000);
    let started = Instant::now();
    let resp = http()
        .post(format!("{}/a2a1x/jsonrpc", g.base))
        .json(&json!({"jsonrpc": "2.0", "id": 3, "method": "SendStreamingMessage",
                      "params": message("run_slow_task", json!({"ms": task.as_millis() as u64}))}))
        .send()
        .await
        .expect("stream");
    let head_at = started.elapsed();
    assert!(head_at < task, "the stream's head came before the task ended: after {head_at:?}");
    let events = timed_events(resp).await;
    assert!(started.elapsed() >= task);
    let results: Vec<&Value> = events.iter().map(|(_, e)| &e["result"]).collect();
    assert!(results[0]["task"].is_object(), "the first event is the task: {results:?}");
    // Not buffered: the first event arrived before the task could have ended.
    let first_at = head_at + events[0].0;
    assert!(first_at < task, "events arrived as they happened: the first after {first_at:?}");
    let slept = json!({"slept_ms": task.as_millis() as u64});
    assert!(results.iter().any(|r| r["artifactUpdate"]["artifact"]["parts"][0]["data"] == slept));
    let last = results.last().expect("last");
    assert_eq!(last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED", "{last}");
    let id = results[0]["task"]["id"].as_str().expect("id").to_owned();
    // The task's route was recorded from the first event: GetTask and SubscribeToTask (HTTP+JSON) reach it.
    let got = rpc(&g.base, "GetTask", json!({"id": id}), &[]).await;
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_COMPLETED", "{got}");
    let resp =
        http().get(format!("{}/a2a1x/tasks/{}:subscribe", g.base, path_segment(&id))).send().await.expect("subscribe");
    let again = timed_events(resp).await;
    assert_eq!(again[0].1["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{:?}", again[0].1);
    // The HTTP+JSON binding streams the same way.
    let resp = http()
        .post(format!("{}/a2a1x/message:stream", g.base))
        .json(&message("submit_report", report()))
        .send()
        .await
        .expect("stream");
    let events = timed_events(resp).await;
    let id = events[0].1["task"]["id"].as_str().expect("task first").to_owned();
    // The stream ends in the terminal state: a last status update, or the task itself when it had already finished
    // as the stream started (BR-15).
    let last = &events[events.len() - 1].1;
    let state =
        if last["statusUpdate"].is_object() { &last["statusUpdate"]["status"] } else { &last["task"]["status"] };
    assert_eq!(state["state"], "TASK_STATE_COMPLETED", "{last}");
    let resp = http().get(format!("{}/a2a1x/tasks/{}", g.base, path_segment(&id))).send().await.expect("get");
    assert_eq!(resp.status(), 200);
    // An error before the first event is a plain JSON-RPC error, not a stream (BR-15).
    let resp = http()
        .post(format!("{}/a2a1x/jsonrpc", g.base))
        .json(
            &json!({"jsonrpc": "2.0", "id": 4, "method": "SendStreamingMessage", "params": message("nope", json!({}))}),
        )
        .send()
        .await
        .expect("stream");
    assert_eq!(resp.headers()["content-type"], "application/json");
    let v: Value = resp.json().await.expect("JSON");
    assert_eq!(code(&v), -32602, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_edge_limits_apply_to_1x_requests() {
    let world = World::new();
    let a = bridged("edge-a", &["submit_report"], &world).await;
    let g =
        gateway(&[&a], &world, "[limits]\nmax_body_bytes = 4096\n[edge]\nrate_limit_per_s = 1\nrate_limit_burst = 3\n")
            .await;
    let big = json!({"title": "x".repeat(8000)});
    let v = rpc(&g.base, "SendMessage", message("submit_report", big.clone()), &[("a2a-sender-id", CLIENT)]).await;
    assert_eq!(code(&v), -32602, "{v}");
    assert_eq!(reason_code(&v), "payload_too_large");
    assert_eq!(v["id"], Value::Null, "the id of a request not read is null (BR-14)");
    let resp = http()
        .post(format!("{}/a2a1x/message:send", g.base))
        .json(&message("submit_report", big))
        .send()
        .await
        .expect("send");
    assert_eq!(resp.status(), 413);
    // The gateway's only skill is the message's when it names none (BR-7); the agent is told which.
    let mut m = message("x", report());
    m["message"]["metadata"] = Value::Null;
    let v = rpc(&g.base, "SendMessage", m, &[("a2a-sender-id", "did:web:third.example.com")]).await;
    assert_eq!(v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
    // The rate per sender: the burst, then -32603 rate_limited.
    let sender = [("a2a-sender-id", "did:web:busy.example.com")];
    let mut codes = Vec::new();
    for _ in 0..5 {
        let v =
            rpc(&g.base, "GetTask", json!({"id": "did:web:busy.example.com_1_aaaaaaaaaaaaaaaaaaaaaaaaaa"}), &sender)
                .await;
        codes.push(reason_code(&v).to_owned());
    }
    assert_eq!(codes[0], "unknown_execution");
    assert_eq!(codes.last().map(String::as_str), Some("rate_limited"), "{codes:?}");
    let resp = http()
        .get(format!("{}/a2a1x/tasks/x", g.base))
        .header("a2a-sender-id", "did:web:busy.example.com")
        .send()
        .await
        .expect("get");
    assert_eq!(resp.status(), 429);
    assert!(resp.headers().contains_key("retry-after"));
}

/// §18 through the gateway: a streaming RESULT passes through as its events happen, and resumes with
/// `Last-Event-ID` (STR-1, STR-11).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_result_passes_through_the_gateway_and_resumes() {
    let world = World::new();
    let a = bridged("str-a", &["count_words"], &world).await;
    let g = gateway(&[&a], &world, "").await;
    let c = Caller::new(&g.base);
    let n = c
        .send(
            "POST",
            "/a2a/negotiate",
            &[],
            Some(&json!({"target_capability": "count_words", "proposed_schema": {"type": "object"}})),
            Sign::No,
        )
        .await;
    assert_eq!(n.status, 200, "{}", n.body);
    let neg = n.body["negotiation_id"].as_str().expect("neg").to_owned();
    let e = c
        .send(
            "POST",
            "/a2a/execute",
            &[("a2a-negotiation-id", &neg)],
            // Eight words, 300 ms each: the work lasts 2.4 s.
            Some(&json!({"text": "one two three four five six seven eight"})),
            Sign::No,
        )
        .await;
    assert_eq!(e.status, 201, "{}", e.body);
    let id = e.body["execution_id"].as_str().expect("id").to_owned();
    let seg = path_segment(&id);
    let open = |last: Option<&str>| {
        let mut rb = c
            .http
            .get(format!("{}/a2a/result/{seg}", g.base))
            .header("a2a-version", "0.3")
            .header("a2a-sender-id", CLIENT)
            .header("a2a-stream", "true");
        if let Some(l) = last {
            rb = rb.header("last-event-id", l);
        }
        rb.send()
    };
    let resp = open(None).await.expect("stream");
    assert_eq!(resp.status(), 200);
    let confirm = c.send("POST", "/a2a/confirm", &[], Some(&json!({"execution_id": id})), Sign::No).await;
    assert_eq!(confirm.status, 202, "{}", confirm.body);
    let mut ids = Vec::new();
    let mut kinds = Vec::new();
    let mut at = Vec::new();
    let start = Instant::now();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut body = resp.bytes_stream();
    let mut buf = String::new();
    while let Some(chunk) = body.next().await {
        buf.push_str(std::str::from_utf8(&chunk.expect("chunk")).expect("utf-8"));
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            for l in event.lines() {
                if let Some(i) = l.strip_prefix("id: ") {
                    ids.push(i.parse::<u64>().expect("id"));
                    at.push(start.elapsed());
                }
                if let Some(k) = l.strip_prefix("event: ") {
                    kinds.push(k.to_owned());
                }
            }
        }
    }
    assert_eq!(kinds.first().map(String::as_str), Some("status"), "{kinds:?}");
    assert_eq!(kinds.last().map(String::as_str), Some("result"), "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| *k == "progress").count(), 8, "{kinds:?}");
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>());
    // Not buffered: the first event arrived before the 2.4 s of work (counted from CONFIRM) could have ended.
    assert!(at[0] < Duration::from_millis(2_400), "events arrived as they happened: {at:?}");
    // Resumed after event 2 through the gateway: the events after it, each once.
    let resp = open(Some("2")).await.expect("resume");
    let text = resp.text().await.expect("text");
    let resumed: Vec<u64> =
        text.lines().filter_map(|l| l.strip_prefix("id: ")).filter_map(|i| i.parse().ok()).collect();
    assert_eq!(resumed, (3..=ids.len() as u64).collect::<Vec<_>>(), "{text}");
}

/// The official a2a-sdk Python client (spec §20.9) against the gateway: the script a2a-server's interop test runs,
/// given the gateway's URL and key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_client_uses_the_gateway() {
    let python = a2a_test_support::sdk_python();
    let world = World::new();
    let a = bridged("sdk-a", &["submit_report"], &world).await;
    let b = bridged("sdk-b", &["run_slow_task"], &world).await;
    let g = gateway(&[&a, &b], &world, "").await;
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../a2a-agent/tests/fixtures/a2a1x/sdk_client.py");
    let jwk = serde_json::to_string(&world.gateway_key.verifying_key().to_jwk()).expect("jwk");
    let run = tokio::process::Command::new(&python).arg(&script).arg(&g.base).arg(&jwk).kill_on_drop(true).output();
    let out = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the SDK client finishes within 120 s")
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(out.status.success(), "the a2a-sdk client failed through the gateway:\n{stdout}\n{stderr}");
    assert!(stdout.contains("all checks passed"), "{stdout}");
}

/// BR-25: an agent behind the gateway that does not serve the bridge is reported, not mistaken for one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_without_the_bridge_is_reported_as_unavailable() {
    let world = World::new();
    let plain = TestAgent::start("plain", vec![decl("submit_report", AuthRequirement::None)], &world);
    let g = TestGateway::start(&[&plain], &world, "").await;
    let card: Value = http()
        .get(format!("{}/.well-known/agent-card.json", g.base))
        .send()
        .await
        .expect("card")
        .json()
        .await
        .expect("JSON");
    assert_eq!(card["skills"][0]["id"], "submit_report", "the card is made of the capabilities: {card}");
    let v = rpc(&g.base, "SendMessage", message("submit_report", json!({"title": "t"})), &[]).await;
    assert_eq!(code(&v), -32603, "{v}");
    assert_eq!(reason_code(&v), "agent_unavailable");
    assert!(v["error"]["message"].as_str().unwrap_or("").contains("does not serve the A2A 1.x bridge"), "{v}");
}

/// NEGOTIATE of `capability` at `base` (a gateway or an agent), asking for the bridge when `bridges` is given.
async fn negotiate(base: &str, capability: &str, bridges: Option<&str>, sign: Sign<'_>) -> Answer {
    let extra: Vec<(&str, &str)> = bridges.map(|b| ("a2a-bridges", b)).into_iter().collect();
    let body = json!({"target_capability": capability, "proposed_schema": {"type": "object"}});
    Caller::new(base).send("POST", "/a2a/negotiate", &extra, Some(&body), sign).await
}

/// The `bridge_to` of BR-17 for the bridge at `origin`.
fn bridge_to_at(origin: &str, skill: &str) -> Value {
    json!({"binding": "a2a1x", "protocol_version": "1.0", "url": format!("{origin}/a2a1x/jsonrpc"),
           "agent_card": format!("{origin}/.well-known/agent-card.json"), "skill": skill})
}

/// BR-26: a NEGOTIATE through the gateway that asks for the bridge gets the gateway's `bridge_to`, never the agent's
/// (which the agent does add, asked directly); none without the header, none for a skill not on the gateway's card.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negotiate_through_the_gateway_offers_the_gateways_bridge_not_the_agents() {
    let world = World::new();
    let a = bridged("offer-a", &["submit_report", "sign_contract"], &world).await;
    let b = bridged("offer-b", &["run_slow_task"], &world).await;
    let g = gateway(&[&a, &b], &world, "").await;
    let agent_origin = a.url.strip_suffix("/a2a").expect("agent URL ends with /a2a").to_owned();
    // Asked directly, the agent offers its own bridge (BR-17): the one that must not reach a caller of the gateway.
    let direct = negotiate(&agent_origin, "submit_report", Some("a2a1x"), Sign::No).await;
    assert_eq!(direct.status, 200, "{}", direct.body);
    assert_eq!(direct.body["bridge_to"], bridge_to_at(&agent_origin, "submit_report"));

    for (skill, header) in [("submit_report", "a2a1x"), ("run_slow_task", "grpc, A2A1X")] {
        let n = negotiate(&g.base, skill, Some(header), Sign::No).await;
        assert_eq!(n.status, 200, "{}", n.body);
        assert_eq!(n.body["bridge_to"], bridge_to_at(&g.base, skill), "the gateway's bridge, not an agent's");
        assert_eq!(n.header("a2a-sender-id"), Some(GATEWAY));
        // The rest of the answer is the agent's: its negotiation, which EXECUTE through the gateway uses.
        let id = n.body["negotiation_id"].as_str().expect("negotiation id");
        assert_eq!(n.header("a2a-negotiation-id"), Some(id));
        assert!(n.body["agreed_schema"].is_object(), "{}", n.body);
        let payload = if skill == "submit_report" { report() } else { json!({"ms": 1}) };
        let e = Caller::new(&g.base)
            .send("POST", "/a2a/execute", &[("a2a-negotiation-id", id)], Some(&payload), Sign::No)
            .await;
        assert_eq!(e.status, 201, "{}", e.body);
    }
    // The gateway's card names the same bridge: its JSON-RPC interface is bridge_to's url.
    let card: Value = http()
        .get(format!("{}/.well-known/agent-card.json", g.base))
        .send()
        .await
        .expect("card")
        .json()
        .await
        .expect("JSON");
    assert_eq!(card["supportedInterfaces"][0]["url"], bridge_to_at(&g.base, "x")["url"]);

    // Not asked (no header, or another binding only): no bridge_to, though the agent got the caller's headers.
    for header in [None, Some("grpc")] {
        let n = negotiate(&g.base, "submit_report", header, Sign::No).await;
        assert_eq!(n.status, 200, "{}", n.body);
        assert!(n.body.get("bridge_to").is_none(), "{header:?}: {}", n.body);
    }
    // A did_auth capability is not on the card (BR-4, BR-20): a signed NEGOTIATE of it gets no bridge_to.
    let signed = Sign::With { key: &world.client_key, aud: GATEWAY, skew: 0, lifetime: 60 };
    let n = negotiate(&g.base, "sign_contract", Some("a2a1x"), signed).await;
    assert_eq!(n.status, 200, "{}", n.body);
    assert!(n.body.get("bridge_to").is_none(), "{}", n.body);
}

/// BR-26: a gateway that does not serve the bridge (`gateway.bridge = false`) passes no `bridge_to` on, though its
/// agents serve the bridge and add one; its card and `/a2a1x` are not served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_without_the_bridge_removes_the_agents_bridge_to() {
    let world = World::new();
    let a = bridged("nobridge-a", &["submit_report"], &world).await;
    let g = gateway_with(&[&a], &world, "bridge = false\n", "").await;
    let agent_origin = a.url.strip_suffix("/a2a").expect("agent URL ends with /a2a").to_owned();
    let direct = negotiate(&agent_origin, "submit_report", Some("a2a1x"), Sign::No).await;
    assert_eq!(direct.body["bridge_to"], bridge_to_at(&agent_origin, "submit_report"), "the agent adds one");
    let n = negotiate(&g.base, "submit_report", Some("a2a1x"), Sign::No).await;
    assert_eq!(n.status, 200, "{}", n.body);
    assert!(n.body.get("bridge_to").is_none(), "{}", n.body);
    assert!(n.body["negotiation_id"].is_string(), "the rest of the answer is the agent's: {}", n.body);
    let e = Caller::new(&g.base)
        .send(
            "POST",
            "/a2a/execute",
            &[("a2a-negotiation-id", n.body["negotiation_id"].as_str().expect("id"))],
            Some(&report()),
            Sign::No,
        )
        .await;
    assert_eq!(e.status, 201, "{}", e.body);
    let card = http().get(format!("{}/.well-known/agent-card.json", g.base)).send().await.expect("card");
    assert_eq!(card.status(), 404, "no card without the bridge");
    let resp = http()
        .post(format!("{}/a2a1x/jsonrpc", g.base))
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message("submit_report", report())}),
        )
        .send()
        .await
        .expect("rpc");
    assert_eq!(resp.status(), 404, "no /a2a1x without the bridge");
}
