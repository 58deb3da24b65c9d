//! The ready-made handlers end to end (`a2a_server::handler::builtin`): `command` runs real programs (shell and Python scripts
//! written to a temporary directory), `http` forwards to a small axum service standing in for a third-party backend,
//! and `echo`.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_server::AgentBuilder;
use a2a_server::handler::builtin::{CommandHandler, HttpHandler};
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::{SENDER, TempDir, TestAgent, decl};

const CAPABILITY: &str = "run_program";

/// The proposal the tests negotiate: an object with an optional `text`.
pub fn text_schema() -> Value {
    json!({"type": "object", "properties": {"text": {"type": "string"}}})
}

/// An agent whose one capability, `run_program`, is this handler.
async fn agent_with(handler: impl a2a_server::handler::Handler) -> TestAgent {
    TestAgent::start(
        AgentBuilder::new("did:web:agent.example.com").capability(decl(CAPABILITY, text_schema()), handler),
    )
    .await
}

/// NEGOTIATE (with `timeout_ms` when given), EXECUTE `payload`, CONFIRM with `confirm_headers`; returns the
/// execution id.
async fn start(t: &TestAgent, payload: Value, timeout_ms: Option<u64>, confirm_headers: &[(&str, &str)]) -> String {
    let mut body = json!({"target_capability": CAPABILITY, "proposed_schema": text_schema()});
    if let Some(ms) = timeout_ms {
        body["timeout_ms"] = json!(ms);
    }
    let n = t.post("/a2a/negotiate", body).await;
    assert_eq!(n.status, StatusCode::OK, "{}", n.body);
    let exe = t.executed(n.body["negotiation_id"].as_str().expect("negotiation_id"), payload).await;
    let mut rb = t.req(Method::POST, "/a2a/confirm").json(&json!({"execution_id": exe}));
    for (k, v) in confirm_headers {
        rb = rb.header(*k, *v);
    }
    let c = t.send(rb).await;
    assert_eq!(c.status, StatusCode::ACCEPTED, "{}", c.body);
    exe
}

/// The whole handshake; returns the final RESULT (long-polled for up to 10 s).
async fn run(t: &TestAgent, payload: Value, timeout_ms: Option<u64>) -> Value {
    let exe = start(t, payload, timeout_ms, &[]).await;
    finished(t, &exe).await
}

async fn finished(t: &TestAgent, exe: &str) -> Value {
    let r = t.result(exe, 30_000).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    r.body
}

fn message(result: &Value) -> &str {
    result["error"]["message"].as_str().unwrap_or_default()
}

/// A script file in `dir`.
fn script(dir: &TempDir, name: &str, text: &str) -> String {
    dir.write(name, text).display().to_string()
}

/// Asserts that `got` is a W3C `traceparent` of the same trace as `sent` (the same one, or a child span of it).
fn assert_same_trace(got: Option<&str>, sent: &str) {
    let got = got.unwrap_or_else(|| panic!("no traceparent, though the CONFIRM sent {sent}"));
    let parts: Vec<&str> = got.split('-').collect();
    assert_eq!(parts.len(), 4, "{got}");
    assert_eq!(&got[..36], &sent[..36], "another trace: {got} for {sent}");
    assert!(parts[2].len() == 16 && parts[2].bytes().all(|b| b.is_ascii_hexdigit()), "{got}");
}

/// Whether process `pid` still runs (a zombie waiting to be reaped has been killed, so it does not count).
pub fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        // The state follows the command name in parentheses, which may itself contain spaces or parentheses.
        Ok(stat) => stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()) != Some("Z"),
    }
}

/// Waits up to 20 s (a loaded machine starts programs slowly) for a program to write its PID to `file`.
pub async fn pid_from(file: &Path) -> u32 {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(pid) = std::fs::read_to_string(file).ok().and_then(|s| s.trim().parse().ok()) {
            return pid;
        }
        assert!(Instant::now() < until, "the program never wrote its PID to {}", file.display());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits up to 10 s for process `pid` to end; panics if it does not (it would run for a minute).
pub async fn assert_ends(pid: u32, what: &str) {
    let until = Instant::now() + Duration::from_secs(10);
    while running(pid) {
        assert!(Instant::now() < until, "{what}: process {pid} is still running");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A program that writes its PID to the file named by its argument, then sleeps for a minute: `sh` replaced by
/// `sleep` (`exec`), so that the PID written is that of the one process the handler started.
fn sleeper(dir: &TempDir) -> (String, std::path::PathBuf) {
    let pid_file = dir.path("sleeper.pid");
    let path = script(dir, "sleeper.sh", "echo $$ > \"$1.tmp\" && mv \"$1.tmp\" \"$1\"\nexec sleep 60\n");
    (path, pid_file)
}

#[tokio::test]
async fn command_gets_the_payload_on_stdin_and_the_execution_in_its_environment_and_its_stdout_is_the_result() {
    let dir = TempDir::new("cmd-ok");
    let program = script(
        &dir,
        "report.py",
        "import json, os, sys\npayload = json.load(sys.stdin)\n\
         names = ['A2A_EXECUTION_ID', 'A2A_NEGOTIATION_ID', 'A2A_SENDER_ID', 'A2A_CAPABILITY', 'TRACEPARENT', 'EXTRA']\n\
         print(json.dumps({'got': payload, 'env': {n: os.environ.get(n) for n in names}, 'cwd': os.getcwd()}))\n",
    );
    let mut h = CommandHandler::new("python3", vec![program]);
    h.env.insert("EXTRA".into(), "configured".into());
    h.cwd = Some(dir.0.clone());
    let t = agent_with(h).await;
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let exe = start(&t, json!({"text": "héllo \"world\""}), None, &[("traceparent", traceparent)]).await;
    let r = finished(&t, &exe).await;
    assert_eq!(r["status"], json!("succeeded"), "{r}");
    let result = &r["result"];
    assert_eq!(result["got"], json!({"text": "héllo \"world\""}));
    assert_eq!(result["env"]["A2A_EXECUTION_ID"], json!(exe));
    assert_eq!(result["env"]["A2A_NEGOTIATION_ID"], r["negotiation_id"]);
    assert_eq!(result["env"]["A2A_SENDER_ID"], json!(SENDER));
    assert_eq!(result["env"]["A2A_CAPABILITY"], json!(CAPABILITY));
    // The program continues the trace of the CONFIRM that started the work.
    assert_same_trace(result["env"]["TRACEPARENT"].as_str(), traceparent);
    assert_eq!(result["env"]["EXTRA"], json!("configured"));
    let cwd = std::fs::canonicalize(&dir.0).expect("canonical");
    assert_eq!(result["cwd"], json!(cwd.display().to_string()));
}

#[tokio::test]
async fn command_exiting_non_zero_fails_with_handler_failed_and_its_exit_code_but_not_its_stderr() {
    let dir = TempDir::new("cmd-exit");
    // 200 lines of noise (more than the 4 KiB of stderr kept), then the line that matters.
    let program = script(
        &dir,
        "fail.sh",
        "cat > /dev/null\ni=0\nwhile [ $i -lt 200 ]; do echo \"noise line $i of the program\" >&2; i=$((i+1)); done\n\
         echo 'report.py: the disk is full' >&2\nexit 3\n",
    );
    let t = agent_with(CommandHandler::new("sh", vec![program])).await;
    let r = run(&t, json!({"text": "x"}), None).await;
    assert_eq!(r["status"], json!("failed"), "{r}");
    assert_eq!(r["error"]["code"], json!("handler_failed"));
    let m = message(&r);
    assert!(m.contains("exit status: 3") && m.contains("agent's log"), "{m}");
    // HDL-5: stderr is logged by the agent, never returned to the caller.
    assert!(!r.to_string().contains("the disk is full"), "stderr reached the caller: {r}");
    assert_eq!(r["error"]["details"]["exit_code"], json!(3));
    assert!(r["error"]["details"].get("stderr").is_none(), "{r}");
    assert!(r.get("result").is_none());
}

#[tokio::test]
async fn command_printing_something_other_than_json_fails_with_a_clear_message() {
    let dir = TempDir::new("cmd-nonjson");
    let program =
        script(&dir, "chatty.sh", "cat > /dev/null\necho 'Report filed, thank you!'\necho 'warning: x' >&2\n");
    let t = agent_with(CommandHandler::new("sh", vec![program])).await;
    let r = run(&t, json!({}), None).await;
    assert_eq!((&r["status"], &r["error"]["code"]), (&json!("failed"), &json!("handler_failed")), "{r}");
    let m = message(&r);
    assert!(m.contains("did not print one JSON value on stdout"), "{m}");
    assert!(m.contains("Report filed, thank you!"), "{m}");
    // HDL-5: stderr is the agent's log's, not the caller's.
    assert!(!m.contains("warning: x"), "{m}");
}

#[tokio::test]
async fn command_running_past_the_negotiated_timeout_is_timed_out_and_killed() {
    let dir = TempDir::new("cmd-timeout");
    let (program, pid_file) = sleeper(&dir);
    let t = agent_with(CommandHandler::new("sh", vec![program, pid_file.display().to_string()])).await;
    let started = Instant::now();
    // 2 s: time for a loaded machine to start the program (and write its PID) before the timeout kills it.
    let exe = start(&t, json!({}), Some(2_000), &[]).await;
    let pid = pid_from(&pid_file).await;
    assert!(running(pid));
    let r = finished(&t, &exe).await;
    // Ended by the 2 s timeout, not by the program's own 60 s.
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    assert_eq!(r["status"], json!("timed_out"), "{r}");
    assert_eq!(r["error"]["code"], json!("timed_out"));
    assert_ends(pid, "after the timeout").await;
}

#[tokio::test]
async fn what_a_command_started_in_the_background_is_killed_with_it_on_timeout_and_on_cancel() {
    for cancel in [false, true] {
        let dir = TempDir::new("cmd-group");
        let pid_file = dir.path("grandchild.pid");
        // The shell starts a background `sleep`, records its PID, then waits: a grandchild of the agent.
        let program = script(&dir, "spawner.sh", "sleep 60 &\necho $! > \"$1.tmp\" && mv \"$1.tmp\" \"$1\"\nwait\n");
        let t = agent_with(CommandHandler::new("sh", vec![program, pid_file.display().to_string()])).await;
        let exe = start(&t, json!({}), Some(if cancel { 30_000 } else { 500 }), &[]).await;
        let grandchild = pid_from(&pid_file).await;
        assert!(running(grandchild));
        if cancel {
            let c = t.post("/a2a/cancel", json!({"execution_id": exe})).await;
            assert_eq!(c.status, StatusCode::OK, "{}", c.body);
        }
        let r = finished(&t, &exe).await;
        assert_eq!(r["status"], json!(if cancel { "canceled" } else { "timed_out" }), "{r}");
        assert_ends(grandchild, if cancel { "grandchild after CANCEL" } else { "grandchild after the timeout" }).await;
    }
}

#[tokio::test]
async fn command_own_timeout_shorter_than_the_execution_fails_it_and_kills_the_program() {
    let dir = TempDir::new("cmd-own-timeout");
    let (program, pid_file) = sleeper(&dir);
    let mut h = CommandHandler::new("sh", vec![program, pid_file.display().to_string()]);
    h.timeout = Some(Duration::from_millis(400));
    let t = agent_with(h).await;
    let exe = start(&t, json!({}), Some(30_000), &[]).await;
    let pid = pid_from(&pid_file).await;
    let r = finished(&t, &exe).await;
    assert_eq!((&r["status"], &r["error"]["code"]), (&json!("failed"), &json!("handler_failed")), "{r}");
    assert!(message(&r).contains("did not finish within 400 ms and was killed"), "{r}");
    assert_ends(pid, "after its own timeout").await;
}

#[tokio::test]
async fn cancel_of_a_running_command_kills_the_program() {
    let dir = TempDir::new("cmd-cancel");
    let (program, pid_file) = sleeper(&dir);
    let t = agent_with(CommandHandler::new("sh", vec![program, pid_file.display().to_string()])).await;
    let exe = start(&t, json!({}), Some(30_000), &[]).await;
    let pid = pid_from(&pid_file).await;
    assert!(running(pid));
    let c = t.post("/a2a/cancel", json!({"execution_id": exe})).await;
    assert_eq!(c.status, StatusCode::OK, "{}", c.body);
    assert_eq!(c.body["status"], json!("canceled"));
    assert_ends(pid, "after CANCEL").await;
    assert_eq!(t.result(&exe, 0).await.body["status"], json!("canceled"));
}

#[tokio::test]
async fn command_printing_more_than_max_output_bytes_fails() {
    let dir = TempDir::new("cmd-big");
    // Valid JSON, but 5000 bytes of it.
    let program = script(&dir, "big.py", "import json, sys\nsys.stdin.read()\nprint(json.dumps('x' * 5000))\n");
    let mut h = CommandHandler::new("python3", vec![program]);
    h.max_output_bytes = 1000;
    let t = agent_with(h).await;
    let r = run(&t, json!({}), None).await;
    assert_eq!((&r["status"], &r["error"]["code"]), (&json!("failed"), &json!("handler_failed")), "{r}");
    assert!(message(&r).contains("printed more than 1000 bytes"), "{r}");
    // Under the limit the same program succeeds.
    let mut h = CommandHandler::new("python3", vec![dir.path("big.py").display().to_string()]);
    h.max_output_bytes = 6000;
    let t = agent_with(h).await;
    assert_eq!(run(&t, json!({}), None).await["result"].as_str().map(str::len), Some(5000));
}

#[tokio::test]
async fn command_that_does_not_exist_fails_with_cannot_start() {
    let t = agent_with(CommandHandler::new("/nonexistent/a2a-no-such-program", vec![])).await;
    let r = run(&t, json!({}), None).await;
    assert_eq!((&r["status"], &r["error"]["code"]), (&json!("failed"), &json!("handler_failed")), "{r}");
    let m = message(&r);
    assert!(m.contains("cannot start `/nonexistent/a2a-no-such-program`"), "{m}");
}

#[tokio::test]
async fn echo_returns_the_payload_under_echo() {
    let t = agent_with(a2a_server::handler::builtin::echo()).await;
    let r = run(&t, json!({"text": "ping"}), None).await;
    assert_eq!(r["status"], json!("succeeded"), "{r}");
    assert_eq!(r["result"], json!({"echo": {"text": "ping"}}));
}

/// One request the backend received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

/// A small HTTP service standing in for a third-party backend. `/ok` answers `{"order": <payload>}`, `/fail` 500,
/// `/text` a 200 that is not JSON, `/redirect` a 307 to `/ok`, `/slow` nothing for a minute.
pub struct Backend {
    pub base: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

impl Backend {
    pub async fn start() -> Backend {
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let record = seen.clone();
        let app =
            axum::Router::new().fallback(move |uri: axum::http::Uri, headers: HeaderMap, body: axum::body::Bytes| {
                let record = record.clone();
                async move {
                    let path = uri.path().to_owned();
                    let payload: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    record.lock().expect("lock").push(Seen { path: path.clone(), headers, body: payload.clone() });
                    let json = [(axum::http::header::CONTENT_TYPE, "application/json")];
                    match path.as_str() {
                        "/ok" => (AxumStatus::OK, json, json!({"order": payload}).to_string()),
                        "/fail" => {
                            (AxumStatus::INTERNAL_SERVER_ERROR, json, "{\"error\":\"database down\"}".to_owned())
                        }
                        "/text" => {
                            (AxumStatus::OK, [(axum::http::header::CONTENT_TYPE, "text/plain")], "order placed".into())
                        }
                        "/redirect" => {
                            (AxumStatus::TEMPORARY_REDIRECT, [(axum::http::header::LOCATION, "/ok")], String::new())
                        }
                        "/slow" => {
                            tokio::time::sleep(Duration::from_secs(60)).await;
                            (AxumStatus::OK, json, "{}".into())
                        }
                        _ => (AxumStatus::NOT_FOUND, json, "{}".into()),
                    }
                }
            });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        Backend { base, seen, shutdown: Some(tx) }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
}

fn http_handler(backend: &Backend, path: &str) -> HttpHandler {
    HttpHandler::new(
        format!("{}{path}", backend.base),
        vec![("X-Backend-Key".into(), "s3cret".into()), ("X-Tenant".into(), "acme".into())],
        None,
    )
    .expect("handler")
}

#[tokio::test]
async fn http_handler_forwards_the_payload_with_identity_and_configured_headers_and_returns_the_json_answer() {
    let backend = Backend::start().await;
    let t = agent_with(http_handler(&backend, "/ok")).await;
    let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let exe = start(&t, json!({"text": "two boxes"}), None, &[("traceparent", traceparent)]).await;
    let r = finished(&t, &exe).await;
    assert_eq!(r["status"], json!("succeeded"), "{r}");
    assert_eq!(r["result"], json!({"order": {"text": "two boxes"}}));
    let seen = backend.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let s = &seen[0];
    assert_eq!(s.body, json!({"text": "two boxes"}));
    let h = |name: &str| s.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    assert_eq!(h("a2a-execution-id"), Some(exe.clone()));
    assert_eq!(h("a2a-sender-id").as_deref(), Some(SENDER));
    assert_eq!(h("a2a-capability").as_deref(), Some(CAPABILITY));
    assert_eq!(h("x-backend-key").as_deref(), Some("s3cret"));
    assert_eq!(h("x-tenant").as_deref(), Some("acme"));
    assert_same_trace(h("traceparent").as_deref(), traceparent);
    assert!(h("content-type").is_some_and(|c| c.starts_with("application/json")), "{:?}", s.headers);
}

#[tokio::test]
async fn http_backend_answering_500_fails_with_the_status_in_the_message() {
    let backend = Backend::start().await;
    let t = agent_with(http_handler(&backend, "/fail")).await;
    let r = run(&t, json!({"text": "x"}), None).await;
    assert_eq!((&r["status"], &r["error"]["code"]), (&json!("failed"), &json!("handler_failed")), "{r}");
    let m = message(&r);
    assert!(m.contains("500") && m.contains("database down"), "{m}");
    assert_eq!(r["error"]["details"]["status"], json!(500));
}

#[tokio::test]
async fn http_backend_answering_something_other_than_json_fails() {
    let backend = Backend::start().await;
    let t = agent_with(http_handler(&backend, "/text")).await;
    let r = run(&t, json!({"text": "x"}), None).await;
    assert_eq!((&r["status"], &r["error"]["code"]), (&json!("failed"), &json!("handler_failed")), "{r}");
    let m = message(&r);
    assert!(m.contains("did not answer JSON") && m.contains("order placed"), "{m}");
}

#[tokio::test]
async fn http_backend_redirect_is_not_followed_and_fails() {
    let backend = Backend::start().await;
    let t = agent_with(http_handler(&backend, "/redirect")).await;
    let r = run(&t, json!({"text": "x"}), None).await;
    assert_eq!(r["status"], json!("failed"), "{r}");
    assert!(message(&r).contains("307"), "{r}");
    assert_eq!(backend.seen().iter().map(|s| s.path.as_str()).collect::<Vec<_>>(), ["/redirect"]);
}

#[tokio::test]
async fn http_backend_slower_than_the_timeout_is_timed_out() {
    let backend = Backend::start().await;
    let t = agent_with(http_handler(&backend, "/slow")).await;
    let started = Instant::now();
    let r = run(&t, json!({"text": "x"}), Some(500)).await;
    assert_eq!(r["status"], json!("timed_out"), "{r}");
    assert_eq!(r["error"]["code"], json!("timed_out"));
    // Ended by the 500 ms timeout, not by the backend's minute of silence (10 s: ample on a loaded machine).
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    assert_eq!(backend.seen().len(), 1);
}

#[tokio::test]
async fn http_handler_own_timeout_shorter_than_the_execution_fails_it_saying_so() {
    let backend = Backend::start().await;
    let h = HttpHandler::new(format!("{}/slow", backend.base), vec![], Some(Duration::from_millis(300))).expect("h");
    let t = agent_with(h).await;
    let r = run(&t, json!({"text": "x"}), Some(30_000)).await;
    assert_eq!((&r["status"], &r["error"]["code"]), (&json!("failed"), &json!("handler_failed")), "{r}");
    assert!(message(&r).contains("did not answer within 300 ms"), "{r}");
}

#[tokio::test]
async fn http_backend_that_is_down_fails_with_the_cause() {
    let url = format!("http://127.0.0.1:{}/orders", crate::common::free_port());
    let t = agent_with(HttpHandler::new(url.clone(), vec![], None).expect("handler")).await;
    let r = run(&t, json!({"text": "x"}), None).await;
    assert_eq!((&r["status"], &r["error"]["code"]), (&json!("failed"), &json!("handler_failed")), "{r}");
    let m = message(&r).to_ascii_lowercase();
    assert!(m.contains(&url) && m.contains("connection refused"), "{m}");
}
