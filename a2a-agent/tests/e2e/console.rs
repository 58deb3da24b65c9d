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
    for path in ["/console/assets/agent.js", "/console/assets/agent.css"] {
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
