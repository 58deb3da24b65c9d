//! `/mcp` at the gateway (spec §21, MCP-1..MCP-20): a real a2a-server agent behind a real gateway, called by the
//! official MCP Python SDK (`mcp` 2.3.0, `a2a_test_support::mcp_python`; fails without it) at the current protocol
//! revision and with the legacy `initialize` handshake, and by raw JSON-RPC for what an SDK will not send.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use a2a_core::jws::{self, JwsHeader};
use a2a_core::keys::SigningKey;
use a2a_server::auth::OAuth2;
use a2a_server::handler::{ExecutionContext, HandlerError};
use a2a_server::{AgentBuilder, ApiKey};
use serde_json::{Value, json};

use crate::common::*;

const ISSUER: &str = "https://issuer.example.com";
const AGENT: &str = "did:web:mcp-agent.example.com";

/// What the agent's handlers saw.
#[derive(Default)]
struct Seen {
    /// The slow task saw its execution canceled.
    canceled: AtomicBool,
    /// Executions of `submit_report`.
    reports: AtomicUsize,
}

/// Records that a handler stopped before it finished, however it was stopped.
struct Stopped(Option<Arc<Seen>>);

impl Drop for Stopped {
    fn drop(&mut self) {
        if let Some(s) = &self.0 {
            s.canceled.store(true, Ordering::SeqCst);
        }
    }
}

fn cap(name: &str, auth: AuthRequirement, schema: Value) -> CapabilityDeclaration {
    let mut d = decl(name, auth);
    d.description = format!("Test capability {name}.");
    d.input_schema = schema;
    d
}

fn title_schema() -> Value {
    json!({"type": "object", "properties": {"title": {"type": "string", "maxLength": 200}}, "required": ["title"],
           "additionalProperties": false})
}

/// An agent with the capabilities the MCP client script uses, on the test's runtime.
async fn agent(world: &World, issuer: &SigningKey, seen: Arc<Seen>) -> (String, tokio::sync::oneshot::Sender<()>) {
    let mut region = cap("file_in_region", AuthRequirement::None, title_schema());
    region.region_restriction = vec!["eu-west-1".into()];
    let s1 = seen.clone();
    let s2 = seen.clone();
    let b = AgentBuilder::new(AGENT)
        .resolver(world.resolver.clone())
        .trusted_gateways(vec![GATEWAY.to_owned()])
        .api_key(ApiKey::new("secret-key"))
        .oauth2(OAuth2 {
            issuer: ISSUER.into(),
            audience: None,
            keys: vec![issuer.verifying_key().clone()],
            required_scopes: Default::default(),
        })
        .streaming(a2a_server::streaming::StreamConfig { enabled: true, poll_ms: 20, ..Default::default() })
        .capability(
            cap("submit_report", AuthRequirement::None, title_schema()),
            move |_c: ExecutionContext, p: Value| {
                let s = s1.clone();
                async move {
                    s.reports.fetch_add(1, Ordering::SeqCst);
                    Ok(json!({"filed": p}))
                }
            },
        )
        .capability(
            cap(
                "count_words",
                AuthRequirement::None,
                json!({"type": "object", "properties": {"text": {"type": "string"}}}),
            ),
            |ctx: ExecutionContext, p: Value| async move {
                let text = p["text"].as_str().unwrap_or("").to_owned();
                for (i, w) in text.split_whitespace().enumerate() {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    ctx.events
                        .emit(json!({"index": i, "word": w}))
                        .await
                        .map_err(|e| HandlerError::new(e.to_string()))?;
                }
                Ok(json!({"words": text.split_whitespace().count()}))
            },
        )
        .capability(
            cap(
                "run_slow_task",
                AuthRequirement::None,
                json!({"type": "object", "properties": {"ms": {"type": "number", "multipleOf": 1}}}),
            ),
            move |ctx: ExecutionContext, p: Value| {
                let s = s2.clone();
                async move {
                    let ms = p["ms"].as_f64().unwrap_or(0.0) as u64;
                    // The handler is stopped (its token fired, or its future dropped) before it finishes.
                    let mut stopped = Stopped(Some(s));
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(ms)) => {
                            stopped.0 = None;
                            Ok(json!({"slept_ms": ms}))
                        }
                        () = ctx.cancel.cancelled() => Err(HandlerError::new("canceled")),
                    }
                }
            },
        )
        .capability(region, |_c: ExecutionContext, p: Value| async move { Ok(p) })
        .capability(
            cap("read_ledger", AuthRequirement::Oauth2, json!({"type": "object"})),
            |_c: ExecutionContext, _p: Value| async move { Ok(json!({"balance": 12})) },
        )
        .capability(
            cap("sign_contract", AuthRequirement::DidAuth, json!({"type": "object"})),
            |c: ExecutionContext, _p: Value| async move {
                Ok(json!({"signed_by": c.sender, "verified": c.sender_verified}))
            },
        )
        .capability(
            cap("query_inventory", AuthRequirement::ApiKey, json!({"type": "object"})),
            |_c: ExecutionContext, _p: Value| async move { Ok(json!({"items": 3})) },
        );
    let agent = b.build().expect("agent");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/a2a", listener.local_addr().expect("addr"));
    let app = agent.router();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let limits = agent.engine().limits().clone();
    tokio::spawn(async move {
        let _keep = agent;
        let stop = async {
            let _ = rx.await;
        };
        let _ = a2a_server::serve::serve(listener, app, &limits, stop, Duration::from_secs(1)).await;
    });
    (url, tx)
}

/// A gateway in front of `url` with `[mcp]` settings `mcp`.
async fn gateway(url: &str, world: &World, mcp: &str) -> TestGateway {
    TestGateway::start(&[], world, &format!("[[agents]]\nurl = \"{url}\"\n[mcp]\nkeep_alive_ms = 200\n{mcp}")).await
}

/// Runs the MCP client script against `mcp_url` and returns what it printed.
pub async fn python_client(mcp_url: &str, mode: &str, steps: &str) -> Value {
    let python = a2a_test_support::mcp_python();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/mcp/mcp_client.py");
    let run = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(mcp_url)
        .arg(mode)
        .arg(steps)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the MCP client finishes within 120 s")
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the MCP Python client failed:\n{stdout}\n{stderr}");
    serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"))
}

/// The official MCP client at the current revision: the tools are the capabilities it may use, with their schemas
/// (MCP-5, MCP-6, MCP-19, MCP-20); a call runs the handshake (MCP-10); a streaming call reports progress per event
/// (MCP-14); arguments off the agreed schema and a refusal are tool errors with our code (MCP-11, MCP-13); an unknown
/// tool is a JSON-RPC error (MCP-9); a cancelled call cancels its execution at the agent (MCP-16).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_lists_and_calls_capabilities_through_the_gateway() {
    let world = World::new();
    let seen = Arc::new(Seen::default());
    let issuer = SigningKey::generate().expect("key");
    let (url, _stop) = agent(&world, &issuer, seen.clone()).await;
    let g = gateway(&url, &world, "").await;
    let out =
        python_client(&format!("{}/mcp", g.base), "modern", "list,call,progress,invalid,refusal,unknown,cancel").await;
    assert!(out["versions"].as_str().unwrap_or("").contains("2026-07-28"), "{out}");
    let tools = out["tools"].as_object().expect("tools");
    let mut names: Vec<&str> = tools.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["count_words", "file_in_region", "run_slow_task", "submit_report"],
        "oauth2, api_key and did_auth capabilities need credentials or a front that signs: {out}"
    );
    assert_eq!(tools["submit_report"]["input_schema"], title_schema());
    assert_eq!(tools["submit_report"]["description"], "Test capability submit_report.");

    assert_eq!(out["call"]["is_error"], false, "{out}");
    assert_eq!(out["call"]["structured"], json!({"filed": {"title": "Lift 3 out of service"}}));
    assert_eq!(seen.reports.load(Ordering::SeqCst), 1, "the capability ran once");

    assert_eq!(out["progress_call"]["structured"], json!({"words": 3}), "{out}");
    let words: Vec<String> = out["progress"]
        .as_array()
        .expect("progress")
        .iter()
        .filter_map(|p| p["message"].as_str())
        .filter(|m| m.contains("\"word\""))
        .map(str::to_owned)
        .collect();
    assert_eq!(words.len(), 3, "one progress notification per progress event: {out}");
    assert!(words[0].contains("\"one\""), "{words:?}");

    assert_eq!(out["invalid"]["is_error"], true, "{out}");
    assert_eq!(out["invalid"]["structured"]["error"]["code"], "payload_invalid");
    assert_eq!(out["invalid"]["structured"]["error"]["details"]["errors"][0]["path"], "/title");
    assert!(out["invalid"]["text"][0].as_str().unwrap_or("").starts_with("payload_invalid: "), "{out}");
    assert_eq!(seen.reports.load(Ordering::SeqCst), 1, "invalid arguments never reach the agent");

    assert_eq!(out["refusal"]["is_error"], true, "{out}");
    assert_eq!(out["refusal"]["structured"]["error"]["code"], "region_restricted", "{out}");
    assert!(out["refusal"]["structured"]["fallback_options"].is_array(), "a mismatch carries its options: {out}");

    assert_eq!(out["unknown"]["raised"], true, "{out}");
    assert_eq!(out["unknown"]["code"], -32602, "{out}");

    assert_eq!(out["cancel"]["cancelled"], true, "{out}");
    let canceled = async {
        while !seen.canceled.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), canceled)
        .await
        .expect("the cancelled call's execution was canceled at the agent (CANCEL)");
}

/// The legacy `initialize` handshake (2025-11-25) is served too, statelessly (MCP-2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_calls_with_the_legacy_handshake() {
    let world = World::new();
    let seen = Arc::new(Seen::default());
    let issuer = SigningKey::generate().expect("key");
    let (url, _stop) = agent(&world, &issuer, seen.clone()).await;
    let g = gateway(&url, &world, "").await;
    let out = python_client(&format!("{}/mcp", g.base), "legacy", "list,call,progress,refusal").await;
    assert_eq!(out["versions"], "2025-11-25", "{out}");
    assert!(out["tools"]["submit_report"].is_object(), "{out}");
    assert_eq!(out["call"]["structured"], json!({"filed": {"title": "Lift 3 out of service"}}), "{out}");
    assert!(out["progress"].as_array().is_some_and(|p| p.len() >= 3), "{out}");
    assert_eq!(out["refusal"]["structured"]["error"]["code"], "region_restricted", "{out}");
}

/// A JSON-RPC request to `/mcp` at the current revision (stateless: every request carries its protocol metadata),
/// with extra headers; the answer's JSON-RPC message (from JSON or the SSE stream's last `data:` line).
async fn rpc(base: &str, method: &str, params: Value, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut params = params;
    if let Some(p) = params.as_object_mut() {
        p.insert(
            "_meta".into(),
            json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                   "io.modelcontextprotocol/clientCapabilities": {},
                   "io.modelcontextprotocol/clientInfo": {"name": "a2a-tests", "version": "0"}}),
        );
    }
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    raw(base, &body.to_string(), headers).await
}

async fn raw(base: &str, body: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    // At 2026-07-28 the method (and a tool call's name) is repeated in headers (`Mcp-Method`, `Mcp-Name`).
    let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let method = parsed["method"].as_str().unwrap_or("").to_owned();
    let name = parsed["params"]["name"].as_str().map(str::to_owned);
    let mut rb = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("mcp-method", method)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .body(body.to_owned());
    if let Some(n) = name {
        rb = rb.header("mcp-name", n);
    }
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    let resp = rb.send().await.expect("send");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("text");
    let json = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .rfind(|v| v.get("id").is_some())
        .or_else(|| serde_json::from_str(&text).ok())
        .unwrap_or(Value::String(text));
    (status, json)
}

/// MCP-9: what no SDK sends is answered with JSON-RPC errors that say what is wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_calls_are_json_rpc_errors() {
    let world = World::new();
    let issuer = SigningKey::generate().expect("key");
    let (url, _stop) = agent(&world, &issuer, Arc::default()).await;
    let g = gateway(&url, &world, "").await;
    let (_, v) = rpc(&g.base, "tools/call", json!({"name": "no_such_tool", "arguments": {}}), &[]).await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert!(v["error"]["message"].as_str().unwrap_or("").contains("tools/list"), "{v}");
    let (_, v) = rpc(&g.base, "tools/call", json!({"name": "Not A Name", "arguments": {}}), &[]).await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
    let (_, v) = rpc(&g.base, "tools/call", json!({"name": "submit_report", "arguments": [1, 2]}), &[]).await;
    assert!(v["error"]["code"].as_i64().is_some(), "arguments that are not an object: {v}");
    let (status, v) = raw(&g.base, "{not json", &[]).await;
    assert!((400..500).contains(&status) || v["error"]["code"] == -32700, "{status} {v}");
    // MCP-4: a body over the front's limit is refused before it is read.
    let big = "x".repeat(2 * 1024 * 1024);
    let (status, _) =
        rpc(&g.base, "tools/call", json!({"name": "submit_report", "arguments": {"title": big}}), &[]).await;
    assert_eq!(status, 413);
}

/// MCP-19: an MCP bearer token is passed on to `oauth2` capabilities, which are tools only for callers that send
/// one; an `A2A-Api-Key` likewise for `api_key` capabilities.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_token_reaches_oauth2_capabilities() {
    let world = World::new();
    let issuer = SigningKey::generate().expect("key");
    let (url, _stop) = agent(&world, &issuer, Arc::default()).await;
    let g = gateway(&url, &world, "").await;
    let claims = json!({"iss": ISSUER, "aud": AGENT, "iat": now(), "exp": now() + 300, "sub": "svc"});
    let token = jws::encode(&JwsHeader { kid: None, typ: Some("JWT".into()) }, &claims, &issuer).expect("token");
    let bearer = format!("Bearer {token}");
    let names = |v: &Value| -> Vec<String> {
        v["result"]["tools"]
            .as_array()
            .map_or(vec![], |t| t.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect())
    };
    let (_, anon) = rpc(&g.base, "tools/list", json!({}), &[]).await;
    assert!(!names(&anon).contains(&"read_ledger".to_owned()), "{anon}");
    let (_, with) = rpc(&g.base, "tools/list", json!({}), &[("authorization", &bearer)]).await;
    assert!(names(&with).contains(&"read_ledger".to_owned()), "{with}");
    let (_, v) =
        rpc(&g.base, "tools/call", json!({"name": "read_ledger", "arguments": {}}), &[("authorization", &bearer)])
            .await;
    assert_eq!(v["result"]["structuredContent"], json!({"balance": 12}), "{v}");
    let bad = format!(
        "Bearer {}",
        jws::encode(&JwsHeader { kid: None, typ: Some("JWT".into()) }, &claims, &SigningKey::generate().expect("key"))
            .expect("token")
    );
    let (_, v) =
        rpc(&g.base, "tools/call", json!({"name": "read_ledger", "arguments": {}}), &[("authorization", &bad)]).await;
    assert_eq!(v["result"]["isError"], true, "{v}");
    assert_eq!(v["result"]["structuredContent"]["error"]["code"], "auth_invalid", "{v}");
    let (_, v) = rpc(
        &g.base,
        "tools/call",
        json!({"name": "query_inventory", "arguments": {}}),
        &[("a2a-api-key", "secret-key")],
    )
    .await;
    assert_eq!(v["result"]["structuredContent"], json!({"items": 3}), "{v}");
}

/// MCP-20: with an `[mcp]` identity the front signs for its callers, so `did_auth` capabilities are tools, run
/// under that DID (verified at the gateway, forwarded to the agent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn did_auth_capabilities_are_tools_when_the_front_signs() {
    let world = World::new();
    let issuer = SigningKey::generate().expect("key");
    let (url, _stop) = agent(&world, &issuer, Arc::default()).await;
    let dir = TempDir::new("mcp-key");
    let pem = dir.0.join("client.pem");
    std::fs::write(&pem, world.client_key.to_pkcs8_pem().expect("pem").as_bytes()).expect("write key");
    let g = gateway(&url, &world, &format!("did = \"{CLIENT}\"\nkey_file = \"{}\"\n", pem.display())).await;
    let (_, list) = rpc(&g.base, "tools/list", json!({}), &[]).await;
    assert!(list.to_string().contains("\"sign_contract\""), "{list}");
    let (_, v) = rpc(&g.base, "tools/call", json!({"name": "sign_contract", "arguments": {}}), &[]).await;
    assert_eq!(v["result"]["structuredContent"], json!({"signed_by": CLIENT, "verified": true}), "{v}");
}

/// MCP-1: `[mcp] enabled = false` turns `/mcp` off; the path is then the gateway's unknown path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_can_be_turned_off() {
    let world = World::new();
    let issuer = SigningKey::generate().expect("key");
    let (url, _stop) = agent(&world, &issuer, Arc::default()).await;
    let g = gateway(&url, &world, "enabled = false\n").await;
    let (status, _) = rpc(&g.base, "tools/list", json!({}), &[]).await;
    assert_eq!(status, 404);
    assert!(g.gateway.mcp().is_none());
}
