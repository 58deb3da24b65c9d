//! The demo binary: `a2a-server --demo` serves, and the commands it prints work as printed.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::free_port;

/// Kills the child on drop.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn demo_serves_and_every_printed_command_works_as_printed() {
    let port = free_port();
    let mut child = Child(
        Command::new(env!("CARGO_BIN_EXE_a2a-server"))
            .args(["--demo", "--listen", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("a2a-server starts"),
    );
    let stdout = child.0.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut banner = String::new();
    let started = Instant::now();
    // The banner ends with the schema-rule example, the last command it prints.
    while let Some(Ok(line)) = lines.next() {
        banner.push_str(&line);
        banner.push('\n');
        if line.contains("\"author\"") || started.elapsed() > Duration::from_secs(30) {
            break;
        }
    }
    assert!(banner.contains(&format!("did:web:localhost%3A{port}")), "{banner}");
    let script: String = banner
        .lines()
        .filter(|l| ["curl ", "NEG=", "EXE=", "NEG2="].iter().any(|p| l.starts_with(p)))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(script.lines().count() >= 8, "too few commands printed:\n{banner}");
    let out = Command::new("bash").args(["-euo", "pipefail", "-c", &script]).output().expect("bash runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the printed commands failed:\n{script}\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for expected in [
        "HTTP/1.1 204",
        "a2a-capabilities: [\"echo_message\",\"submit_report\"",
        "\"a2a_version\":\"0.3\"",
        "negotiation: n_",
        "execution: did:web:caller.example.com_",
        "\"status\":\"accepted\"",
        "\"status\":\"succeeded\"",
        "\"report_id\":\"r-",
        "\"relation\":\"degraded\"",
        "\"steps\":[{\"capability\":\"generate_brief_summary\"",
        "urn:a2a-handshake:0.3",
        "\"TASK_STATE_COMPLETED\"",
        "hello from A2A 1.x",
        "\"code\":\"schema_rule_violation\"",
        "nullable_not_supported",
        "required_not_defined",
    ] {
        assert!(text.contains(expected), "output lacks {expected:?}:\n{text}");
    }
    // The DID document is served where did:web says it is.
    let doc = Command::new("curl")
        .args(["-s", &format!("http://127.0.0.1:{port}/.well-known/did.json")])
        .output()
        .expect("curl");
    let doc: serde_json::Value = serde_json::from_slice(&doc.stdout).expect("DID document is JSON");
    assert_eq!(doc["id"], serde_json::json!(format!("did:web:localhost%3A{port}")));
}
