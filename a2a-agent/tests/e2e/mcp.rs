//! `/mcp` of the `a2a-server` binary (spec §21, MCP-1): off by default, on with `[mcp] enabled = true` in
//! `agent.toml` or `--mcp`; the official MCP Python SDK (`mcp` 2.3.0, `a2a_test_support::mcp_python`) lists and
//! calls the agent's capabilities through it.

use std::process::Command;
use std::time::Duration;

use a2a_test_support::Process;
use serde_json::{Value, json};

use crate::common::{TempDir, free_port};

const CONFIG: &str = r#"[agent]
did = "did:web:mcp.example.com"

[[capabilities]]
name = "submit_report"
description = "Files a report."
auth_requirement = "none"
input_schema = { type = "object", properties = { title = { type = "string" } }, required = ["title"] }
handler = { type = "echo" }

[[capabilities]]
name = "read_ledger"
description = "Reads the ledger."
auth_requirement = "oauth2"
input_schema = { type = "object" }
handler = { type = "echo" }
"#;

/// `a2a-server --config agent.toml [extra]` with `config` as the file, once it serves; and its base URL.
fn server(config: &str, extra: &[&str]) -> (Process, String, TempDir) {
    let dir = TempDir::new("mcp-agent");
    let path = dir.0.join("agent.toml");
    std::fs::write(&path, config).expect("write agent.toml");
    let port = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_a2a-server"));
    command
        .arg("--config")
        .arg(&path)
        .args(extra)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env_remove("REDIS_URL")
        .env_remove("A2A_LOG_FORMAT");
    let (process, _) = Process::start("a2a-server", command, " serving ");
    (process, format!("http://127.0.0.1:{port}"), dir)
}

/// The MCP client script of tests/fixtures/mcp against `url`.
async fn python_client(url: &str, mode: &str, steps: &str) -> Value {
    let python = a2a_test_support::mcp_python();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/mcp/mcp_client.py");
    let run =
        tokio::process::Command::new(&python).arg(&script).arg(url).arg(mode).arg(steps).kill_on_drop(true).output();
    let out = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the MCP client finishes within 120 s")
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the MCP Python client failed:\n{stdout}\n{stderr}");
    serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"))
}

/// A `tools/list` at the current revision; the HTTP status and the tool names.
async fn tools(base: &str) -> (u16, Vec<String>) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "0"}}}});
    let resp = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/list")
        .body(body.to_string())
        .send()
        .await
        .expect("send");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("text");
    let names = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .flat_map(|v| v["result"]["tools"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect();
    (status, names)
}

/// MCP-1, MCP-5, MCP-10: `[mcp] enabled = true` serves the capabilities as tools to the official SDK, at the current
/// revision and with the `initialize` handshake; the `oauth2` capability is no tool for a caller without a token
/// (MCP-19).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_serves_mcp_when_its_configuration_says_so() {
    let (_p, base, _dir) = server(&format!("{CONFIG}\n[mcp]\nenabled = true\n"), &[]);
    for mode in ["modern", "legacy"] {
        let out = python_client(&format!("{base}/mcp"), mode, "list,call,unknown").await;
        let names: Vec<&String> = out["tools"].as_object().expect("tools").keys().collect();
        assert_eq!(names, ["submit_report"], "{out}");
        assert_eq!(out["call"]["is_error"], false, "{out}");
        assert_eq!(out["call"]["structured"], json!({"echo": {"title": "Lift 3 out of service"}}), "{out}");
        assert_eq!(out["unknown"]["code"], -32602, "{out}");
    }
}

/// MCP-1: without `[mcp]` the agent does not serve `/mcp`; `--mcp` turns it on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_is_off_by_default_and_on_with_the_flag() {
    let (p, base, _dir) = server(CONFIG, &[]);
    assert_eq!(tools(&base).await.0, 404);
    drop(p);
    let (_p, base, _dir2) = server(CONFIG, &["--mcp"]);
    let (status, names) = tools(&base).await;
    assert_eq!((status, names), (200, vec!["submit_report".to_owned()]));
}
