//! The outbound bridge (spec §20.8, BR-19): `a2a_client::a2a1x` and `a2a a2a1x` against an agent built with the
//! official Python SDK (`a2a-sdk`: `A2A_SDK_PYTHON`, else the venv `.ci/run` creates; the test fails without either), and
//! against our own bridge with a signed card.

use std::sync::Arc;
use std::time::Duration;

use a2a_client::a2a1x::{A2a1xClient, A2a1xError, A2a1xOptions, CardTrust, result_of};
use a2a_core::a2a1x::{StreamResponse, TaskState};
use a2a_core::did::{Did, DidDocument};
use a2a_core::keys::SigningKey;
use a2a_server::AgentBuilder;
use a2a_server::a2a1x::{Bridge, BridgeOptions};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::common::{TestAgent, decl, report_schema};

/// The SDK agent of `a2a-agent/tests/fixtures/a2a1x/sdk_agent.py` on a free port; killed when dropped.
struct SdkAgent {
    base: String,
    _child: tokio::process::Child,
}

async fn sdk_agent(python: &str) -> SdkAgent {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("test value").local_addr().expect("test value").port();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../a2a-agent/tests/fixtures/a2a1x/sdk_agent.py");
    let child = tokio::process::Command::new(python)
        .arg(script)
        .arg(port.to_string())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the SDK agent with {python}: {e}"));
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    for _ in 0..600 {
        if http.get(format!("{base}/.well-known/agent-card.json")).send().await.is_ok_and(|r| r.status() == 200) {
            return SdkAgent { base, _child: child };
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the SDK agent did not start within 60 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_calls_an_agent_built_with_the_python_sdk() {
    let python = a2a_test_support::sdk_python();
    let sdk = sdk_agent(&python).await;
    let client = A2a1xClient::new(A2a1xOptions::default()).expect("test value");
    let agent = client.discover(&sdk.base).await.expect("the SDK agent's card");
    assert_eq!(agent.trust, CardTrust::Unsigned);
    assert!(agent.streaming);
    let names: Vec<&str> = agent.capabilities.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["echo", "count_up", "slow"]);
    // A skill called as if it were one of ours: the payload goes in, the result comes out.
    let task = client.call(&agent, "echo", json!({"title": "Lift 3", "flag": true}), None).await.expect("test value");
    assert_eq!(result_of(&task).expect("test value"), json!({"title": "Lift 3", "flag": true}));
    // The streaming skill: every chunk is seen, and they fold into one artifact.
    let mut chunks = 0;
    let mut states = Vec::new();
    let task = client
        .stream(&agent, "count_up", json!({"n": 4, "ms": 20}), |ev| match ev {
            StreamResponse::ArtifactUpdate(_) => chunks += 1,
            StreamResponse::StatusUpdate(u) => states.push(u.status.state),
            _ => {}
        })
        .await
        .expect("test value");
    assert_eq!(chunks, 4);
    assert_eq!(states.last(), Some(&TaskState::Completed));
    assert_eq!(result_of(&task).expect("test value"), json!({"text": "1 2 3 4 "}));
    // Cancel a running task.
    let running = client.send(&agent, "slow", json!({"ms": 20_000}), true).await.expect("test value");
    let canceled = client.cancel(&agent, &running.id).await.expect("test value");
    assert_eq!(canceled.status.state, TaskState::Canceled);
    assert!(matches!(result_of(&canceled), Err(A2a1xError::TaskFailed { state: TaskState::Canceled, .. })));
    let got = client.get(&agent, &running.id).await.expect("test value");
    assert_eq!(got.status.state, TaskState::Canceled);
    // An unsigned card is refused when a signature is required.
    let strict =
        A2a1xClient::new(A2a1xOptions { require_signature: true, ..A2a1xOptions::default() }).expect("test value");
    assert!(matches!(strict.discover(&sdk.base).await, Err(A2a1xError::Card { .. })));
    // The command line.
    let out = tokio::process::Command::new(a2a_test_support::bin("a2a"))
        .args(["a2a1x", "call", &sdk.base, "count_up", "--data", r#"{"n": 2, "ms": 10}"#, "--stream", "--json"])
        .output()
        .await
        .expect("test value");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("test value");
    assert_eq!(v["result"], json!({"text": "1 2 "}));
    let out = tokio::process::Command::new(a2a_test_support::bin("a2a"))
        .args(["a2a1x", "call", &sdk.base, "no_such_skill", "--data", "{}"])
        .output()
        .await
        .expect("test value");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("echo, count_up, slow"));
}

#[tokio::test]
async fn our_client_verifies_our_bridges_signed_card_and_calls_through_it() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("test value");
    let port = listener.local_addr().expect("test value").port();
    let did = Did::for_host_port("localhost", Some(port), &[]).expect("test value");
    let key = SigningKey::generate().expect("test value");
    let doc = DidDocument::generate(&did, &[("key-1".to_owned(), key.verifying_key().to_jwk())]);
    let agent = AgentBuilder::new(did.to_string())
        .capability(decl("submit_report", report_schema()), |_c, p: Value| async move { Ok(json!({"filed": p})) })
        .build()
        .expect("test value");
    let bridge =
        Bridge::new(&agent, BridgeOptions { signing_key: Some(("key-1".into(), key)), ..BridgeOptions::default() })
            .expect("test value");
    let doc = Arc::new(serde_json::to_vec(&doc).expect("test value"));
    let app = agent.router().merge(bridge.router()).route(
        "/.well-known/did.json",
        axum::routing::get(move || {
            let doc = doc.clone();
            async move { ([("content-type", "application/did+json")], (*doc).clone()) }
        }),
    );
    let running = TestAgent::serve_on(listener, agent, app).await;
    let base = running.endpoint.trim_end_matches("/a2a").to_owned();
    let client = A2a1xClient::new(A2a1xOptions {
        require_signature: true,
        allow_http_loopback_dids: true,
        ..A2a1xOptions::default()
    })
    .expect("test value");
    let agent = client.discover(&base.replace("127.0.0.1", "localhost")).await.expect("a verified card");
    assert_eq!(agent.trust, CardTrust::Verified { kid: format!("{did}#key-1") });
    let payload = json!({"title": "Lift 3 out of service", "timestamp": "2026-11-29T21:00:00Z"});
    let task = client.call(&agent, "submit_report", payload.clone(), None).await.expect("test value");
    assert_eq!(result_of(&task).expect("test value"), json!({"filed": payload}));
    let mut n = 0;
    let task = client.stream(&agent, "submit_report", payload.clone(), |_| n += 1).await.expect("test value");
    assert!(n >= 2, "a task and at least its final status");
    assert_eq!(result_of(&task).expect("test value"), json!({"filed": payload}));
    // Our schema checks reach the 1.x caller as a refusal with a readable message.
    let err = client.call(&agent, "submit_report", json!({"title": 3}), None).await.expect_err("must fail");
    match err {
        A2a1xError::Refused { code, reason, message } => {
            assert_eq!((code, reason.as_str()), (-32602, "INVALID_PARAMS"));
            assert!(message.contains("agreed schema"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // From the command line: a card signed by a loopback DID fails without --allow-http-loopback-dids, and the error
    // says so; with it, the card verifies.
    let cli = |extra: &'static [&'static str]| {
        tokio::process::Command::new(a2a_test_support::bin("a2a"))
            .args(["a2a1x", "card", &base])
            .args(extra)
            .env_remove("A2A_DID")
            .output()
    };
    let out = cli(&[]).await.expect("a2a runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("pass --allow-http-loopback-dids"), "{err}");
    let out = cli(&["--allow-http-loopback-dids"]).await.expect("a2a runs");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("signature: verified"));
}
