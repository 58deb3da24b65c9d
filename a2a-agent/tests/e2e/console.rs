//! The agent's operator console (`/console`, `docs/console.md`): off by default; with `[admin] console = true` (or
//! `--console`) served exactly where `/metrics` is (OPS-1) — behind `[admin] token_env`'s token on the agent's
//! listener (bearer, login form or `?token=` once), open on `[admin] listen` — and never without the token.

use std::time::Duration;

use serde_json::Value;

use crate::common::{TempDir, free_port};
use crate::server_process::ServerProcess;

const TOKEN: &str = "console-operator-token-1";

fn config(dir: &TempDir, admin: &str) -> std::path::PathBuf {
    let path = dir.0.join("agent.toml");
    std::fs::write(
        &path,
        format!(
            r#"
[agent]
did = "did:web:agent.example.com"

{admin}

[[capabilities]]
name = "echo_message"
description = "echo"
auth_requirement = "none"
region_restriction = ["eu-west-1"]
input_schema = {{ type = "object", properties = {{ message = {{ type = "string" }} }} }}
handler = {{ kind = "echo" }}
"#
        ),
    )
    .expect("write config");
    path
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client")
}

#[tokio::test]
async fn the_agent_console_is_off_by_default() {
    let dir = TempDir::new("console-off");
    let server = ServerProcess::start_with_env(
        &config(&dir, "[admin]\ntoken_env = \"A2A_TEST_ADMIN_TOKEN\""),
        &[("A2A_TEST_ADMIN_TOKEN", TOKEN)],
    );
    for (method, path) in a2a_agent::console::ROUTES {
        let r = client()
            .request(method.parse().expect("method"), format!("{}{path}", server.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("request");
        assert_eq!(r.status(), 404, "{method} {path}");
    }
}

#[tokio::test]
async fn the_agent_console_needs_the_admin_token_and_shows_the_agent() {
    let dir = TempDir::new("console-token");
    let server = ServerProcess::start_with_env(
        &config(&dir, "[admin]\ntoken_env = \"A2A_TEST_ADMIN_TOKEN\"\nconsole = true"),
        &[("A2A_TEST_ADMIN_TOKEN", TOKEN)],
    );
    let http = client();
    for (method, path) in a2a_agent::console::ROUTES {
        for auth in [None, Some(("authorization", "Bearer wrong")), Some(("cookie", "a2a_console=9999999999.00"))] {
            let mut r = http.request(method.parse().expect("method"), format!("{}{path}", server.base));
            if let Some((k, v)) = auth {
                r = r.header(k, v);
            }
            if *method == "POST" {
                r = r.header("content-type", "application/x-www-form-urlencoded").body(format!("token={}", "wrong"));
            }
            let r = r.send().await.expect("request");
            assert_eq!(r.status(), 401, "{method} {path} with {auth:?}");
            assert!(r.headers().get("set-cookie").is_none());
            let body = r.text().await.expect("body");
            assert!(!body.contains("echo_message") && !body.contains("agent.js"), "{method} {path}: {body}");
        }
    }
    // Log in by the form, then by the query: a cookie without the token, then everything answers.
    let r = http
        .post(format!("{}/console/login", server.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={}", TOKEN))
        .send()
        .await
        .expect("login");
    assert_eq!(r.status(), 303);
    let set = r.headers()["set-cookie"].to_str().expect("cookie").to_owned();
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict") && !set.contains(TOKEN), "{set}");
    let cookie = set.split(';').next().expect("pair").to_owned();
    let r = http.get(format!("{}/console?token={TOKEN}", server.base)).send().await.expect("query");
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/console");
    // One request of the protocol, to be seen in the console.
    let d = http.request(reqwest::Method::OPTIONS, format!("{}/a2a", server.base)).send().await.expect("discover");
    assert_eq!(d.status(), 204);
    let page = http.get(format!("{}/console", server.base)).header("cookie", &cookie).send().await.expect("page");
    assert_eq!(page.status(), 200);
    assert!(page.text().await.expect("html").contains("/console/assets/agent.js"));
    let agent: Value = http
        .get(format!("{}/console/api/agent", server.base))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("agent")
        .json()
        .await
        .expect("json");
    assert_eq!(agent["did"], "did:web:agent.example.com");
    assert_eq!(agent["capabilities"][0]["name"], "echo_message");
    assert_eq!(agent["capabilities"][0]["region_restriction"][0], "eu-west-1");
    let audit: Value = http
        .get(format!("{}/console/api/audit", server.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("audit")
        .json()
        .await
        .expect("json");
    assert!(audit["records"].as_array().expect("records").iter().any(|r| r["step"] == "discover"), "{audit}");
    let metrics: Value = http
        .get(format!("{}/console/api/metrics", server.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("metrics")
        .json()
        .await
        .expect("json");
    // The same numbers as /metrics.
    let text = http
        .get(format!("{}/metrics", server.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    let shown: f64 =
        metrics["requests"].as_array().expect("requests").iter().map(|r| r["value"].as_f64().unwrap_or(0.0)).sum();
    let want: f64 = text
        .lines()
        .filter(|l| l.starts_with("a2a_requests_total"))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .sum();
    assert!(want >= 1.0, "{text}");
    assert_eq!(shown, want);
    for path in ["/console/assets/agent.js", "/console/assets/agent.css", "/console/assets/dom.js"] {
        let r = http.get(format!("{}{path}", server.base)).header("cookie", &cookie).send().await.expect("asset");
        assert_eq!(r.status(), 200, "{path}");
    }
}

#[tokio::test]
async fn the_console_flag_serves_it_on_the_admin_listener_only() {
    let dir = TempDir::new("console-flag");
    let port = free_port();
    let path = config(&dir, &format!("[admin]\nlisten = \"127.0.0.1:{port}\""));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_a2a-server"))
        .args(["--config", path.to_str().expect("path"), "--listen", "127.0.0.1:0", "--console"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start");
    let url = format!("http://127.0.0.1:{port}/console/api/agent");
    let mut answer = None;
    for _ in 0..300 {
        if let Ok(r) = client().get(&url).send().await {
            answer = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    let r = answer.expect("the admin listener answered");
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.expect("json");
    assert_eq!(v["capabilities"][0]["name"], "echo_message");
}

#[tokio::test]
async fn the_sessions_demo_with_console_shows_each_agents_sessions() {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_a2a-server"))
        .args(["--sessions-demo", "--linger", "--console"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start");
    // The banner names each agent's console.
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut console = None;
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(30)) {
        if line.trim_start().starts_with("work assistant") && line.contains("console: ") {
            console = line.split("console: ").nth(1).map(str::to_owned);
            break;
        }
    }
    let console = console.expect("the banner names the work assistant's console");
    let url = console.replace("/console", "/console/api/sessions");
    let v: Value = client().get(&url).send().await.expect("sessions").json().await.expect("json");
    let _ = child.kill();
    let _ = child.wait();
    let keys: Vec<&str> = v["agents"][0]["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .filter_map(|s| s["session_key"].as_str())
        .collect();
    assert!(keys.contains(&"work"), "{v}");
    assert!(v["as"].as_str().expect("as").starts_with("the agent itself"), "{v}");
}

// ---------------------------------------------------------------------------------------------------------------
// The agent's console in real headless Chromium (`/usr/bin/chromium`, or `$CHROMIUM`): an agent with a capability
// and a hosted session, its console served beside it; the page checked by a driver injected into it (same origin, so
// the console's own Content-Security-Policy lets it run) and by axe-core (vendored in `tests/fixtures/axe-core`).
// ---------------------------------------------------------------------------------------------------------------

mod browser {
    use std::process::{Command, Stdio};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use a2a_core::sessions::{Delivery, Step};
    use a2a_server::AgentBuilder;
    use a2a_server::handler::ExecutionContext;
    use a2a_server::sessions::{HostedSession, SessionsBuilder};
    use axum::body::Body;
    use serde_json::{Value, json};

    use a2a_test_support::browser::{chromium, headless_args};

    use crate::common::{decl, free_port};

    const DRIVER: &str =
        concat!(include_str!("../../../tests/fixtures/console_driver_prelude.js"), include_str!("console_driver.js"));
    const CALLER: &str = "did:web:caller.example.com";

    fn screenshots() -> std::path::PathBuf {
        a2a_test_support::browser::screenshots(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")))
    }

    /// The page with the driver and axe-core (`hold` false), or with an image that holds its `load` event — when
    /// Chromium takes a screenshot — until the console has drawn (`hold` true).
    async fn inject(
        hold: Arc<AtomicBool>,
        req: axum::extract::Request,
        next: axum::middleware::Next,
    ) -> http::Response<Body> {
        let page = req.uri().path() == "/console";
        let resp = next.run(req).await;
        if !page || resp.status() != 200 {
            return resp;
        }
        let (parts, body) = resp.into_parts();
        let html = String::from_utf8(axum::body::to_bytes(body, 1 << 20).await.expect("page").to_vec()).expect("utf-8");
        let html = if hold.load(Ordering::Relaxed) {
            html.replacen("</body>", "<img src=\"/__test/hold\" alt=\"\" width=\"1\" height=\"1\"></body>", 1)
        } else {
            html.replacen(
                "</head>",
                "<script src=\"/__test/axe.min.js\"></script><script src=\"/__test/driver.js\" defer></script></head>",
                1,
            )
        };
        let mut parts = parts;
        parts.headers.remove("content-length");
        http::Response::from_parts(parts, Body::from(html))
    }

    #[tokio::test]
    async fn the_agent_console_shows_the_agent_runs_try_it_and_a_live_session_in_headless_chromium() {
        // The agent: one capability, one hosted session whose handler answers and announces (§17.10).
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let base = format!("http://127.0.0.1:{port}");
        let did = format!("did:web:localhost%3A{port}");
        let handler = |d: Delivery| async move {
            Ok(match d.step {
                Step::Announce => "Told the team: the desk is free.".to_owned(),
                _ => format!("Desk here. You asked: {}", d.text),
            })
        };
        let sessions = SessionsBuilder::new()
            .settings(crate::sessions::open_settings())
            .session(HostedSession::new("desk", "Answers whether the desk is free."), handler);
        let mut cap = decl(
            "submit_report",
            json!({"type": "object",
            "properties": {"title": {"type": "string"}}, "required": ["title"]}),
        );
        cap.region_restriction = vec!["eu-west-1".into()];
        let agent = AgentBuilder::new(did.clone())
            .sessions(sessions)
            .capability(cap, |_c: ExecutionContext, p: Value| async move { Ok(json!({"filed": p})) })
            .build()
            .expect("agent");
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Value>(1);
        let hold = Arc::new(AtomicBool::new(false));
        let axe =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/axe-core/axe.min.js"))
                .expect("axe-core fixture");
        let send_to = base.clone();
        let h = hold.clone();
        let app = agent
            .router()
            .merge(a2a_agent::console::router(&agent, None))
            .route("/__test/driver.js", axum::routing::get(|| async { ([("content-type", "text/javascript")], DRIVER) }))
            .route(
                "/__test/axe.min.js",
                axum::routing::get(move || {
                    let a = axe.clone();
                    async move { ([("content-type", "text/javascript")], a) }
                }),
            )
            .route(
                "/__test/hold",
                axum::routing::get(|| async {
                    tokio::time::sleep(Duration::from_millis(2500)).await;
                    http::StatusCode::NOT_FOUND
                }),
            )
            .route(
                "/__test/report",
                axum::routing::post(move |body: String| {
                    let tx = tx.clone();
                    async move {
                        let _ = tx.send(serde_json::from_str(&body).unwrap_or(Value::String(body))).await;
                        ""
                    }
                }),
            )
            // A session run made by someone else while the console watches (§17.3): a caller asks the desk.
            .route(
                "/__test/send",
                axum::routing::post(move || {
                    let url = format!("{send_to}/a2a/sessions/send");
                    async move {
                        let r = reqwest::Client::new()
                            .post(url)
                            .header("A2A-Version", "0.3")
                            .header("A2A-Sender-ID", CALLER)
                            .json(&json!({"target": "desk", "text": "Is the desk free?", "wait_ms": 5000, "max_turns": 0}))
                            .send()
                            .await
                            .expect("send");
                        axum::Json(r.json::<Value>().await.expect("send answer"))
                    }
                }),
            )
            .layer(axum::middleware::from_fn(move |req, next| inject(h.clone(), req, next)));
        tokio::spawn(async move { axum::serve(listener, app).await });

        let profile = std::env::temp_dir().join(format!("a2a-agent-console-{}-{}", std::process::id(), free_port()));
        let mut browser = Command::new(chromium())
            .args(headless_args(&profile))
            .arg(format!("{base}/console"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {} ({e}); install Chromium (see README, Set-up)", chromium()));
        let report = tokio::time::timeout(Duration::from_secs(90), rx.recv()).await;
        let _ = browser.kill();
        let _ = browser.wait();
        let _ = std::fs::remove_dir_all(&profile);
        let report = report.expect("the console reported within 90 s").expect("a report");
        assert!(report.get("exception").is_none(), "the driver failed: {report:#}");
        // The agent: its capability with its auth requirement and region.
        assert_eq!(report["capabilities"], json!([["submit_report", "none", "eu-west-1"]]), "{report:#}");
        // The keyboard moves between the views (the Sessions tab is there: the agent hosts sessions).
        assert_eq!(report["keyboard"], json!(["tab-sessions", "tab-try", "tab-agent"]), "{report:#}");
        // Try it: a whole handshake, sent through the console's backend to the agent.
        assert_eq!(report["try_result"], json!("succeeded"), "{report:#}");
        assert_eq!(report["try_steps"], json!(["RESULT", "CONFIRM", "EXECUTE", "NEGOTIATE"]), "{report:#}");
        // Sessions: the hosted session listed, the run made while the page watched seen live with its events.
        assert_eq!(report["sessions"], json!([["this agent", "desk"]]), "{report:#}");
        assert_eq!(report["send_status"], json!("ok"), "{report:#}");
        let events = report["events"].as_array().expect("events");
        assert!(events.contains(&json!("announce")) && events.contains(&json!("run")), "{report:#}");
        assert_eq!(report["run_row"], json!(["ok", "done"]), "{report:#}");
        let ms = report["events_ms"].as_f64().expect("events_ms");
        assert!(ms < 5000.0, "the run's events reached the page after {ms} ms");
        eprintln!("agent console: from the send to its run event on the page {ms:.0} ms");
        let roles = report["history_roles"].as_array().expect("roles");
        assert!(roles.contains(&json!("inter_session")) && roles.contains(&json!("assistant")), "{report:#}");
        // axe-core: no WCAG 2 A/AA violation in any view.
        assert_eq!(report["axe_views"], json!(3), "{report:#}");
        assert_eq!(report["axe_violations"], json!([]), "{report:#}");

        // Screenshots of every view, kept by CI with the gateway's.
        hold.store(true, Ordering::Relaxed);
        let dir = screenshots();
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        for view in ["agent", "sessions", "try"] {
            let file = dir.join(format!("agent-{view}.png"));
            let _ = std::fs::remove_file(&file);
            let profile = std::env::temp_dir().join(format!("a2a-agent-shot-{}-{view}", std::process::id()));
            let (args, url, shot) =
                (headless_args(&profile), format!("{base}/console#{view}"), format!("--screenshot={}", file.display()));
            let status = tokio::task::spawn_blocking(move || {
                Command::new(chromium())
                    .args(args)
                    .arg(shot)
                    .arg(url)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
            })
            .await
            .expect("join")
            .expect("chromium");
            let _ = std::fs::remove_dir_all(&profile);
            assert!(status.success(), "chromium --screenshot of {view}: {status}");
            let size = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
            assert!(size > 10_000, "{} is {size} bytes", file.display());
        }
    }
}
