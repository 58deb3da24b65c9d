//! A capability's `command` handler is internal to its agent (HDL-5), in a real `a2a-server` process: the program
//! gets an allow-listed environment (not the agent's secrets), its stderr goes to the agent's log and not to the
//! caller, and it dies with the agent (`kill -9` of the agent leaves no orphan running beside a successor).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common::{SENDER, TempDir};
use crate::handlers::{assert_ends, pid_from, running};
use crate::server_process::ServerProcess;

const SECRET: &str = "s3cr3t-of-the-agent-0123456789";

fn config(dir: &TempDir) -> std::path::PathBuf {
    let sleeper = dir.write("sleeper.sh", "echo $$ > \"$1.tmp\" && mv \"$1.tmp\" \"$1\"\nexec sleep 60\n");
    let pid_file = dir.path("sleeper.pid");
    dir.write(
        "agent.toml",
        &format!(
            r#"
[agent]
did = "did:web:agent.example.com"

[[auth.api_keys]]
key_env = "A2A_TEST_AGENT_SECRET"

[[capabilities]]
name = "show_env"
description = "prints its environment"
auth_requirement = "none"
input_schema = {{ type = "object" }}
handler = {{ kind = "command", program = "python3", args = ["-c", "import json, os; print(json.dumps(dict(os.environ)))"] }}

[[capabilities]]
name = "fail_loudly"
description = "fails, naming a server path on stderr"
auth_requirement = "none"
input_schema = {{ type = "object" }}
handler = {{ kind = "command", program = "sh", args = ["-c", "cat > /dev/null; echo '/srv/agent/private/report.py: disk full' >&2; exit 3"] }}

[[capabilities]]
name = "sleep_long"
description = "writes its pid, then sleeps"
auth_requirement = "none"
input_schema = {{ type = "object" }}
handler = {{ kind = "command", program = "sh", args = ["{}", "{}"] }}
"#,
            sleeper.display(),
            pid_file.display()
        ),
    )
}

struct Caller {
    http: reqwest::Client,
    base: String,
}

impl Caller {
    async fn post(&self, path: &str, body: Value, neg: Option<&str>) -> (StatusCode, Value) {
        let mut rb = self
            .http
            .post(format!("{}{path}", self.base))
            .header("A2A-Version", "0.3")
            .header("A2A-Sender-ID", SENDER)
            .json(&body);
        if let Some(n) = neg {
            rb = rb.header("A2A-Negotiation-ID", n);
        }
        let resp = rb.send().await.expect("request");
        let status = resp.status();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// NEGOTIATE, EXECUTE `{}`, CONFIRM: the execution id.
    async fn start(&self, capability: &str) -> String {
        let (s, n) = self
            .post(
                "/a2a/negotiate",
                json!({"target_capability": capability, "proposed_schema": {"type": "object"}}),
                None,
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{n}");
        let (s, e) = self.post("/a2a/execute", json!({}), n["negotiation_id"].as_str()).await;
        assert_eq!(s, StatusCode::CREATED, "{e}");
        let exe = e["execution_id"].as_str().expect("execution_id").to_owned();
        let (s, c) = self.post("/a2a/confirm", json!({"execution_id": exe}), None).await;
        assert_eq!(s, StatusCode::ACCEPTED, "{c}");
        exe
    }

    async fn finished(&self, exe: &str) -> Value {
        let seg = a2a_core::execution_id::ExecutionId::parse(exe).expect("id").to_path_segment();
        let resp = self
            .http
            .get(format!("{}/a2a/result/{seg}?wait_ms=20000", self.base))
            .header("A2A-Version", "0.3")
            .header("A2A-Sender-ID", SENDER)
            .send()
            .await
            .expect("result");
        resp.json().await.expect("json")
    }
}

fn agent(dir: &TempDir) -> (ServerProcess, Caller) {
    let server = ServerProcess::start_with_env(&config(dir), &[("A2A_TEST_AGENT_SECRET", SECRET)]);
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client");
    let base = server.base.clone();
    (server, Caller { http, base })
}

#[tokio::test]
async fn a_command_handler_gets_an_allow_listed_environment_without_the_agents_secrets() {
    let dir = TempDir::new("hdl4-env");
    let (_server, caller) = agent(&dir);
    let exe = caller.start("show_env").await;
    let r = caller.finished(&exe).await;
    assert_eq!(r["status"], json!("succeeded"), "{r}");
    let env = r["result"].as_object().expect("the environment as an object");
    assert!(!r.to_string().contains(SECRET), "the agent's key_env value reached the program: {r}");
    assert!(!env.contains_key("A2A_TEST_AGENT_SECRET"), "{r}");
    assert!(!env.contains_key("A2A_SUPERVISOR_PARENT"), "{r}");
    assert_eq!(env["A2A_CAPABILITY"], json!("show_env"));
    assert!(env.contains_key("PATH"), "{r}");
    let unexpected: Vec<&String> = env
        .keys()
        .filter(|k| {
            !k.starts_with("A2A_")
                && !["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "TRACEPARENT"].contains(&k.as_str())
        })
        // Set by the interpreter itself (or a pyenv shim in front of it).
        .filter(|k| {
            !["LC_CTYPE", "PWD", "SHLVL", "_"].contains(&k.as_str()) && !k.trim_start_matches('_').starts_with("PYENV")
        })
        .collect();
    assert!(unexpected.is_empty(), "variables beyond the allow list: {unexpected:?}");
}

#[tokio::test]
async fn a_failing_command_handlers_stderr_is_not_returned_to_the_caller() {
    let dir = TempDir::new("hdl4-stderr");
    let (_server, caller) = agent(&dir);
    let exe = caller.start("fail_loudly").await;
    let r = caller.finished(&exe).await;
    assert_eq!(r["status"], json!("failed"), "{r}");
    assert_eq!(r["error"]["code"], json!("handler_failed"), "{r}");
    assert_eq!(r["error"]["details"]["exit_code"], json!(3), "{r}");
    let text = r.to_string();
    assert!(!text.contains("/srv/agent/private") && !text.contains("disk full"), "stderr reached the caller: {r}");
}

#[tokio::test]
async fn a_command_handlers_program_dies_with_its_agent_killed_with_sigkill() {
    let dir = TempDir::new("hdl4-kill");
    let (mut server, caller) = agent(&dir);
    let _exe = caller.start("sleep_long").await;
    let pid = pid_from(&dir.path("sleeper.pid")).await;
    assert!(running(pid), "the program runs");
    server.kill();
    assert_ends(pid, "the handler's program after kill -9 of its agent").await;
}

#[tokio::test]
async fn a_session_command_handlers_program_dies_with_its_agent_killed_with_sigkill() {
    // HDL-4: a session's reply program runs under the same supervisor as a capability's.
    let dir = TempDir::new("hdl4-session-kill");
    let sleeper = dir.write("sleeper.sh", "echo $$ > \"$1.tmp\" && mv \"$1.tmp\" \"$1\"\nexec sleep 60\n");
    let pid_file = dir.path("session-sleeper.pid");
    let config = dir.write(
        "agent.toml",
        &format!(
            r#"
[agent]
did = "did:web:agent.example.com"

[sessions]
auth_requirement = "none"
visibility = "all"
allow = ["{SENDER}#*", "did:web:agent.example.com#*"]

[[sessions.session]]
session_key = "desk"
summary = "A desk whose program sleeps."
handler = {{ type = "command", argv = ["sh", "{}", "{}"], timeout_ms = 60000 }}
"#,
            sleeper.display(),
            pid_file.display()
        ),
    );
    let mut server = ServerProcess::start(&config);
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client");
    let sent = http
        .post(format!("{}/a2a/sessions/send", server.base))
        .header("A2A-Version", "0.3")
        .header("A2A-Sender-ID", SENDER)
        .json(&json!({"target": "desk", "from": "caller", "text": "hello?", "max_turns": 0}))
        .send()
        .await
        .expect("send");
    let status = sent.status();
    let body: Value = sent.json().await.unwrap_or(Value::Null);
    assert!(status.is_success(), "{status}: {body}");
    let pid = pid_from(&pid_file).await;
    assert!(running(pid), "the session's program runs");
    server.kill();
    assert_ends(pid, "the session handler's program after kill -9 of its agent").await;
}
