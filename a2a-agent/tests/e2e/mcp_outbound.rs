//! The `mcp` handler against an MCP server written with the official MCP Python SDK (`tests/fixtures/mcp_server.py`,
//! `mcp` 2.3.0, spec §21.9): its tools become capabilities an A2A caller (the `a2a-client` SDK) negotiates and runs,
//! over Streamable HTTP and over stdio; the tool whose schema breaks a rule is listed with the reason (MCP-33); a
//! tool error fails the execution cleanly (MCP-36); CANCEL and timeouts cancel the MCP request, as the server itself
//! records (MCP-37); a stdio server that dies is started again (MCP-39) and ends with the agent (MCP-40); an
//! unreachable server stops the agent (MCP-38).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use a2a_client::{Client, ClientError, ExecuteOptions, Identity, Wait};
use a2a_core::wire::ExecutionStatus;
use serde_json::{Value, json};

use crate::common::{TempDir, free_port};
use crate::handlers::{assert_ends, pid_from};
use crate::server_process::ServerProcess;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_server.py")
}

/// The fixture serving Streamable HTTP on a free port; killed when dropped.
struct HttpMcpServer {
    child: Child,
    url: String,
}

impl HttpMcpServer {
    fn start(markers: &Path) -> HttpMcpServer {
        let port = free_port();
        let child = Command::new(a2a_test_support::mcp_python())
            .arg(fixture())
            .args(["--transport", "streamable-http", "--port", &port.to_string(), "--marker-dir"])
            .arg(markers)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the MCP fixture");
        HttpMcpServer { child, url: format!("http://127.0.0.1:{port}/mcp") }
    }
}

impl Drop for HttpMcpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An agent.toml importing the fixture's tools under the prefix `calc`: `handler` is the `mcp` handler's table
/// without its `type`. The agent waits for the server to come up (MCP-38), so the two may start together.
fn config(dir: &TempDir, handler: &str, admin_port: u16) -> PathBuf {
    dir.write(
        "agent.toml",
        &format!(
            r#"
[agent]
did = "did:web:localhost"

[admin]
listen = "127.0.0.1:{admin_port}"
console = true

[[capabilities]]
auth_requirement = "none"
estimated_latency_ms = 20
handler = {{ type = "mcp", prefix = "calc", connect_timeout_ms = 30000, {handler} }}
"#
        ),
    )
}

fn client() -> Client {
    Client::builder(Identity::unsigned("did:web:caller.example.com").expect("identity")).build().expect("client")
}

async fn wait_for(file: &Path, within: Duration) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if file.exists() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// Negotiates (with `timeout_ms`), executes and confirms `calc_slow_echo`; returns the execution id.
async fn start_slow(c: &Client, url: &str, token: &str, timeout_ms: Option<u64>) -> String {
    let n = c.negotiate_with(url, "calc_slow_echo", None, timeout_ms, false).await.expect("negotiate");
    let e = c.execute(&n, &json!({"token": token, "seconds": 60}), &ExecuteOptions::default()).await.expect("execute");
    c.confirm(&e).await.expect("confirm");
    e.id().to_owned()
}

/// What every transport must do: the tools as capabilities, results, errors, cancel and timeout reaching the server.
async fn the_tools_work_as_capabilities(base: &str, markers: &Path) {
    let c = client();
    let caps = c.capabilities(base).await.expect("capabilities");
    let mut names: Vec<&str> = caps.document.capabilities.iter().map(|d| d.name.as_str()).collect();
    names.sort_unstable();
    // MCP-31, MCP-32, MCP-33: `either_value`'s schema (`anyOf` of a string and a number) breaks a rule: not a
    // capability. MCP-34: `maybe_count`'s (`int | None`: `anyOf` with null, `integer`) is rewritten and imported.
    assert_eq!(names, ["calc_add", "calc_always_fail", "calc_maybe_count", "calc_shout", "calc_slow_echo"]);
    let count = caps.document.capabilities.iter().find(|d| d.name == "calc_maybe_count").expect("calc_maybe_count");
    assert_eq!(count.input_schema["properties"]["n"]["type"], json!(["number", "null"]));
    assert_eq!(count.input_schema["properties"]["n"]["multipleOf"], json!(1));
    let add = caps.document.capabilities.iter().find(|d| d.name == "calc_add").expect("calc_add");
    // MCP-34: the tool's inputSchema is the capability's input schema; the entry's fields apply to every tool.
    assert_eq!(add.input_schema["required"], json!(["a", "b"]));
    assert_eq!(add.input_schema["properties"]["a"]["type"], "number");
    assert_eq!((add.description.as_str(), add.estimated_latency_ms), ("Adds two numbers", Some(20)));

    // MCP-35: the handshake runs the tool; its structured result is the execution's result.
    let out = c.call(base, "calc_add", json!({"a": 2, "b": 3})).await.expect("calc_add runs");
    assert_eq!(out.result, json!({"sum": 5.0}));
    // Text that is not JSON comes back as {"text": ...}.
    let out = c.call(base, "calc_shout", json!({"text": "hi"})).await.expect("calc_shout runs");
    assert_eq!(out.result, json!({"text": "HI!"}));
    // MCP-34: the rewritten schema accepts what the tool's accepts, and refuses what it refuses.
    let out = c.call(base, "calc_maybe_count", json!({"n": 2})).await.expect("calc_maybe_count runs");
    assert_eq!(out.result, json!({"count": [0, 1]}));
    let out = c.call(base, "calc_maybe_count", json!({"n": null})).await.expect("calc_maybe_count with null");
    assert_eq!(out.result, json!({"count": [0, 1, 2]}));
    let refused = c.call(base, "calc_maybe_count", json!({"n": 1.5})).await.expect_err("1.5 is not an integer");
    assert!(!matches!(refused, ClientError::ExecutionFailed { .. }), "{refused:?}");
    // The negotiated schema is the tool's: a payload it refuses never reaches the server.
    let refused = c.call(base, "calc_add", json!({"a": "two", "b": 3})).await.expect_err("refused");
    assert!(!matches!(refused, ClientError::ExecutionFailed { .. }), "{refused:?}");

    // MCP-36: isError fails the execution with handler_failed and the tool's message.
    match c.call(base, "calc_always_fail", json!({"reason": "testing"})).await {
        Err(ClientError::ExecutionFailed { status, error, .. }) => {
            assert_eq!(status, ExecutionStatus::Failed);
            assert_eq!(error.code.as_str(), "handler_failed");
            assert!(error.message.contains("refused on purpose: testing"), "{}", error.message);
            assert_eq!(error.details.as_ref().map(|d| d["mcp_tool"].clone()), Some(json!("always_fail")));
        }
        other => panic!("expected a failed execution, got {other:?}"),
    }

    // MCP-37: CANCEL reaches the MCP server as notifications/cancelled (the tool records its cancellation).
    let exe = start_slow(&c, base, "canceled", None).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = c.cancel(base, &exe).await.expect("cancel");
    assert_eq!(r.status, ExecutionStatus::Canceled);
    assert!(
        wait_for(&markers.join("cancelled-canceled"), Duration::from_secs(10)).await,
        "the MCP server never saw the cancellation"
    );
    // MCP-37: so does the execution's timeout.
    let exe = start_slow(&c, base, "timed_out", Some(1_000)).await;
    let r = c.result(base, &exe, Wait::For(Duration::from_secs(20))).await.expect("result");
    assert_eq!(r.status, ExecutionStatus::TimedOut);
    assert!(
        wait_for(&markers.join("cancelled-timed_out"), Duration::from_secs(10)).await,
        "the MCP server never saw the timeout's cancellation"
    );
    assert!(!markers.join("finished-canceled").exists() && !markers.join("finished-timed_out").exists());
}

/// MCP-33: the console's `/console/api/agent` lists the tool that was not imported, with the rule it breaks.
async fn console_lists_the_skipped_tool(admin_port: u16) {
    let agent: Value = reqwest::get(format!("http://127.0.0.1:{admin_port}/console/api/agent"))
        .await
        .expect("console")
        .json()
        .await
        .expect("json");
    let skipped = &agent["mcp"][0]["skipped"];
    assert_eq!(skipped.as_array().map(Vec::len), Some(1), "{agent}");
    assert_eq!(skipped[0]["tool"], "either_value");
    assert_eq!(skipped[0]["capability"], "calc_either_value");
    let rules: Vec<&str> =
        skipped[0]["violations"].as_array().into_iter().flatten().filter_map(|v| v["rule"].as_str()).collect();
    assert!(rules.contains(&"unknown_keyword"), "{skipped}");
    assert!(
        skipped[0]["reason"].as_str().is_some_and(|r| r.contains("unknown_keyword at `/properties/value/anyOf`")),
        "{skipped}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_server_over_streamable_http_has_its_tools_negotiated_run_canceled_and_the_broken_one_listed() {
    let dir = TempDir::new("mcp-http");
    let markers = dir.path("markers");
    let mcp = HttpMcpServer::start(&markers);
    let admin_port = free_port();
    let cfg = config(&dir, &format!("url = {:?}", mcp.url), admin_port);
    let agent = ServerProcess::start(&cfg);
    the_tools_work_as_capabilities(&format!("{}/a2a", agent.base), &markers).await;
    console_lists_the_skipped_tool(admin_port).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_server_over_stdio_has_its_tools_run_and_ends_with_the_agent() {
    let dir = TempDir::new("mcp-stdio");
    let markers = dir.path("markers");
    let argv = json!([a2a_test_support::mcp_python(), fixture(), "--transport", "stdio", "--marker-dir", markers]);
    let admin_port = free_port();
    let cfg = config(&dir, &format!("argv = {argv}"), admin_port);
    let mut agent = ServerProcess::start(&cfg);
    the_tools_work_as_capabilities(&format!("{}/a2a", agent.base), &markers).await;
    console_lists_the_skipped_tool(admin_port).await;
    // MCP-39: a stdio server that dies is started again for the next execution (one in flight would fail; none is).
    let first = pid_from(&markers.join("pid-stdio")).await;
    std::fs::remove_file(markers.join("pid-stdio")).expect("remove the pid file");
    let killed = Command::new("kill").args(["-KILL", &first.to_string()]).status().expect("run kill");
    assert!(killed.success());
    assert_ends(first, "the killed stdio MCP server").await;
    let base = format!("{}/a2a", agent.base);
    let mut answered = None;
    for _ in 0..2 {
        match client().call(&base, "calc_add", json!({"a": 1, "b": 1})).await {
            Ok(out) => {
                answered = Some(out.result);
                break;
            }
            Err(e) => eprintln!("call after the server died: {e}"),
        }
    }
    assert_eq!(answered, Some(json!({"sum": 2.0})), "the agent never reconnected");
    // MCP-40: the stdio server is the agent's child; it ends when the agent shuts down.
    let pid = pid_from(&markers.join("pid-stdio")).await;
    assert_ne!(pid, first);
    agent.terminate();
    assert!(agent.wait_exit(Duration::from_secs(30)).is_some(), "the agent did not exit on SIGTERM");
    assert_ends(pid, "the stdio MCP server after the agent's shutdown").await;
}

fn check(cfg: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_a2a-server"))
        .args(["check", "--config"])
        .arg(cfg)
        .env("RUST_LOG", "error")
        .output()
        .expect("run a2a-server check")
}

#[test]
fn check_lists_the_tool_whose_schema_breaks_a_rule_with_the_rule_and_exits_2() {
    let dir = TempDir::new("mcp-check");
    let markers = dir.path("markers");
    let argv = json!([a2a_test_support::mcp_python(), fixture(), "--transport", "stdio", "--marker-dir", markers]);
    let cfg = config(&dir, &format!("argv = {argv}"), free_port());
    let out = check(&cfg);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let warning = stderr.lines().find(|l| l.contains("either_value")).unwrap_or_else(|| panic!("{stderr}"));
    // `file:line:column:` of the entry's handler, the tool, its capability name and the rule broken.
    assert!(warning.contains("agent.toml:12:"), "{warning}");
    assert!(warning.contains("calc_either_value") && warning.contains("unknown_keyword"), "{warning}");
    assert_eq!(stderr.matches("is not imported").count(), 1, "{stderr}");
}

#[test]
fn unreachable_mcp_server_refuses_the_configuration_naming_the_server() {
    let dir = TempDir::new("mcp-down");
    let url = format!("http://127.0.0.1:{}/mcp", free_port());
    let cfg = dir.write(
        "agent.toml",
        &format!(
            "[agent]\ndid = \"did:web:localhost\"\n\n[[capabilities]]\nauth_requirement = \"none\"\n\
             handler = {{ type = \"mcp\", url = {url:?}, connect_timeout_ms = 300 }}\n"
        ),
    );
    let out = check(&cfg);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // MCP-38: the entry's position and the server it could not reach.
    assert!(
        stderr.contains("agent.toml:6:") && stderr.contains(&format!("cannot connect to the MCP server {url}")),
        "{stderr}"
    );
}
