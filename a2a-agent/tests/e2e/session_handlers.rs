//! The configurable session handlers of §17.10 (SES-9, HDL-1..3) and `[sessions]` in the agent's TOML: `command` with real
//! programs (a reply, plain text, a failure, a hang, a flood, a slow queue), `http` against a local axum service,
//! `openai` against a local mock of a chat-completions backend (a third-party API) that checks what it was sent;
//! and the configuration, with every kind of mistake refused by field and line.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_agent::config::Config;
use a2a_core::sessions::{
    Attachment, ContextMessage, Delivery, Provenance, Role, SourceTool, Step, TurnRef, step_instruction,
};
use a2a_server::sessions::config::{
    CommandConfig, HandlerConfig, HttpConfig, OpenAiConfig, SessionsConfig, StdinFormat, build_handler,
    build_handler_with_env,
};
use a2a_server::sessions::handler::builtin::{CommandHandler, HttpHandler, OpenAiHandler};
use a2a_server::sessions::{HandlerFailure, SessionHandler, Visibility};
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use crate::common::TempDir;

const SESSION: &str = "did:web:work.example.com#bonus-desk";

fn delivery(step: Step, text: &str) -> Delivery {
    let mut provenance = Provenance::new(
        "did:web:main.example.com",
        Some("did:web:main.example.com#main".into()),
        SourceTool::SessionsSend,
        1,
        "run-1",
    );
    provenance.trace_id = Some("4bf92f3577b34da6a3ce929d0e0e4736".into());
    let turn = (step == Step::Reply).then(|| TurnRef { run_id: "run-1".into(), n: 2, of: 5 });
    Delivery {
        run_id: "run-1".into(),
        session: SESSION.into(),
        step,
        text: text.into(),
        instruction: step_instruction(step, turn.as_ref()),
        provenance,
        turn,
        context: vec![],
        attachments: vec![],
        metadata: BTreeMap::new(),
        max_tokens: None,
        original: None,
        round_one: None,
        last: None,
    }
}

/// A command handler running `script` with `sh`, in a fresh directory.
fn sh(dir: &TempDir, script: &str, tweak: impl FnOnce(&mut CommandConfig)) -> CommandHandler {
    let path = dir.write("handler.sh", script);
    let mut c = CommandConfig::new(["sh".to_owned(), path.display().to_string()]);
    tweak(&mut c);
    CommandHandler::new(c)
}

fn failed(r: Result<String, HandlerFailure>) -> String {
    match r {
        Err(HandlerFailure::Failed(m)) => m,
        other => panic!("expected Failed, got {other:?}"),
    }
}

fn timed_out(r: Result<String, HandlerFailure>) -> String {
    match r {
        Err(HandlerFailure::TimedOut(m)) => m,
        other => panic!("expected TimedOut, got {other:?}"),
    }
}

// --- command ---------------------------------------------------------------------------------------------------

#[tokio::test]
async fn command_reads_the_delivery_on_stdin_and_answers_its_reply_member() {
    let dir = TempDir::new("cmd-reply");
    let script = dir.write(
        "bot.py",
        r#"import json, os, sys
d = json.load(sys.stdin)
print(json.dumps({"reply": "%s|%s|%s|%s|%s|%s" % (d["text"], d["step"], d["provenance"]["source_tool"],
      os.environ["A2A_RUN_ID"], os.environ["A2A_STEP"], os.environ.get("A2A_TURN", "-"))}))
"#,
    );
    let h = CommandHandler::new(CommandConfig::new(["python3".to_owned(), script.display().to_string()]));
    let reply = h.handle(delivery(Step::Reply, "The bonus is 5000.")).await.expect("reply");
    assert_eq!(reply, "The bonus is 5000.|reply|sessions_send|run-1|reply|2/5");
}

#[tokio::test]
async fn command_plain_stdout_is_the_reply_trimmed() {
    let dir = TempDir::new("cmd-plain");
    let h = sh(&dir, "cat >/dev/null\nprintf '\\n  Bonus: 5000 yuan.  \\n\\n'\n", |_| {});
    assert_eq!(h.handle(delivery(Step::Message, "bonus?")).await, Ok("Bonus: 5000 yuan.".into()));
}

#[tokio::test]
async fn command_prompt_stdin_carries_the_provenance_line_and_the_instruction() {
    let dir = TempDir::new("cmd-prompt");
    let h = sh(&dir, "cat\n", |c| c.stdin = StdinFormat::Prompt);
    let reply = h.handle(delivery(Step::Reply, "Thanks. Paid in May?")).await.expect("reply");
    assert!(
        reply.starts_with("[Inter-session message] from did:web:main.example.com#main via sessions_send (hop 1)"),
        "{reply}"
    );
    assert!(reply.contains("turn 2 of 5") && reply.contains("REPLY_SKIP"), "{reply}");
    assert!(reply.ends_with("Thanks. Paid in May?"), "{reply}");
}

#[tokio::test]
async fn command_non_zero_exit_fails_with_the_status_and_the_end_of_stderr() {
    let dir = TempDir::new("cmd-exit");
    let h =
        sh(&dir, "cat >/dev/null\nyes noise | head -c 20000 >&2\necho 'payroll database locked' >&2\nexit 3\n", |_| {});
    let m = failed(h.handle(delivery(Step::Message, "x")).await);
    assert!(m.contains("exited with status 3"), "{m}");
    assert!(m.ends_with("payroll database locked"), "{m}");
    assert!(m.len() < 1000, "the stderr excerpt is bounded: {} bytes", m.len());
}

#[tokio::test]
async fn command_error_member_fails_with_its_text() {
    let dir = TempDir::new("cmd-error");
    let h = sh(&dir, "cat >/dev/null\necho '{\"error\": \"no payroll access\"}'\n", |_| {});
    let m = failed(h.handle(delivery(Step::Message, "x")).await);
    assert!(m.ends_with("no payroll access"), "{m}");
}

#[tokio::test]
async fn command_that_hangs_is_killed_with_its_process_group_at_the_timeout() {
    let dir = TempDir::new("cmd-hang");
    let pidfile = dir.path("child.pid");
    // The script starts a grandchild that would outlive a plain kill of the script.
    let script = format!("sleep 300 &\necho $! > {}\nwait\n", pidfile.display());
    let h = sh(&dir, &script, |c| c.timeout_ms = 400);
    let started = Instant::now();
    let m = timed_out(h.handle(delivery(Step::Message, "x")).await);
    assert!(m.contains("400 ms"), "{m}");
    assert!(started.elapsed() < Duration::from_secs(10), "returned after {:?}", started.elapsed());
    let pid: i32 = std::fs::read_to_string(&pidfile).expect("pid file").trim().parse().expect("pid");
    let mut gone = false;
    for _ in 0..50 {
        // `kill -0` fails once the grandchild is gone (or a zombie reaped by init).
        let alive =
            std::process::Command::new("kill").args(["-0", &pid.to_string()]).status().is_ok_and(|s| s.success());
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "));
        if !alive || zombie {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the grandchild {pid} survived the timeout");
}

#[tokio::test]
async fn command_that_floods_stdout_is_stopped_at_the_output_cap() {
    let dir = TempDir::new("cmd-flood");
    let h = sh(
        &dir,
        "cat >/dev/null\ntrap '' PIPE\nwhile :; do echo 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'; done\n",
        |c| {
            c.max_output_bytes = 64 * 1024;
            c.timeout_ms = 20_000;
        },
    );
    let started = Instant::now();
    let m = failed(h.handle(delivery(Step::Message, "x")).await);
    assert!(m.contains("more than 65536 bytes") && m.contains("max_output_bytes"), "{m}");
    assert!(started.elapsed() < Duration::from_secs(10), "stopped only after {:?}", started.elapsed());
}

#[tokio::test]
async fn command_reads_a_large_delivery_without_deadlock() {
    let dir = TempDir::new("cmd-large");
    // Prints before reading: both pipes must be served at once.
    let h = sh(&dir, "head -c 100000 /dev/zero | tr '\\0' b >&2\nwc -c\n", |_| {});
    let text = "a".repeat(19_000);
    let mut d = delivery(Step::Message, &text);
    d.attachments = vec![Attachment {
        name: "big.bin".into(),
        media_type: "application/octet-stream".into(),
        data: "QUJD".repeat(60_000),
    }];
    let reply = h.handle(d).await.expect("reply");
    let n: usize = reply.trim().parse().expect("a byte count");
    assert!(n > 250_000, "{n}");
}

#[tokio::test]
async fn command_environment_is_the_allow_list_the_configured_values_and_a2a() {
    let dir = TempDir::new("cmd-env");
    let h = sh(&dir, "cat >/dev/null\nenv | sort\n", |c| {
        c.env_allow = vec!["PATH".into()];
        c.env.insert("BOT_MODE".into(), "strict".into());
    });
    let reply = h.handle(delivery(Step::Message, "x")).await.expect("reply");
    let names: Vec<&str> = reply.lines().filter_map(|l| l.split_once('=').map(|(k, _)| k)).collect();
    assert!(names.contains(&"PATH") && names.contains(&"A2A_SESSION") && names.contains(&"A2A_HOP"), "{names:?}");
    assert!(reply.contains("BOT_MODE=strict") && reply.contains(&format!("A2A_SESSION={SESSION}")), "{reply}");
    assert!(reply.contains("A2A_TRACE_ID=4bf92f3577b34da6a3ce929d0e0e4736"), "{reply}");
    // HOME is in this process's environment but not in the allow list.
    assert!(std::env::var_os("HOME").is_some());
    assert!(!names.contains(&"HOME"), "{names:?}");
    for n in &names {
        let a2a = n.starts_with("A2A_");
        // `sh` itself may set PWD, SHLVL and `_`.
        assert!(a2a || ["PATH", "BOT_MODE", "PWD", "SHLVL", "_", "OLDPWD"].contains(n), "unexpected variable {n}");
    }
}

#[tokio::test]
async fn command_runs_in_its_working_directory() {
    let dir = TempDir::new("cmd-cwd");
    std::fs::create_dir_all(dir.path("work")).expect("mkdir");
    std::fs::write(dir.path("work/ledger.txt"), "clothes 2000\n").expect("write");
    let h = sh(&dir, "cat >/dev/null\ncat ledger.txt\n", |c| c.cwd = Some(dir.path("work")));
    assert_eq!(h.handle(delivery(Step::Message, "x")).await, Ok("clothes 2000".into()));
}

#[tokio::test]
async fn command_concurrency_is_bounded_and_the_queue_wait_counts_against_the_timeout() {
    let dir = TempDir::new("cmd-slots");
    let log = dir.path("log");
    let script = format!("cat >/dev/null\necho start >> {0}\nsleep 0.5\necho end >> {0}\necho done\n", log.display());
    let h = Arc::new(sh(&dir, &script, |c| {
        c.max_concurrency = 1;
        // Three runs of half a second one after the other fit many times over, however loaded the machine.
        c.timeout_ms = 20_000;
    }));
    let runs: Vec<_> = (0..3)
        .map(|_| {
            let h = h.clone();
            tokio::spawn(async move { h.handle(delivery(Step::Message, "x")).await })
        })
        .collect();
    for r in runs {
        assert_eq!(r.await.expect("join"), Ok("done".into()));
    }
    // One at a time: every start is followed by its end.
    let lines = std::fs::read_to_string(&log).expect("log");
    assert_eq!(lines, "start\nend\nstart\nend\nstart\nend\n");

    // A delivery that waits for a slot has no more than its time in all: the wait counts against it. The first holds
    // the slot until its timeout kills it; the queued one ends about one timeout after it came, where a wait that
    // did not count would take nearly two. The timeout is long enough that the half timeout between the two is
    // ample for a loaded machine's overhead.
    let timeout = Duration::from_millis(3_000);
    let slow = Arc::new(sh(&dir, "cat >/dev/null\nsleep 30\necho late\n", |c| {
        c.max_concurrency = 1;
        c.timeout_ms = timeout.as_millis() as u64;
    }));
    let first = {
        let slow = slow.clone();
        tokio::spawn(async move { slow.handle(delivery(Step::Message, "x")).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let queued = Instant::now();
    timed_out(slow.handle(delivery(Step::Message, "y")).await);
    assert!(queued.elapsed() < timeout * 3 / 2, "the queued delivery took {:?}", queued.elapsed());
    timed_out(first.await.expect("join"));
}

#[tokio::test]
async fn command_that_cannot_start_fails_readably() {
    let h = CommandHandler::new(CommandConfig::new(["/nonexistent/agent-cli"]));
    let m = failed(h.handle(delivery(Step::Message, "x")).await);
    assert!(m.contains("cannot start `/nonexistent/agent-cli`"), "{m}");
}

// --- http ------------------------------------------------------------------------------------------------------

/// What the local service received.
#[derive(Clone, Debug)]
struct Received {
    path: String,
    headers: HeaderMap,
    body: Value,
}

/// A local service: `/reply` answers `{"reply": "got: <text>"}`, `/down` 503, `/plain` a 200 that is not JSON,
/// `/huge` 2 MiB, `/slow` nothing for a minute, `/error` `{"error": ...}`.
async fn service() -> (String, Arc<Mutex<Vec<Received>>>) {
    let seen: Arc<Mutex<Vec<Received>>> = Arc::default();
    let record = seen.clone();
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri, headers: HeaderMap, body: axum::body::Bytes| {
        let record = record.clone();
        async move {
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let path = uri.path().to_owned();
            record.lock().expect("lock").push(Received { path: path.clone(), headers, body: body.clone() });
            match path.as_str() {
                "/reply" => (
                    StatusCode::OK,
                    json!({"reply": format!("got: {}", body["text"].as_str().unwrap_or(""))}).to_string(),
                ),
                "/down" => (StatusCode::SERVICE_UNAVAILABLE, "{\"detail\":\"model server restarting\"}".into()),
                "/plain" => (StatusCode::OK, "sure, 5000".into()),
                "/huge" => (StatusCode::OK, format!("{{\"reply\":\"{}\"}}", "x".repeat(2 * 1024 * 1024))),
                "/error" => (StatusCode::OK, "{\"error\":\"ledger unavailable\"}".into()),
                "/slow" => {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    (StatusCode::OK, "{}".into())
                }
                _ => (StatusCode::NOT_FOUND, String::new()),
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, seen)
}

fn http(base: &str, path: &str, tweak: impl FnOnce(&mut HttpConfig), token: Option<&str>) -> HttpHandler {
    let mut c = HttpConfig::new(format!("{base}{path}"));
    tweak(&mut c);
    HttpHandler::new(c, token.map(str::to_owned)).expect("handler")
}

#[tokio::test]
async fn http_posts_the_delivery_and_answers_the_reply_with_the_bearer_token() {
    let (base, seen) = service().await;
    let h = http(
        &base,
        "/reply",
        |c| {
            c.headers.insert("X-Desk".into(), "payroll".into());
        },
        Some("tok-123"),
    );
    assert_eq!(h.handle(delivery(Step::Message, "bonus?")).await, Ok("got: bonus?".into()));
    let r = seen.lock().expect("lock")[0].clone();
    assert_eq!(r.path, "/reply");
    assert_eq!(r.headers["authorization"], "Bearer tok-123");
    assert_eq!(r.headers["x-desk"], "payroll");
    assert_eq!(r.headers["a2a-run-id"], "run-1");
    assert_eq!(r.headers["a2a-step"], "message");
    assert_eq!(r.headers["a2a-hop"], "1");
    assert_eq!(r.body["session"], SESSION);
    assert_eq!(r.body["provenance"]["is_user"], false);
    assert_eq!(r.body["step"], "message");
}

#[tokio::test]
async fn http_non_2xx_fails_with_the_status_and_the_start_of_the_body() {
    let (base, _) = service().await;
    let m = failed(http(&base, "/down", |_| {}, None).handle(delivery(Step::Message, "x")).await);
    assert!(m.contains("503") && m.contains("model server restarting"), "{m}");
}

#[tokio::test]
async fn http_answer_that_is_not_a_reply_object_or_an_error_member_fails() {
    let (base, _) = service().await;
    let m = failed(http(&base, "/plain", |_| {}, None).handle(delivery(Step::Message, "x")).await);
    assert!(m.contains("sure, 5000") && m.contains("reply"), "{m}");
    let m = failed(http(&base, "/error", |_| {}, None).handle(delivery(Step::Message, "x")).await);
    assert!(m.ends_with("ledger unavailable"), "{m}");
}

#[tokio::test]
async fn http_answer_over_the_size_cap_fails() {
    let (base, _) = service().await;
    let m = failed(
        http(&base, "/huge", |c| c.max_response_bytes = 1024 * 1024, None).handle(delivery(Step::Message, "x")).await,
    );
    assert!(m.contains("more than 1048576 bytes") && m.contains("max_response_bytes"), "{m}");
}

#[tokio::test]
async fn http_service_that_does_not_answer_times_out() {
    let (base, _) = service().await;
    let started = Instant::now();
    let m = timed_out(http(&base, "/slow", |c| c.timeout_ms = 300, None).handle(delivery(Step::Message, "x")).await);
    assert!(m.contains("300 ms"), "{m}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn http_unreachable_service_fails_with_the_cause() {
    let port = crate::common::free_port();
    let m = failed(
        http(&format!("http://127.0.0.1:{port}"), "/reply", |_| {}, None).handle(delivery(Step::Message, "x")).await,
    );
    assert!(m.contains(&format!("127.0.0.1:{port}")) && m.to_lowercase().contains("connect"), "{m}");
}

// --- openai ----------------------------------------------------------------------------------------------------

/// A mock of a third-party chat-completions backend. `POST /v1/chat/completions` checks the bearer key, records
/// the request, and answers by the model name: `echo` a completion whose content is the last user message,
/// `limited` 429, `broken` 502, `garbled` a 200 that is not a completion, `silent` a null content, `slow` nothing.
async fn chat_backend() -> (String, Arc<Mutex<Vec<Value>>>) {
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let record = seen.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
            let record = record.clone();
            async move {
                let json_ct = [(axum::http::header::CONTENT_TYPE, "application/json")];
                if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some("Bearer sk-test-key") {
                    let e = json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}});
                    return (StatusCode::UNAUTHORIZED, json_ct, HeaderMap::new(), e.to_string());
                }
                let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                record.lock().expect("lock").push(req.clone());
                let mut extra = HeaderMap::new();
                let (status, out) = match req["model"].as_str().unwrap_or("") {
                    "echo" => {
                        let last = req["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or(Value::Null);
                        let text = match &last["content"] {
                            Value::String(s) => s.clone(),
                            Value::Array(parts) => parts[0]["text"].as_str().unwrap_or("").to_owned(),
                            _ => String::new(),
                        };
                        let c = json!({"id": "c1", "object": "chat.completion", "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": format!("echo: {text}")}, "finish_reason": "stop"},
                            {"index": 1, "message": {"role": "assistant", "content": "second choice"}, "finish_reason": "stop"}]});
                        (StatusCode::OK, c.to_string())
                    }
                    "limited" => {
                        extra.insert("retry-after", "20".parse().expect("header"));
                        (StatusCode::TOO_MANY_REQUESTS, json!({"error": {"message": "Rate limit reached for requests"}}).to_string())
                    }
                    "broken" => (StatusCode::BAD_GATEWAY, "<html>bad gateway</html>".into()),
                    "garbled" => (StatusCode::OK, json!({"object": "list", "data": []}).to_string()),
                    "silent" => (StatusCode::OK, json!({"choices": [{"message": {"role": "assistant", "content": null}}]}).to_string()),
                    "slow" => {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        (StatusCode::OK, String::new())
                    }
                    _ => (StatusCode::NOT_FOUND, json!({"error": {"message": "The model does not exist"}}).to_string()),
                };
                (status, json_ct, extra, out)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, seen)
}

fn openai(base: &str, model: &str, key: Option<&str>, tweak: impl FnOnce(&mut OpenAiConfig)) -> OpenAiHandler {
    let mut c = OpenAiConfig::new(base, model);
    c.api_key_env = Some("CHAT_KEY".into());
    tweak(&mut c);
    OpenAiHandler::new(c, key.map(str::to_owned)).expect("handler")
}

#[tokio::test]
async fn openai_sends_instruction_provenance_context_and_text_and_replies_with_the_first_choice() {
    let (base, seen) = chat_backend().await;
    let h = openai(&base, "echo", Some("sk-test-key"), |c| {
        c.system_prompt = Some("You are the work assistant.".into());
        c.temperature = Some(0.2);
        c.max_tokens = Some(500);
    });
    let mut d = delivery(Step::Reply, "Thanks. Paid in May?");
    d.context = vec![
        ContextMessage { role: Role::User, text: "What is my bonus?".into() },
        ContextMessage { role: Role::Assistant, text: "Let me ask the work assistant.".into() },
        ContextMessage { role: Role::InterSession, text: "The bonus is 5000.".into() },
    ];
    d.max_tokens = Some(800);
    d.attachments = vec![
        Attachment { name: "payslip.png".into(), media_type: "image/png".into(), data: "iVBORw0KGgo=".into() },
        Attachment { name: "notes.txt".into(), media_type: "text/plain".into(), data: "aGk=".into() },
    ];
    let reply = h.handle(d).await.expect("reply");
    assert_eq!(reply, "echo: Thanks. Paid in May?\n[Attached file \"notes.txt\" (text/plain), not shown]");

    let req = seen.lock().expect("lock")[0].clone();
    assert_eq!(req["model"], "echo");
    assert_eq!(req["max_tokens"], 500, "the smaller of the delivery's 800 and the configured 500");
    assert_eq!(req["temperature"], 0.2);
    let messages = req["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 5, "{messages:?}");
    assert_eq!(messages[0]["role"], "system");
    let system = messages[0]["content"].as_str().expect("system text");
    assert!(system.starts_with("You are the work assistant."), "{system}");
    assert!(system.contains("Agent-to-agent reply step: turn 2 of 5."), "{system}");
    assert!(
        system.contains("[Inter-session message] from did:web:main.example.com#main via sessions_send (hop 1)"),
        "{system}"
    );
    assert_eq!(messages[1], json!({"role": "user", "content": "What is my bonus?"}));
    assert_eq!(messages[2], json!({"role": "assistant", "content": "Let me ask the work assistant."}));
    assert_eq!(messages[3], json!({"role": "user", "content": "[Inter-session message] The bonus is 5000."}));
    assert_eq!(messages[4]["role"], "user");
    assert_eq!(messages[4]["content"][1]["image_url"]["url"], "data:image/png;base64,iVBORw0KGgo=");
}

#[tokio::test]
async fn openai_announce_step_carries_the_original_request_and_the_replies() {
    let (base, seen) = chat_backend().await;
    let h = openai(&base, "echo", Some("sk-test-key"), |c| c.base_url = format!("{base}/v1/"));
    let mut d = delivery(Step::Announce, "");
    d.original = Some("What is the boss's bonus?".into());
    d.round_one = Some("The bonus is 5000.".into());
    d.last = Some("REPLY_SKIP".into());
    d.metadata.insert("temperature".into(), json!(0.7));
    let reply = h.handle(d).await.expect("reply");
    assert!(
        reply.contains("Original request: What is the boss's bonus?") && reply.contains("Last reply: REPLY_SKIP"),
        "{reply}"
    );
    let req = seen.lock().expect("lock")[0].clone();
    assert_eq!(req["temperature"], 0.7, "the delivery's temperature wins");
    assert!(req.get("max_tokens").is_none());
    assert!(req["messages"][0]["content"].as_str().expect("system").contains("ANNOUNCE_SKIP"));
}

#[tokio::test]
async fn openai_errors_are_readable_failures() {
    let (base, _) = chat_backend().await;
    let d = || delivery(Step::Message, "x");
    let m = failed(openai(&base, "echo", Some("sk-wrong"), |_| {}).handle(d()).await);
    assert!(m.contains("401") && m.contains("Incorrect API key provided") && m.contains("CHAT_KEY"), "{m}");
    let m = failed(openai(&base, "limited", Some("sk-test-key"), |_| {}).handle(d()).await);
    assert!(m.contains("429") && m.contains("Rate limit reached") && m.contains("retry after 20 s"), "{m}");
    let m = failed(openai(&base, "broken", Some("sk-test-key"), |_| {}).handle(d()).await);
    assert!(m.contains("502") && m.contains("bad gateway") && m.contains("try again later"), "{m}");
    let m = failed(openai(&base, "garbled", Some("sk-test-key"), |_| {}).handle(d()).await);
    assert!(m.contains("not a chat completion") && m.contains("no choices"), "{m}");
    let m = failed(openai(&base, "nonesuch", Some("sk-test-key"), |_| {}).handle(d()).await);
    assert!(m.contains("404") && m.contains("model \"nonesuch\""), "{m}");
    let m = timed_out(openai(&base, "slow", Some("sk-test-key"), |c| c.timeout_ms = 300).handle(d()).await);
    assert!(m.contains("300 ms"), "{m}");
    // A completion without text is an empty reply (no_reply for the runtime), not a failure.
    assert_eq!(openai(&base, "silent", Some("sk-test-key"), |_| {}).handle(d()).await, Ok(String::new()));
}

// --- configuration ---------------------------------------------------------------------------------------------

const AGENT: &str = "[agent]\ndid = \"did:web:localhost%3A8080\"\n";

fn parse(sessions: &str) -> Result<Config, String> {
    Config::parse(&format!("{AGENT}{sessions}"), Path::new("/etc/a2a/agent.toml")).map_err(|e| e.to_string())
}

#[test]
fn config_parses_every_section_with_defaults() {
    let cfg = parse(
        r#"
[sessions]
auth_requirement = "api_key"
visibility = "tree"
allow = ["did:web:*.corp.example.com#*"]

[sessions.limits]
default_max_turns = 3
max_turns_cap = 10
max_spawn_depth = 2

[[sessions.session]]
session_key = "bonus-desk"
label = "work assistant"
kind = "main"
summary = "Knows the boss's payroll and bonuses."
handler = { type = "command", argv = ["./bots/bonus.py", "--strict"], cwd = "bots", timeout_ms = 5000 }

[[sessions.session]]
session_key = "ledger"
summary = "The finance assistant's ledger."
handler = { type = "http", url = "http://127.0.0.1:9000/reply", bearer_token_env = "LEDGER_TOKEN" }

[[sessions.session]]
session_key = "chat"
summary = "A chat model."
handler = { type = "openai", base_url = "https://api.openai.com", model = "gpt-4o-mini", api_key_env = "OPENAI_API_KEY", temperature = 0.3 }

[[sessions.session]]
session_key = "phone"
summary = "The boss's phone app, polling its inbox."
handler = { type = "inbox" }

[[sessions.spawn_template]]
name = "price-check"
handler = { type = "command", argv = ["python3", "price.py"] }
"#,
    )
    .expect("parses");
    let s = cfg.sessions.expect("sessions");
    assert!(s.enabled);
    assert_eq!(s.auth_requirement, a2a_core::capability::AuthRequirement::ApiKey);
    assert_eq!(s.visibility, Visibility::Tree);
    assert_eq!(s.allow.0, vec!["did:web:*.corp.example.com#*"]);
    assert_eq!((s.limits.default_max_turns, s.limits.max_turns_cap, s.limits.max_spawn_depth), (3, 10, 2));
    assert_eq!(s.limits.max_wait_ms, 600_000, "defaults stay");
    assert_eq!(s.limits.max_attachments, 8);
    assert_eq!(s.session.len(), 4);
    assert_eq!(s.session("phone").expect("phone").handler.kind(), a2a_core::sessions::HandlerKind::Inbox);
    let bonus = s.session("bonus-desk").expect("bonus-desk");
    assert_eq!(bonus.kind, a2a_core::sessions::SessionKind::Main);
    let HandlerConfig::Command(c) = &bonus.handler else { panic!("command") };
    assert_eq!(c.argv, vec!["/etc/a2a/./bots/bonus.py", "--strict"], "a program path is relative to the file");
    assert_eq!(c.cwd.as_deref(), Some(Path::new("/etc/a2a/bots")));
    assert_eq!((c.timeout_ms, c.max_output_bytes, c.max_concurrency), (5000, 1024 * 1024, 4));
    assert_eq!(s.session("ledger").expect("ledger").kind, a2a_core::sessions::SessionKind::Other);
    let settings = a2a_server::sessions::SessionSettings::from_config(&s);
    assert_eq!(
        (settings.limits.default_max_turns, settings.limits.max_turns_cap, settings.limits.max_spawn_depth),
        (3, 10, 2)
    );
    assert_eq!(settings.visibility, Visibility::Tree);
    assert_eq!(settings.auth_requirement, a2a_core::capability::AuthRequirement::ApiKey);
    assert_eq!(s.spawn_template(None).expect("default template").name, "price-check");
    assert!(s.spawn_template(Some("nonesuch")).is_none());
    let HandlerConfig::Command(p) = &s.spawn_template[0].handler else { panic!("command") };
    assert_eq!(p.argv[0], "python3", "a program without a / is looked up on PATH");

    // Without the section there are no sessions; an empty section is all defaults.
    assert!(parse("").expect("parses").sessions.is_none());
    assert_eq!(parse("[sessions]\n").expect("parses").sessions, Some(SessionsConfig::default()));
}

#[test]
fn config_mistakes_are_refused_by_field_line_and_remedy() {
    let session = |handler: &str| {
        format!("[[sessions.session]]\nsession_key = \"desk\"\nsummary = \"A helpful desk.\"\nhandler = {handler}\n")
    };
    let cases: Vec<(String, &[&str])> = vec![
        ("[sessions.limits]\nmax_turns_cap = 21\n".into(), &["max_turns_cap = 21", "0 to 20", "agent.toml:3:1"]),
        ("[sessions.limits]\ndefault_max_turns = 8\nmax_turns_cap = 6\n".into(), &["default_max_turns = 8", "at most max_turns_cap"]),
        ("[sessions.limits]\nmax_wait_ms = 700000\n".into(), &["max_wait_ms", "600000"]),
        ("[sessions.limits]\nmax_attachments = 9\n".into(), &["max_attachments = 9", "0 to 8"]),
        ("[sessions.limits]\nhistory_max_bytes = 100000\n".into(), &["history_max_bytes", "81920"]),
        ("[sessions.limits]\nmax_children = 0\n".into(), &["max_children = 0"]),
        ("[sessions.limits]\nmax_turn = 3\n".into(), &["unknown field `max_turn`", "max_turns_cap"]),
        ("[sessions]\nvisibility = \"everyone\"\n".into(), &["everyone", "self", "tree", "agent", "all"]),
        ("[sessions]\nauth_requirement = \"password\"\n".into(), &["password", "did_auth"]),
        ("[sessions]\nallow = [\"did:web:*.example.com\"]\n".into(), &["allow[0]", "#*"]),
        (
            "[[sessions.session]]\nsession_key = \"bad key\"\nsummary = \"A helpful desk.\"\nhandler = { type = \"command\", argv = [\"bot\"] }\n".into(),
            &["session_key", "' '", "agent.toml:3"],
        ),
        ("[[sessions.session]]\nsession_key = \"desk\"\nsummary = \"Hi\"\nhandler = { type = \"command\", argv = [\"bot\"] }\n".into(), &["summary is 2 characters", "5 to 2000"]),
        (
            "[[sessions.session]]\nsession_key = \"desk\"\nkind = \"spawn\"\nsummary = \"A helpful desk.\"\nhandler = { type = \"command\", argv = [\"bot\"] }\n".into(),
            &["kind = \"spawn\"", "spawn_template"],
        ),
        (format!("{}{}", session("{ type = \"command\", argv = [\"bot\"] }"), session("{ type = \"command\", argv = [\"bot\"] }")), &["\"desk\" is used twice"]),
        (session("{ type = \"shell\", line = \"bot\" }"), &["shell", "command", "http", "openai"]),
        (
            "[[sessions.spawn_template]]\nname = \"worker\"\nhandler = { type = \"inbox\" }\n".into(),
            &["spawn template \"worker\"", "inbox", "command, http or openai"],
        ),
        (session("{ type = \"command\", argv = [] }"), &["argv is empty", "[\"python3\", \"bot.py\"]"]),
        (session("{ type = \"command\", argv = [\"bot\"], timeout_ms = 0 }"), &["timeout_ms = 0", "1 to 600000"]),
        (session("{ type = \"command\", argv = [\"bot\"], max_output_bytes = 99999999 }"), &["max_output_bytes"]),
        (session("{ type = \"command\", argv = [\"bot\"], max_concurrency = 0 }"), &["max_concurrency = 0"]),
        (session("{ type = \"command\", argv = [\"bot\"], env_allow = [\"BAD-NAME\"] }"), &["BAD-NAME", "not a valid name"]),
        (session("{ type = \"command\", argv = [\"bot\"], env = { A2A_RUN_ID = \"x\" } }"), &["A2A_RUN_ID", "set by the agent"]),
        (session("{ type = \"command\", argv = [\"bot\"], shell = true }"), &["unknown field `shell`"]),
        (session("{ type = \"http\", url = \"ftp://x/y\" }"), &["ftp://x/y", "http://"]),
        (session("{ type = \"http\", url = \"not a url\" }"), &["not a URL"]),
        (session("{ type = \"openai\", base_url = \"http://x\", model = \"\" }"), &["model is empty"]),
        (session("{ type = \"openai\", base_url = \"http://x\", model = \"m\", temperature = 3.0 }"), &["temperature = 3", "0 to 2"]),
        (
            "[[sessions.spawn_template]]\nname = \"a worker\"\nhandler = { type = \"command\", argv = [\"w\"] }\n".into(),
            &["spawn_template.name", "' '"],
        ),
    ];
    let mut wrong = Vec::new();
    for (text, wanted) in cases {
        let err = match parse(&text) {
            Ok(_) => {
                wrong.push(format!("accepted:\n{text}"));
                continue;
            }
            Err(e) => e,
        };
        for w in wanted.iter().chain(&["/etc/a2a/agent.toml:"]) {
            if !err.contains(w) {
                wrong.push(format!("the error for\n{text}is {err:?}: it lacks {w:?}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[tokio::test]
async fn build_handler_reads_secrets_from_the_environment() {
    let (base, seen) = chat_backend().await;
    let mut c = OpenAiConfig::new(base.clone(), "echo");
    c.api_key_env = Some("CHAT_KEY".into());
    let cfg = HandlerConfig::Openai(c);
    let env = |name: &str| (name == "CHAT_KEY").then(|| "sk-test-key".to_owned());
    let h = build_handler_with_env(&cfg, &env).expect("built");
    assert_eq!(h.handle(delivery(Step::Message, "hi")).await, Ok("echo: hi".into()));
    assert_eq!(seen.lock().expect("lock").len(), 1);

    let missing = build_handler_with_env(&cfg, &|_| None).err().expect("refused");
    assert!(
        missing.0.contains("CHAT_KEY") && missing.0.contains("not set") && missing.0.contains("api_key_env"),
        "{missing}"
    );
    let mut hc = HttpConfig::new(format!("{base}/x"));
    hc.bearer_token_env = Some("NO_SUCH_TOKEN_VAR_FOR_TESTS".into());
    let missing = build_handler(&HandlerConfig::Http(hc)).err().expect("refused");
    assert!(missing.0.contains("NO_SUCH_TOKEN_VAR_FOR_TESTS"), "{missing}");
    let inbox = build_handler(&HandlerConfig::Inbox).err().expect("refused");
    assert!(inbox.0.contains("inbox"), "{inbox}");
    assert!(build_handler(&HandlerConfig::Command(CommandConfig::new(["true"]))).is_ok());
}

// --- a configured agent, served ----------------------------------------------------------------------------------

/// An agent built from TOML, as the binary does, serving a `command` session and an `http` spawn template; a send
/// and a spawn over loopback reach the configured handlers.
#[tokio::test]
async fn a_toml_agent_serves_its_configured_sessions_over_http() {
    let dir = TempDir::new("toml-sessions");
    std::fs::create_dir_all(dir.path("bots")).expect("mkdir");
    dir.write(
        "bots/bonus.py",
        "import json, os, sys\nd = json.load(sys.stdin)\nprint(json.dumps({\"reply\": \"The bonus is 5000 (asked: %s; waiting: %s)\" % (d[\"text\"], os.environ.get(\"A2A_WAIT_CHAIN\", \"-\"))}))\n",
    );
    let (service_base, seen) = service().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let toml = format!(
        r#"[agent]
did = "did:web:localhost%3A{port}"

[sessions]
auth_requirement = "none"

[[sessions.session]]
session_key = "bonus-desk"
label = "work assistant"
kind = "main"
summary = "Knows the boss's payroll and bonuses."
handler = {{ type = "command", argv = ["python3", "bonus.py"], cwd = "bots", timeout_ms = 20000 }}

[[sessions.spawn_template]]
name = "price-check"
handler = {{ type = "http", url = "{service_base}/reply" }}
"#
    );
    let path = dir.write("agent.toml", &toml);
    let (cfg, text) = Config::load(&path).expect("loads");
    let (agent, _) = a2a_agent::app::build_from_config(&cfg, &text, &path).expect("builds");
    let app = agent.router();
    let limits = agent.engine().limits().clone();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = a2a_server::serve::serve(
            listener,
            app,
            &limits,
            async {
                let _ = rx.await;
            },
            Duration::from_secs(1),
        )
        .await;
    });
    let base = format!("http://127.0.0.1:{port}");
    let me = format!("did:web:localhost%3A{port}");
    let http = reqwest::Client::new();
    let post = |path: &str, body: Value| {
        http.post(format!("{base}{path}")).header("A2A-Version", "0.3").header("A2A-Sender-ID", &me).json(&body).send()
    };

    let list: Value = http
        .get(format!("{base}/a2a/sessions?include_self=true"))
        .header("A2A-Version", "0.3")
        .header("A2A-Sender-ID", &me)
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("JSON");
    assert_eq!(list["sessions"][0]["session_key"], "bonus-desk", "{list}");
    assert_eq!(list["sessions"][0]["label"], "work assistant", "{list}");

    // The requester waits (and says so in A2A-Wait-Chain), so the program is given the chain with the target added,
    // to carry on in the sends it makes (POL-5, HDL-1).
    let send = json!({"target": "bonus-desk", "text": "bonus?", "from": "main", "wait_ms": 20000, "announce": false, "max_turns": 0});
    let resp = http
        .post(format!("{base}/a2a/sessions/send"))
        .header("A2A-Version", "0.3")
        .header("A2A-Sender-ID", &me)
        .header("A2A-Wait-Chain", format!("{me}#main"))
        .json(&send)
        .send()
        .await
        .expect("send");
    let answer: Value = resp.json().await.expect("JSON");
    assert_eq!(answer["status"], "ok", "{answer}");
    let reply = answer["reply"].as_str().expect("reply");
    assert!(reply.starts_with("The bonus is 5000 (asked: bonus?; waiting: "), "{answer}");
    assert!(reply.contains(&format!("{me}#main")) && reply.contains(&format!("{me}#bonus-desk")), "{answer}");

    // A worker spawned from the configured template is answered by the configured HTTP service.
    let resp =
        post("/a2a/sessions/spawn", json!({"parent": "bonus-desk", "task": "price of a MacBook", "announce": false}))
            .await
            .expect("spawn");
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let spawned: Value = resp.json().await.expect("JSON");
    let mut got = None;
    for _ in 0..100 {
        if let Some(r) = seen.lock().expect("lock").iter().find(|r| r.path == "/reply") {
            got = Some(r.clone());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let got = got.expect("the template's service was called");
    assert_eq!(got.body["step"], "spawn", "{}", got.body);
    assert_eq!(got.body["text"], "price of a MacBook");
    assert_eq!(got.body["run_id"], spawned["run_id"]);
    let _ = tx.send(());
}
