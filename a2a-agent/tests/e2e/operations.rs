//! What an operator runs the agent with (OPS-2..OPS-5), on real `a2a-server` processes and real signals: `/healthz`
//! and `/readyz` following a real Redis that is killed and started again; `SIGHUP` reloading the configuration with
//! an execution in flight across it; an invalid file refused; `--demo` surviving `SIGHUP`.

use std::process::Command;
use std::time::{Duration, Instant};

use a2a_test_support::Process;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common::{SENDER, TempDir, free_port};
use crate::redis_support::{RedisServer, unique_prefix};

/// An `a2a-server` process whose stderr (its log, `RUST_LOG=info`) is kept to be searched, and its base URL.
struct Server {
    process: Process,
    base: String,
}

impl Server {
    /// `a2a-server ARGS --listen 127.0.0.1:<port>`, once it says it serves (`ready` is in its stdout).
    fn start(args: &[&str], port: u16, ready: &str) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_a2a-server"));
        command
            .args(args)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("RUST_LOG", "info")
            .env_remove("REDIS_URL")
            .env_remove("A2A_LOG_FORMAT");
        let (process, _) = Process::start("a2a-server", command, ready);
        Server { process, base: format!("http://127.0.0.1:{port}") }
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client")
}

async fn probe(http: &reqwest::Client, base: &str, path: &str) -> (StatusCode, Value, Option<String>) {
    let r = http.get(format!("{base}{path}")).send().await.expect("probe");
    let status = r.status();
    let retry = r.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
    (status, r.json().await.unwrap_or(Value::Null), retry)
}

/// Polls `/readyz` until it answers `want` (at most 30 s); the answer.
async fn readyz_until(http: &reqwest::Client, base: &str, want: StatusCode) -> (Value, Option<String>) {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let (s, body, retry) = probe(http, base, "/readyz").await;
        if s == want {
            return (body, retry);
        }
        assert!(Instant::now() < until, "/readyz stayed {s} {body}, wanted {want}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn send(http: &reqwest::Client, rb: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let _ = http;
    let r = rb.header("A2A-Version", "0.3").header("A2A-Sender-ID", SENDER).send().await.expect("request");
    let s = r.status();
    (s, r.json().await.unwrap_or(Value::Null))
}

async fn capabilities(http: &reqwest::Client, base: &str) -> Vec<String> {
    let (s, body) = send(http, http.get(format!("{base}/a2a/capabilities"))).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    body["capabilities"]
        .as_array()
        .expect("capabilities")
        .iter()
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect()
}

/// NEGOTIATE, EXECUTE and CONFIRM of `capability` with `payload`; the execution id.
async fn start_execution(http: &reqwest::Client, base: &str, capability: &str, payload: Value) -> String {
    let (s, n) = send(
        http,
        http.post(format!("{base}/a2a/negotiate"))
            .json(&json!({"target_capability": capability, "proposed_schema": {"type": "object"}})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{n}");
    let neg = n["negotiation_id"].as_str().expect("negotiation").to_owned();
    let (s, e) =
        send(http, http.post(format!("{base}/a2a/execute")).header("A2A-Negotiation-ID", &neg).json(&payload)).await;
    assert_eq!(s, StatusCode::CREATED, "{e}");
    let id = e["execution_id"].as_str().expect("execution").to_owned();
    let (s, c) = send(http, http.post(format!("{base}/a2a/confirm")).json(&json!({"execution_id": id}))).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{c}");
    id
}

async fn result(http: &reqwest::Client, base: &str, id: &str) -> Value {
    let seg = a2a_core::execution_id::ExecutionId::parse(id).expect("id").to_path_segment();
    let (s, r) = send(http, http.get(format!("{base}/a2a/result/{seg}?wait_ms=20000"))).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    r
}

const ECHO: &str = r#"
[[capabilities]]
name = "echo_message"
description = "echo"
auth_requirement = "none"
input_schema = { type = "object" }
handler = { type = "echo" }
"#;

/// OPS-2: `/readyz` answers 503 `store_unreachable` (with `Retry-After`) from the first probe after the agent's Redis
/// is killed, and 200 again once Redis is back on its port; `/healthz` answers 200 throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_readiness_follows_its_redis() {
    let mut redis = RedisServer::start();
    let dir = TempDir::new("ops-ready");
    let config = dir.write(
        "agent.toml",
        &format!(
            "[agent]\ndid = \"did:web:localhost%3A8080\"\n[store]\nredis_url = \"{}\"\nkey_prefix = \"{}\"\n{ECHO}",
            redis.url(),
            unique_prefix("ready")
        ),
    );
    let port = free_port();
    let p = Server::start(&["--config", config.to_str().expect("path")], port, " serving ");
    let http = http();
    let (body, _) = readyz_until(&http, &p.base, StatusCode::OK).await;
    assert_eq!(body, json!({"status": "ready"}));
    assert_eq!(probe(&http, &p.base, "/healthz").await.1, json!({"status": "ok"}));
    let head = http.head(format!("{}/healthz", p.base)).send().await.expect("head");
    assert_eq!(head.status(), StatusCode::OK);
    let post = http.post(format!("{}/readyz", p.base)).send().await.expect("post");
    assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);

    redis.stop();
    // The first probe after Redis is gone already says so: its PING fails, or times out within 1 s.
    let asked = Instant::now();
    let (s, body, retry) = probe(&http, &p.base, "/readyz").await;
    let took = asked.elapsed();
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["status"], "not_ready");
    assert_eq!(body["reason"], "store_unreachable", "{body}");
    assert!(body["detail"].as_str().is_some_and(|d| !d.is_empty()), "{body}");
    assert_eq!(retry.as_deref(), Some("1"));
    assert!(took < Duration::from_secs(2), "the probe answered after {took:?}");
    eprintln!("/readyz answered 503 {took:?} after it was asked, Redis down");
    let (s, body, _) = probe(&http, &p.base, "/healthz").await;
    assert_eq!((s, body), (StatusCode::OK, json!({"status": "ok"})), "alive while Redis is down");

    redis.restart();
    readyz_until(&http, &p.base, StatusCode::OK).await;
    assert_eq!(probe(&http, &p.base, "/healthz").await.0, StatusCode::OK);
}

/// The `run_gated` capability: runs until the file `go` exists in `dir` (after writing `started`), then echoes.
fn gated(dir: &TempDir) -> String {
    let (started, go) = (dir.path("started"), dir.path("go"));
    format!(
        r#"
[[capabilities]]
name = "run_gated"
description = "waits for the test to let it finish"
auth_requirement = "none"
input_schema = {{ type = "object" }}
handler = {{ type = "command", argv = ["sh", "-c", "touch '{}'; while [ ! -e '{}' ]; do sleep 0.05; done; cat"] }}
"#,
        started.display(),
        go.display()
    )
}

/// OPS-4: `SIGHUP` reloads the file: the process lives, a capability added to the file is offered, an execution in
/// flight across the reload finishes and its RESULT is served (the in-memory store is kept), a restart-only setting
/// that changed is logged and ignored; an invalid file is refused and the running configuration keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_sighup_reloads_the_configuration_and_keeps_executions_in_flight() {
    let dir = TempDir::new("ops-reload");
    let head = "[agent]\ndid = \"did:web:localhost%3A8080\"\n";
    let config = dir.write("agent.toml", &format!("{head}{ECHO}{}", gated(&dir)));
    let port = free_port();
    let mut p = Server::start(&["--config", config.to_str().expect("path")], port, " serving ");
    let http = http();
    assert_eq!(capabilities(&http, &p.base).await, vec!["echo_message", "run_gated"]);
    let id = start_execution(&http, &p.base, "run_gated", json!({"n": 1})).await;
    let until = Instant::now() + Duration::from_secs(30);
    while !dir.path("started").exists() {
        assert!(Instant::now() < until, "the gated handler did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // A new capability, and a restart-only setting changed.
    let added = "\n[[capabilities]]\nname = \"added_later\"\ndescription = \"new\"\nauth_requirement = \"none\"\n\
                 input_schema = { type = \"object\" }\nhandler = { type = \"echo\" }\n";
    std::fs::write(&config, format!("{head}[limits]\nmax_connections = 77\n{ECHO}{}{added}", gated(&dir)))
        .expect("write");
    p.process.signal("HUP");
    p.process.expect_log("configuration reloaded", 1);
    p.process.expect_log("limits.max_connections changed, which needs a restart", 1);
    assert!(p.process.alive(), "SIGHUP ended the agent");
    assert_eq!(capabilities(&http, &p.base).await, vec!["echo_message", "run_gated", "added_later"]);
    // The execution that started before the reload finishes after it, and its result is served.
    std::fs::write(dir.path("go"), "").expect("go");
    let r = result(&http, &p.base, &id).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(r["result"], json!({"n": 1}), "{r}");
    // The new capability runs.
    let id = start_execution(&http, &p.base, "added_later", json!({"x": 2})).await;
    assert_eq!(result(&http, &p.base, &id).await["status"], "succeeded");

    // An invalid file is refused; the running configuration keeps serving.
    std::fs::write(&config, format!("{head}{ECHO}\n[[capabilities]]\nname = 5\n")).expect("write");
    p.process.signal("HUP");
    p.process.expect_log("reload refused: ", 1);
    assert!(p.process.alive(), "an invalid file ended the agent");
    assert_eq!(capabilities(&http, &p.base).await, vec!["echo_message", "run_gated", "added_later"]);
    let id = start_execution(&http, &p.base, "echo_message", json!({"still": true})).await;
    assert_eq!(result(&http, &p.base, &id).await["result"], json!({"echo": {"still": true}}));
    // SIGUSR1 (the log reopening signal) does not end it either.
    p.process.signal("USR1");
    p.process.expect_log("SIGUSR1", 1);
    assert!(p.process.alive());
}

/// The binary's shutdown (`SIGTERM`) with an execution in flight: the agent stops accepting, the execution (started
/// by a CONFIRM on one of the serving threads) runs to its end, then the process exits 0 (LIM-7: the serving threads
/// keep running what requests started until the agent is drained). The agent runs without transparent huge pages
/// (LIM-7, `allocator::small_pages`); its command handler, started through `a2a-supervise`, has the system's setting.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_an_execution_in_flight_finish_and_handlers_get_huge_pages_back() {
    let dir = TempDir::new("ops-drain");
    let (started, go, finished, thp) = (dir.path("started"), dir.path("go"), dir.path("finished"), dir.path("thp"));
    let capability = format!(
        r#"
[[capabilities]]
name = "run_gated"
description = "waits for the test to let it finish"
auth_requirement = "none"
input_schema = {{ type = "object" }}
handler = {{ type = "command", argv = ["sh", "-c", "grep THP_enabled /proc/$$/status > '{}'; touch '{}'; while [ ! -e '{}' ]; do sleep 0.05; done; cat; touch '{}'"] }}
"#,
        thp.display(),
        started.display(),
        go.display(),
        finished.display()
    );
    let config = dir.write("agent.toml", &format!("[agent]\ndid = \"did:web:localhost%3A8080\"\n{capability}"));
    let port = free_port();
    let mut p = Server::start(&["--config", config.to_str().expect("path")], port, " serving ");
    let status = std::fs::read_to_string(format!("/proc/{}/status", p.process.child.id())).expect("status");
    assert!(status.lines().any(|l| l.split_whitespace().eq(["THP_enabled:", "0"])), "huge pages on: {status}");
    let http = http();
    start_execution(&http, &p.base, "run_gated", json!({"n": 1})).await;
    let until = Instant::now() + Duration::from_secs(30);
    while !started.exists() {
        assert!(Instant::now() < until, "the gated handler did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let handler = std::fs::read_to_string(&thp).expect("the handler's setting");
    let mine = std::fs::read_to_string("/proc/self/status").expect("status");
    let mine = mine.lines().find(|l| l.starts_with("THP_enabled:")).expect("THP_enabled").to_owned();
    assert_eq!(handler.trim(), mine.trim(), "the handler's program did not get the system's setting back");
    p.process.signal("TERM");
    p.process.expect_log("shutting down", 1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(p.process.alive(), "the agent exited with an execution in flight");
    // A client of its own: no connection kept alive from before.
    let fresh = reqwest::Client::new().get(format!("{}/healthz", p.base)).send().await;
    assert!(fresh.is_err(), "still accepting after SIGTERM: {fresh:?}");
    std::fs::write(&go, "").expect("go");
    let until = Instant::now() + Duration::from_secs(20);
    let exit = loop {
        if let Some(s) = p.process.child.try_wait().expect("wait") {
            break s;
        }
        assert!(Instant::now() < until, "the agent did not exit after its execution finished");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(exit.success(), "{exit:?}");
    assert!(finished.exists(), "the execution in flight was stopped instead of drained");
}

/// OPS-4: `a2a-server --demo` has no file to re-read: `SIGHUP` is logged and the demo keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_survives_sighup() {
    let port = free_port();
    let mut p = Server::start(&["--demo"], port, "/a2a");
    let http = http();
    assert_eq!(probe(&http, &p.base, "/healthz").await.0, StatusCode::OK);
    p.process.signal("HUP");
    p.process.expect_log("nothing reloaded", 1);
    assert!(p.process.alive(), "SIGHUP ended the demo");
    assert_eq!(probe(&http, &p.base, "/readyz").await.0, StatusCode::OK);
    assert!(capabilities(&http, &p.base).await.contains(&"echo_message".to_owned()));
}

/// OPS-4: `a2a-server --sessions-demo --linger` has no file to re-read either: its agents keep serving after `SIGHUP`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sessions_demo_survives_sighup() {
    let port = crate::readme::free_ports(3);
    let mut p = Server::start(&["--sessions-demo", "--linger"], port, "--linger");
    let http = http();
    p.process.signal("HUP");
    p.process.expect_log("nothing reloaded", 1);
    assert!(p.process.alive(), "SIGHUP ended the sessions demo");
    for agent in 0..3 {
        let base = format!("http://127.0.0.1:{}", port + agent);
        let d = http.request(reqwest::Method::OPTIONS, format!("{base}/a2a")).send().await.expect("DISCOVER");
        assert_eq!(d.status(), StatusCode::NO_CONTENT, "{base}");
    }
}
