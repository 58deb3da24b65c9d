//! The set-up the README shows: a real `a2a-gateway` process in front of the demo agent (`a2a-server --demo`'s own
//! router, `a2a_agent::app::demo_app_trusting`, as `--trusted-gateway DID` builds it), a caller with a did:web DID
//! published over loopback HTTP, and the a2a-client SDK calling every capability of the demo through the gateway —
//! `did_auth` (notarize_message), `api_key` + region (process_payment), the composite and the streamed RESULT
//! included — through a verifying gateway (GW-8, GW-9) and through a transparent one (GW-18). The gateway lists
//! `streaming` and `composite` (GW-19), so the SDK, which follows DISC-10, streams through it.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use a2a_client::{Client, ClientConfig, Identity, SigningMode, StreamEvent, StreamOptions};
use a2a_core::did::{Did, DidDocument};
use a2a_core::keys::SigningKey;
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::common::{TempDir, free_port};

/// Kills the gateway process on drop.
struct GatewayProcess(std::process::Child);

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `a2a-gateway --config <dir>/gateway.toml --listen 127.0.0.1:<port>` and waits until it serves.
fn start_gateway(dir: &TempDir, name: &str, toml: &str, port: u16) -> GatewayProcess {
    let config = dir.0.join(format!("{name}.toml"));
    std::fs::write(&config, toml).expect("write gateway.toml");
    let mut child = GatewayProcess(
        Command::new(a2a_test_support::bin("a2a-gateway"))
            .arg("--config")
            .arg(&config)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("RUST_LOG", "warn")
            .env_remove("REDIS_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("a2a-gateway starts"),
    );
    let stdout = child.0.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.contains(" serving ") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(60)).expect("the gateway says it serves");
    child
}

/// Serves `doc` as the DID document of `did:web:localhost%3A<port>` on loopback; returns the DID.
async fn publish_did(key: &SigningKey) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let did = Did::for_host_port("localhost", Some(port), &[]).expect("did");
    let doc = DidDocument::generate(&did, &[("key-1".to_owned(), key.verifying_key().to_jwk())]);
    let body = serde_json::to_string(&doc).expect("doc");
    let app = axum::Router::new().route(
        "/.well-known/did.json",
        axum::routing::get(move || {
            let body = body.clone();
            async move { ([("content-type", "application/did+json")], body) }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    did.to_string()
}

fn client(caller: &str, key: &SigningKey, signing: SigningMode, gateway: &str) -> Client {
    let identity = Identity::new(caller, "key-1", key.clone()).expect("identity");
    let config = ClientConfig::default().with_did_resolution(true, false).with_signing(signing);
    Client::builder(identity)
        .config(config)
        .api_key(gateway, a2a_agent::demo::DEMO_API_KEY)
        .expect("api key")
        .build()
        .expect("client")
}

/// Every demo capability through the gateway at `url`: (capability, what its output must show).
async fn call_every_capability(c: &Client, paying: &Client, url: &str, caller: &str) -> Vec<String> {
    let mut called = Vec::new();
    let mut call = |name: &'static str| {
        called.push(name.to_owned());
        name
    };
    let ts = "2026-11-29T21:00:00Z";
    let o = c.call(url, call("echo_message"), json!({"message": "hello"})).await.expect("echo_message");
    assert_eq!(o.result, json!({"echo": {"message": "hello"}}));
    let o = c.call(url, call("submit_report"), json!({"title": "Lift 3", "timestamp": ts})).await.expect("report");
    assert_eq!(o.result["title"], "Lift 3");
    assert!(o.result["report_id"].as_str().is_some_and(|r| r.starts_with("r-")), "{}", o.result);
    let o = c.call(url, call("generate_brief_summary"), json!({"text": "one two"})).await.expect("summary");
    assert_eq!(o.result["summary"], "one two");
    let o = c.call(url, call("add_numbers"), json!({"a": 2, "b": 3.5})).await.expect("add_numbers");
    assert_eq!(o.result, json!({"sum": 5.5}));
    let o = c.call(url, call("run_slow_task"), json!({"seconds": 0})).await.expect("run_slow_task");
    assert_eq!(o.result["slept_seconds"], json!(0.0));
    // api_key and region_restriction: the key and A2A-Region pass the gateway to the agent, which checks them.
    let o = paying.call(url, call("process_payment"), json!({"amount": 12.5, "currency": "EUR"})).await.expect("pay");
    assert_eq!((o.result["charged"].clone(), o.result["amount"].clone()), (json!(false), json!(12.5)));
    // did_auth: the agent sees the caller, proven.
    let o = c.call(url, call("notarize_message"), json!({"message": "signed"})).await.expect("notarize_message");
    assert_eq!(o.result["signed_by"], caller, "{}", o.result);
    assert_eq!(o.result["verified"], true, "{}", o.result);
    // The composite: both steps reported.
    let o = c
        .call(url, call("file_brief_report"), json!({"text": "Lift 3 is out of service", "timestamp": ts}))
        .await
        .expect("file_brief_report");
    assert_eq!(o.result["output"]["summary"], "Lift 3 is out of service", "{}", o.result);
    let steps: Vec<&str> =
        o.result["steps"].as_array().expect("steps").iter().filter_map(|s| s["status"].as_str()).collect();
    assert_eq!(steps, ["succeeded", "succeeded"], "{}", o.result);
    // The streamed RESULT: each word a progress event as it is produced, then the result.
    call("stream_summary");
    let words = ["the", "lift", "on", "floor", "three"];
    let n = c.negotiate(url, "stream_summary", None).await.expect("negotiate stream_summary");
    let e = c
        .execute(&n, &json!({"text": words.join(" "), "delay_ms": 20}), &Default::default())
        .await
        .expect("execute stream_summary");
    c.confirm(&e).await.expect("confirm");
    let mut stream =
        c.stream_result(url, &e.response.execution_id, StreamOptions::default()).await.expect("stream_result");
    let mut progress = Vec::new();
    let mut result = None;
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(30), stream.next()).await.expect("an event in time") {
        match ev.expect("event") {
            StreamEvent::Progress { data, .. } => progress.push(data["word"].as_str().unwrap_or("").to_owned()),
            StreamEvent::Result { id, result: r, .. } => {
                assert!(id > 0, "the result came as an SSE event, not a plain RESULT");
                result = Some(r);
            }
            _ => {}
        }
    }
    assert_eq!(progress, words, "the words came one by one through the gateway");
    let result = result.expect("the result event");
    assert_eq!(result.result.as_ref().map(|r| r["summary"].clone()), Some(json!(words.join(" "))));
    called
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_verifying_and_a_transparent_gateway_front_the_demo_with_every_capability_working() {
    let dir = TempDir::new("demo");
    let (gw_port, transparent_port) = (free_port(), free_port());
    let gw_did = format!("did:web:localhost%3A{gw_port}");
    let transparent_did = format!("did:web:localhost%3A{transparent_port}");
    // The demo, trusting both gateways (`a2a-server --demo --trusted-gateway A --trusted-gateway B`).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let demo_port = listener.local_addr().expect("addr").port();
    let (_agent, app) =
        a2a_agent::app::demo_app_trusting(demo_port, vec![gw_did.clone(), transparent_did.clone()]).expect("demo app");
    tokio::spawn(async move { axum::serve(listener, app).await });
    // The verifying gateway (the default: GW-3, GW-8), with its key; the transparent one, without.
    let gw_key = SigningKey::generate().expect("key");
    std::fs::write(dir.0.join("gateway-key.pem"), gw_key.to_pkcs8_pem().expect("pem").as_bytes()).expect("key file");
    let agent = format!("[[agents]]\nurl = \"http://127.0.0.1:{demo_port}/a2a\"\n");
    let _gw = start_gateway(
        &dir,
        "gateway",
        &format!(
            "[gateway]\ndid = \"{gw_did}\"\nkey_file = \"gateway-key.pem\"\n[edge]\nallow_http_loopback_dids = true\n{agent}"
        ),
        gw_port,
    );
    let _transparent = start_gateway(
        &dir,
        "transparent",
        &format!("[gateway]\ndid = \"{transparent_did}\"\n[edge]\nverify_signatures = false\n{agent}"),
        transparent_port,
    );
    let caller_key = SigningKey::generate().expect("key");
    let caller = publish_did(&caller_key).await;

    for (url, did, signing) in [
        (format!("http://127.0.0.1:{gw_port}"), &gw_did, SigningMode::Auto),
        // Through the transparent gateway every request is signed by the caller for the gateway (GW-18).
        (format!("http://127.0.0.1:{transparent_port}"), &transparent_did, SigningMode::Always),
    ] {
        // GW-19: the gateway advertises what it carries.
        let c = client(&caller, &caller_key, signing, &url);
        let caps = c.capabilities(&url).await.expect("capabilities");
        let doc: Value = serde_json::to_value(&caps.document).expect("doc");
        assert_eq!(doc["agent"]["id"], did.as_str());
        let features: Vec<&str> =
            doc["features"].as_array().expect("features").iter().filter_map(Value::as_str).collect();
        for f in ["long_poll", "cancel", "idempotency", "streaming", "composite"] {
            assert!(features.contains(&f), "{url}: features {features:?} lack {f}");
        }
        let paying = Client::builder(Identity::new(&caller, "key-1", caller_key.clone()).expect("identity"))
            .config(
                ClientConfig::default().with_did_resolution(true, false).with_signing(signing).with_region("eu-west-1"),
            )
            .api_key(&url, a2a_agent::demo::DEMO_API_KEY)
            .expect("api key")
            .build()
            .expect("client");
        let mut called = call_every_capability(&c, &paying, &url, &caller).await;
        // Every capability the gateway offers was called (a new demo capability must be added above).
        let mut offered: Vec<String> = doc["capabilities"]
            .as_array()
            .expect("caps")
            .iter()
            .filter_map(|d| d["name"].as_str().map(str::to_owned))
            .collect();
        offered.sort();
        called.sort();
        assert_eq!(called, offered, "{url}");
    }

    // Without the trust, did_auth through the gateways fails as it did before `--trusted-gateway`.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let lone_port = listener.local_addr().expect("addr").port();
    let (_lone, app) = a2a_agent::app::demo_app(lone_port).expect("demo app");
    tokio::spawn(async move { axum::serve(listener, app).await });
    let (lone_gw_port, lone_transparent_port) = (free_port(), free_port());
    let lone_agent = format!("[[agents]]\nurl = \"http://127.0.0.1:{lone_port}/a2a\"\n");
    let _g = start_gateway(
        &dir,
        "lone",
        &format!(
            "[gateway]\ndid = \"did:web:localhost%3A{lone_gw_port}\"\nkey_file = \"gateway-key.pem\"\n[edge]\nallow_http_loopback_dids = true\n{lone_agent}"
        ),
        lone_gw_port,
    );
    let _t = start_gateway(
        &dir,
        "lone-transparent",
        &format!(
            "[gateway]\ndid = \"did:web:localhost%3A{lone_transparent_port}\"\n[edge]\nverify_signatures = false\n{lone_agent}"
        ),
        lone_transparent_port,
    );
    for (port, code) in [(lone_gw_port, "forbidden"), (lone_transparent_port, "audience_mismatch")] {
        let url = format!("http://127.0.0.1:{port}");
        let c = client(&caller, &caller_key, SigningMode::Always, &url);
        let e = c.call(&url, "notarize_message", json!({"message": "x"})).await.expect_err("refused");
        assert_eq!(e.code(), code, "{url}: {e}");
    }
}

/// With `--log-format json` every stderr line of `a2a-gateway` is a JSON object, the error that ends it too; the
/// text format stays plain.
#[test]
fn with_log_format_json_every_stderr_line_of_the_gateway_is_json() {
    let run = |args: &[&str]| {
        let out = Command::new(a2a_test_support::bin("a2a-gateway"))
            .args(args)
            .env("RUST_LOG", "debug")
            .env_remove("A2A_LOG_FORMAT")
            .env_remove("REDIS_URL")
            .stdin(Stdio::null())
            .output()
            .expect("a2a-gateway runs");
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    for (args, says) in [
        (&["--log-format", "json"][..], "--config gateway.toml"),
        (&["--log-format", "json", "--config", "/nonexistent/gateway.toml"][..], "gateway.toml"),
    ] {
        let (code, stderr) = run(args);
        assert_eq!(code, Some(1), "{stderr}");
        assert!(!stderr.is_empty());
        for line in stderr.lines() {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line:?}\n{stderr}"));
            assert!(v.is_object(), "{line}");
        }
        assert!(stderr.contains(says) && stderr.contains("\"level\":\"ERROR\""), "{stderr}");
    }
    let (code, stderr) = run(&["--config", "/nonexistent/gateway.toml"]);
    assert_eq!(code, Some(1));
    assert!(stderr.starts_with("a2a-gateway: "), "{stderr}");
}

/// The demo agent (in process, its A2A 1.x bridge included) behind a verifying `a2a-gateway` process whose
/// configuration ends with `extra`; returns the gateway's base URL, what keeps both running, and the demo's base URL.
async fn demo_behind_a_gateway(dir: &TempDir, extra: &str) -> (String, GatewayProcess, a2a_server::Agent, String) {
    let gw_port = free_port();
    let gw_did = format!("did:web:localhost%3A{gw_port}");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let demo_port = listener.local_addr().expect("addr").port();
    let (agent, app) = a2a_agent::app::demo_app_trusting(demo_port, vec![gw_did.clone()]).expect("demo app");
    tokio::spawn(async move { axum::serve(listener, app).await });
    let gw_key = SigningKey::generate().expect("key");
    std::fs::write(dir.0.join("gateway-key.pem"), gw_key.to_pkcs8_pem().expect("pem").as_bytes()).expect("key file");
    let toml = format!(
        "[gateway]\ndid = \"{gw_did}\"\nkey_file = \"gateway-key.pem\"\n[edge]\nallow_http_loopback_dids = true\n\
         [[agents]]\nurl = \"http://127.0.0.1:{demo_port}/a2a\"\n{extra}"
    );
    let gw = start_gateway(dir, "gateway", &toml, gw_port);
    (format!("http://127.0.0.1:{gw_port}"), gw, agent, format!("http://127.0.0.1:{demo_port}"))
}

/// Runs `program args...` to its end (at most 120 s); panics with its output unless it succeeds and prints `all
/// checks passed`.
async fn run_client(program: &str, args: &[&str]) -> String {
    let run = tokio::process::Command::new(program).args(args).kill_on_drop(true).output();
    let out = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the client finishes within 120 s")
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(out.status.success(), "{program} {args:?} failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("all checks passed"), "{stdout}");
    stdout
}

/// BR-29: the official a2a-sdk client's plain `send_message` through a gateway in front of the demo, naming no
/// skill: a text goes to the gateway's `[bridge] default_skill`, a data part only one skill accepts to that skill, and
/// the gateway's card says so — the script that checks the demo agent itself (a2a-server's a2a1x_sdk.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generic_a2a_1x_client_gets_answers_through_a_gateway_in_front_of_the_demo() {
    let python = a2a_test_support::sdk_python();
    let dir = TempDir::new("demo-1x");
    let (url, _gw, _agent, _) = demo_behind_a_gateway(&dir, "[bridge]\ndefault_skill = \"echo_message\"\n").await;
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../a2a-agent/tests/fixtures/a2a1x/generic_client.py");
    run_client(&python, &[script.to_str().expect("path"), &url]).await;
}

/// Without a default skill the gateway refuses a text message that several skills accept with the skills and how to
/// name one (BR-27's refusal, answered by the gateway, BR-29).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_default_skill_the_gateway_refuses_an_ambiguous_message_listing_the_skills() {
    let dir = TempDir::new("demo-1x-nodefault");
    let (url, _gw, _agent, _) = demo_behind_a_gateway(&dir, "").await;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client");
    let card: Value =
        http.get(format!("{url}/.well-known/agent-card.json")).send().await.expect("card").json().await.expect("json");
    let params = &card["capabilities"]["extensions"][0]["params"];
    assert_eq!(params["skill_selection"], json!(["metadata.skill", "input_schema"]), "{card}");
    assert!(params.get("default_skill").is_none(), "{card}");
    let send = |parts: Value| {
        let http = http.clone();
        let url = url.clone();
        async move {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                              "params": {"message": {"messageId": format!("m-{}", crate::common::now()), "role": "ROLE_USER", "parts": parts}}});
            let r = http.post(format!("{url}/a2a1x/jsonrpc")).header("A2A-Version", "1.0").json(&body).send().await;
            r.expect("send").json::<Value>().await.expect("json")
        }
    };
    let refused = send(json!([{"text": "hello"}])).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("message.metadata.skill") && message.contains("echo_message ("), "{message}");
    // A data part only add_numbers accepts still goes there.
    let sum = send(json!([{"data": {"a": 2, "b": 3}}])).await;
    assert!(sum.get("error").is_none(), "{sum}");
}

/// A client written from `spec/PROTOCOL.md` alone (`spec_client.py`: Python's standard library, no code of this
/// project) runs DISCOVER, NEGOTIATE, EXECUTE, CONFIRM and RESULT for every no-auth capability of the demo through a
/// verifying gateway in front of it, and against the demo itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_written_from_the_spec_alone_completes_every_step_through_a_gateway_in_front_of_the_demo() {
    let dir = TempDir::new("demo-spec-client");
    let (url, _gw, _agent, demo) = demo_behind_a_gateway(&dir, "").await;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("gateway/spec_client.py");
    let script = script.to_str().expect("path");
    // The demo itself first, then through the gateway.
    run_client("python3", &[script, &demo]).await;
    let out = run_client("python3", &[script, &url]).await;
    // Every capability the demo offers without credentials or region was called.
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client");
    let doc: Value = http
        .get(format!("{url}/a2a/capabilities"))
        .header("A2A-Version", "0.3")
        .send()
        .await
        .expect("capabilities")
        .json()
        .await
        .expect("json");
    let free: Vec<&str> = doc["capabilities"]
        .as_array()
        .expect("capabilities")
        .iter()
        .filter(|d| d["auth_requirement"] == "none" && d["region_restriction"].as_array().is_none_or(Vec::is_empty))
        .filter_map(|d| d["name"].as_str())
        .collect();
    assert!(free.len() >= 5, "{free:?}");
    for name in &free {
        assert!(
            out.contains(&format!("ok {name}: RESULT succeeded")),
            "{name} was not run through the gateway:\n{out}"
        );
    }
}
