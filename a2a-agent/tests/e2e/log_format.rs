//! The `a2a-server` binary as an operator runs it: with `--log-format json` every line it writes to stderr is a JSON
//! object — its logs, the error that ends it, a warning — and `--demo` says plainly that it does not use `REDIS_URL`.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Kills the child on drop.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Every line of `stderr` parsed as a JSON object; panics naming the first line that is not one.
fn json_lines(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .map(|l| match serde_json::from_str::<Value>(l) {
            Ok(v) if v.is_object() => v,
            _ => panic!("a stderr line is not a JSON object: {l:?}\nall of stderr:\n{stderr}"),
        })
        .collect()
}

fn run_to_exit(args: &[&str]) -> (std::process::ExitStatus, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_a2a-server"))
        .args(args)
        .env("RUST_LOG", "debug")
        .env_remove("A2A_LOG_FORMAT")
        .env_remove("REDIS_URL")
        .stdin(Stdio::null())
        .output()
        .expect("a2a-server runs");
    (out.status, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn with_log_format_json_the_error_that_ends_the_server_is_a_json_line() {
    // The address is taken: the server cannot listen and says so.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let (status, stderr) = run_to_exit(&["--demo", "--listen", &addr, "--log-format", "json"]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    let lines = json_lines(&stderr);
    let last = lines.last().expect("an error line");
    assert_eq!(last["level"], "ERROR", "{stderr}");
    let message = last["fields"]["message"].as_str().unwrap_or("");
    assert!(message.contains("cannot listen on") && message.contains(&addr), "{stderr}");
    // A configuration that does not exist: the same.
    let (status, stderr) = run_to_exit(&["--config", "/nonexistent/agent.toml", "--log-format", "json"]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    let lines = json_lines(&stderr);
    assert!(
        lines.iter().any(|l| l["fields"]["message"].as_str().is_some_and(|m| m.contains("agent.toml"))),
        "{stderr}"
    );
    // The text format stays plain text.
    let (status, stderr) = run_to_exit(&["--demo", "--listen", &addr]);
    assert_eq!(status.code(), Some(1));
    assert!(stderr.lines().any(|l| l.starts_with("a2a-server: cannot listen on")), "{stderr}");
}

#[test]
fn the_demo_logs_json_lines_only_and_says_it_does_not_use_redis_url() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let mut child = Child(
        Command::new(env!("CARGO_BIN_EXE_a2a-server"))
            .args(["--demo", "--listen", &format!("127.0.0.1:{port}"), "--log-format", "json"])
            .env("RUST_LOG", "debug")
            .env("REDIS_URL", "redis://127.0.0.1:1")
            .env_remove("A2A_LOG_FORMAT")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("a2a-server starts"),
    );
    let mut stderr_pipe = child.0.stderr.take().expect("stderr");
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr_pipe.read_to_string(&mut s);
        s
    });
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let out = child.0.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // The banner, then the notice (a missing notice fails after the banner's last line came and 10 s passed).
    let mut stdout = String::new();
    let until = Instant::now() + Duration::from_secs(30);
    while let Ok(line) = rx.recv_timeout(until.saturating_duration_since(Instant::now()).min(Duration::from_secs(10))) {
        stdout.push_str(&line);
        stdout.push('\n');
        if line.contains("REDIS_URL") {
            break;
        }
    }
    assert!(stdout.contains("REDIS_URL is set, but the demo does not use it"), "{stdout}");
    // A few requests (request logs), then the shutdown signal (the shutdown logs).
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    rt.block_on(async {
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        let r = http.request(reqwest::Method::OPTIONS, format!("{base}/a2a")).send().await.expect("discover");
        assert_eq!(r.status(), 204);
        let r = http
            .post(format!("{base}/a2a/negotiate"))
            .header("A2A-Version", "0.3")
            .header("A2A-Sender-ID", "did:web:caller.example.com")
            .header("Content-Type", "application/json")
            .body("{\"a\":")
            .send()
            .await
            .expect("negotiate");
        assert_eq!(r.status(), 400);
    });
    let status = Command::new("kill").args(["-TERM", &child.0.id().to_string()]).status().expect("kill");
    assert!(status.success());
    let until = Instant::now() + Duration::from_secs(20);
    while child.0.try_wait().expect("wait").is_none() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let stderr = stderr.join().expect("stderr read");
    let records = json_lines(&stderr);
    assert!(records.len() >= 3, "too few log lines:\n{stderr}");
    assert!(
        records
            .iter()
            .any(|r| r["level"] == "WARN"
                && r["fields"]["message"].as_str().is_some_and(|m| m.contains("does not use it"))),
        "no warning about REDIS_URL:\n{stderr}"
    );
    assert!(records.iter().any(|r| r["fields"]["message"].as_str().is_some_and(|m| m.contains("shutting down"))));
}
