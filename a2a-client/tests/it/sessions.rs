//! Sessions (§17) from the SDK and the `a2a session` commands, run as a subprocess: what is refused before anything
//! is sent, and how a failure reads.

use std::time::Duration;

use a2a_client::ClientError;
use a2a_client::sessions::{SendStatus, attachment_from_bytes, message};

use crate::common::{TempDir, TestAgent, client, dead_url, runs, standard};

const AGENT: &str = "did:web:agent.example.com";

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

async fn a2a(args: &[&str]) -> Out {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_a2a"))
            .args(args)
            .env_remove("A2A_DID")
            .env_remove("A2A_KEY_FILE")
            .env_remove("A2A_WAIT_CHAIN")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("a2a finished in time")
    .expect("a2a ran");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[tokio::test]
async fn an_attachment_over_the_limit_is_refused_before_anything_is_sent() {
    // Nothing listens at the URL: exit 2 (refused input), not 3 (unreachable), shows no connection was tried.
    let dir = TempDir::new("attach");
    let big = dir.path("payslip.png");
    std::fs::write(&big, vec![0u8; 256 * 1024 + 1]).expect("write");
    let url = dead_url();
    let r = a2a(&["session", "ask", &url, "bonus-desk", "-m", "see attached", "--attach", big.to_str().unwrap()]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("attachment \"payslip.png\" is 262145 bytes, over the limit of 262144 bytes"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("hint: make it smaller"), "{}", r.stderr);

    let r = a2a(&["session", "send", &url, "bonus-desk", "-m", "x", "--attach", big.to_str().unwrap(), "--json"]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    let e: serde_json::Value = serde_json::from_str(&r.stderr).expect("a JSON error");
    assert_eq!(e["error"]["code"], "payload_too_large");

    // At the limit it goes out, and then the missing agent is the failure.
    std::fs::write(&big, vec![0u8; 256 * 1024]).expect("write");
    let r = a2a(&["session", "send", &url, "bonus-desk", "-m", "x", "--attach", big.to_str().unwrap()]).await;
    assert_eq!(r.code, 3, "{}", r.stderr);
}

#[tokio::test]
async fn bad_sends_are_named_member_by_member_without_a_round_trip() {
    let url = dead_url();
    for (args, want) in [
        (vec!["bonus-desk", "-m", ""], "`text` is 1 to 20000 characters"),
        (vec!["bad key", "-m", "hi"], "`target`"),
        (vec!["desk", "-m", "hi", "--priority", "12"], "`priority` is 0 to 9"),
        (vec!["desk", "-m", "hi", "--max-turns", "21"], "`max_turns` is 0 to 20"),
        (vec!["desk", "-m", "hi", "--from", "a/b"], "`from`"),
        (vec!["desk", "-m", "hi", "--context", "[{\"role\":\"user\",\"text\":\"x\"}]"], "`context` is only sent"),
        (vec!["desk", "-m", "hi", "--metadata", "[1]"], "--metadata must be a JSON object"),
        (vec!["desk", "-m", "hi", "--wait-chain", "not-an-address"], "--wait-chain"),
    ] {
        let mut full = vec!["session", "send", url.as_str()];
        full.extend(args.iter().copied());
        let r = a2a(&full).await;
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(want), "{args:?}: {}", r.stderr);
    }
    let r = a2a(&["session", "ask", &url, "desk", "-m", "hi", "--no-reply"]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("use `a2a session send --no-reply`"), "{}", r.stderr);
    // Usage errors: a target and a label, no text.
    assert_eq!(a2a(&["session", "send", &url, "desk", "--label", "x", "-m", "hi"]).await.code, 2);
    assert_eq!(a2a(&["session", "send", &url, "desk"]).await.code, 2);
}

#[tokio::test]
async fn the_sdk_checks_attachments_and_members_before_sending() {
    let c = client();
    let s = c.sessions(&dead_url()).expect("url");
    let mut m = message("desk", "see attached");
    m.attachments = vec![attachment_from_bytes("a.bin", "application/octet-stream", &[1; 10], 10).expect("fits"); 9];
    let e = s.send(&m).await.expect_err("nine attachments");
    assert!(matches!(e, ClientError::InvalidInput { .. }), "{e}");
    let s = s.max_attachment_bytes(5);
    m.attachments.truncate(1);
    let e = s.send(&m).await.expect_err("over the configured limit");
    assert!(matches!(e, ClientError::TooLarge { limit: 5, actual: 10, .. }), "{e}");
    // Within bounds, the send goes out: here nothing listens.
    let e = s.max_attachment_bytes(10).send(&m).await.expect_err("nothing listens");
    assert_eq!(e.code(), "unreachable", "{e}");
}

#[tokio::test]
async fn an_agent_without_sessions_is_a_readable_error_not_a_panic() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let s = client().sessions(&t.url).expect("url");
    let e = s.list(&Default::default()).await.expect_err("no sessions here");
    assert!(!e.to_string().is_empty() && !e.hint().is_empty(), "{e}");
    let r = s.send(&message("desk", "hi")).await;
    assert!(r.as_ref().is_err_and(|e| e.code() != "forbidden") || r.is_ok_and(|r| r.status != SendStatus::Ok));
    let out = a2a(&["session", "list", &t.url]).await;
    assert!(matches!(out.code, 1 | 3), "{} {}", out.stdout, out.stderr);
    assert!(out.stderr.starts_with("a2a: error: SESSION LIST"), "{}", out.stderr);
    assert!(out.stderr.contains("hint: "), "{}", out.stderr);
}
