//! Interop with the real A2A 1.x ecosystem (spec §20.9): the official Python SDK (`a2a-sdk`, pinned in `.ci/run`)
//! as a client of the bridge — card and signature, SendMessage, GetTask, ListTasks, CancelTask, streaming and
//! SubscribeToTask, on the JSON-RPC and HTTP+JSON bindings.
//!
//! The SDK's interpreter is `A2A_SDK_PYTHON`, else the venv `.ci/run` creates; without either the test fails (it
//! never reports a pass for a run that did not happen).

use std::time::Duration;

use a2a_server::Limits;
use a2a_server::a2a1x::BridgeLimits;

pub fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/a2a1x").join(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_client_uses_our_bridge() {
    let python = a2a_test_support::sdk_python();
    let a = super::a2a1x::start(BridgeLimits::default(), Limits::default()).await;
    let jwk = serde_json::to_string(&a.key.verifying_key().to_jwk()).expect("jwk");
    let run = tokio::process::Command::new(&python)
        .arg(fixture("sdk_client.py"))
        .arg(&a.base)
        .arg(&jwk)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the SDK client finishes within 120 s")
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(out.status.success(), "the a2a-sdk client failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("all checks passed"), "{stdout}");
}

/// BR-27, BR-28: the official SDK client's plain `send_message` (a text message naming no skill, as a chat UI sends
/// it) gets an answer from `a2a-server --demo` — the binary, run as a user runs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generic_sdk_client_gets_an_answer_from_the_demo_without_naming_a_skill() {
    let python = a2a_test_support::sdk_python();
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let mut demo = tokio::process::Command::new(env!("CARGO_BIN_EXE_a2a-server"))
        .args(["--demo", "--listen", &format!("127.0.0.1:{port}")])
        .env_remove("REDIS_URL")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("a2a-server --demo starts");
    // Serving once the banner is printed.
    let mut banner = tokio::io::BufReader::new(demo.stdout.take().expect("stdout"));
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(60), tokio::io::AsyncBufReadExt::read_line(&mut banner, &mut line))
        .await
        .expect("the demo prints its banner")
        .expect("read");
    tokio::spawn(async move {
        let mut sink = tokio::io::sink();
        let _ = tokio::io::copy(&mut banner, &mut sink).await;
    });
    let run = tokio::process::Command::new(&python)
        .arg(fixture("generic_client.py"))
        .arg(format!("http://127.0.0.1:{port}"))
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the SDK client finishes within 120 s")
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(out.status.success(), "the a2a-sdk client failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("all checks passed"), "{stdout}");
    let _ = demo.kill().await;
}
