//! The `a2a` binary, run as a subprocess against real agents: output, errors on stderr and exit codes.

use a2a_client::ExecuteOptions;
use a2a_test_support::cli::Run;
use serde_json::{Value, json};

use crate::common::{TempDir, TestAgent, client, dead_url, runs, standard};

const AGENT: &str = "did:web:agent.example.com";

async fn a2a(args: &[&str]) -> Run {
    a2a_stdin(args, None).await
}

async fn a2a_stdin(args: &[&str], stdin: Option<&str>) -> Run {
    a2a_test_support::cli::run(&a2a_test_support::bin("a2a"), args, stdin).await
}

const REPORT: &str = r#"{"title":"Lift 3 out of service","timestamp":"2026-11-29T21:00:00Z"}"#;

#[tokio::test]
async fn discover_prints_the_agent_for_people_and_json_for_scripts() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let r = a2a(&["discover", &t.endpoint]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("agent         did:web:agent.example.com"), "{}", r.stdout);
    assert!(r.stdout.contains("submit_report, run_slow_task, fail_on_purpose"), "{}", r.stdout);
    let j = a2a(&["discover", &t.endpoint, "--json"]).await.json();
    assert_eq!(j["agent"], AGENT);
    assert_eq!(j["capabilities"][0], "submit_report");
}

#[tokio::test]
async fn capabilities_lists_each_declaration() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let r = a2a(&["capabilities", &t.endpoint]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("submit_report  [none]"), "{}", r.stdout);
    assert!(r.stdout.contains("features  long_poll, cancel, idempotency"), "{}", r.stdout);
    let j = a2a(&["capabilities", &t.endpoint, "--json"]).await.json();
    assert_eq!(j["capabilities"].as_array().map(Vec::len), Some(3));
}

#[tokio::test]
async fn negotiate_prints_the_tightened_schema_and_its_changes() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let proposal = r#"{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}"#;
    let r = a2a(&["negotiate", &t.endpoint, "submit_report", "--schema", proposal]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("tightened    yes"), "{}", r.stdout);
    assert!(r.stdout.contains("/required/1: the capability requires property \"timestamp\""), "{}", r.stdout);
    let j = a2a(&["negotiate", &t.endpoint, "submit_report", "--schema", proposal, "--json"]).await.json();
    assert_eq!(j["agreed_schema"]["required"], json!(["title", "timestamp"]));
    let strict = a2a(&["negotiate", &t.endpoint, "submit_report", "--schema", proposal, "--strict"]).await;
    assert_eq!(strict.code, 1);
    assert!(strict.stderr.contains("tightening_refused"), "{}", strict.stderr);
}

#[tokio::test]
async fn call_prints_the_result_and_with_json_the_whole_outcome() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let r = a2a(&["call", &t.endpoint, "submit_report", "--data", REPORT]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let result: Value = serde_json::from_str(&r.stdout).expect("stdout is the result");
    assert_eq!(result["filed"]["title"], "Lift 3 out of service");
    let j = a2a(&["call", &t.endpoint, "submit_report", "--data", REPORT, "--json"]).await.json();
    assert_eq!(j["capability"], "submit_report");
    assert_eq!(j["degraded"], false);
    assert!(j["execution_id"].as_str().is_some_and(|s| s.starts_with("did:web:anonymous.invalid_")), "{j}");
    assert!(j["trace"]["steps"].as_array().is_some_and(|s| s.len() == 5), "{j}");
}

#[tokio::test]
async fn call_reads_the_payload_from_a_file_or_stdin_with_the_callers_did() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let dir = TempDir::new("cli-data");
    let f = dir.write("report.json", REPORT);
    let at = format!("@{}", f.display());
    let did = ["--did", "did:web:reporter.example.com"];
    let r = a2a(&[&did[..], &["call", &t.endpoint, "submit_report", "--data", &at, "--json"]].concat()).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.json()["execution_id"].as_str().is_some_and(|s| s.starts_with("did:web:reporter.example.com_")));
    let r = a2a_stdin(&["call", &t.endpoint, "submit_report", "--data", "@-"], Some(REPORT)).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let bad = a2a(&["call", &t.endpoint, "submit_report", "--data", "{not json"]).await;
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("--data is not valid JSON"), "{}", bad.stderr);
}

#[tokio::test]
async fn a_payload_the_schema_rejects_exits_1_with_each_error_on_stderr() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let r = a2a(&["call", &t.endpoint, "submit_report", "--data", r#"{"title":5}"#]).await;
    assert_eq!(r.code, 1);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    assert!(r.stderr.contains("payload_invalid"), "{}", r.stderr);
    assert!(r.stderr.contains("/timestamp: required property \"timestamp\" is missing"), "{}", r.stderr);
    assert!(r.stderr.contains("hint:"), "{}", r.stderr);
    let j = a2a(&["call", &t.endpoint, "submit_report", "--data", r#"{"title":5}"#, "--json"]).await;
    let err: Value = serde_json::from_str(&j.stderr).expect("JSON error on stderr");
    assert_eq!(err["error"]["code"], "payload_invalid");
    assert_eq!(err["error"]["step"], "EXECUTE");
}

#[tokio::test]
async fn a_failed_execution_exits_1_with_the_handlers_message() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let r = a2a(&["call", &t.endpoint, "fail_on_purpose", "--data", "{}"]).await;
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("handler_failed") && r.stderr.contains("it failed on purpose"), "{}", r.stderr);
}

#[tokio::test]
async fn a_dead_agent_exits_3_and_a_deadline_exits_4() {
    let r = a2a(&["call", &dead_url(), "submit_report", "--data", REPORT]).await;
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("cannot reach") && r.stderr.contains("Connection refused"), "{}", r.stderr);
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let r = a2a(&["call", &t.endpoint, "run_slow_task", "--data", r#"{"ms":60000}"#, "--deadline", "1s"]).await;
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("deadline") && r.stderr.contains("a2a result"), "{}", r.stderr);
}

#[tokio::test]
async fn an_agent_of_another_version_exits_3() {
    let agent = standard(AGENT, runs()).build().expect("builds");
    let app = agent.router().layer(axum::middleware::map_response(|mut r: axum::response::Response| async move {
        r.headers_mut().insert("a2a-version", axum::http::HeaderValue::from_static("0.4"));
        r
    }));
    let t = TestAgent::serve(agent, app).await;
    let r = a2a(&["discover", &t.endpoint]).await;
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("speaks A2A version 0.4"), "{}", r.stderr);
}

#[tokio::test]
async fn an_unknown_capability_exits_1_listing_the_fallback_options() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let r = a2a(&["call", &t.endpoint, "generate_summary", "--data", "{}", "--fallback", "refuse"]).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("no_matching_capability"), "{}", r.stderr);
    let f = a2a(&["fallback", &t.endpoint, "generate_summary", "--json"]).await;
    assert_eq!(f.code, 0, "{}", f.stderr);
    assert_eq!(f.json()["requested_capability"], "generate_summary");
}

#[tokio::test]
async fn result_reads_an_execution_and_waits_for_it() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let c = client();
    let n = c.negotiate(&t.endpoint, "run_slow_task", None).await.expect("negotiate");
    let e = c.execute(&n, &json!({"ms": 500}), &ExecuteOptions::default()).await.expect("execute");
    c.confirm(&e).await.expect("confirm");
    let did = ["--did", crate::common::CALLER];
    let r = a2a(&[&did[..], &["result", &t.endpoint, e.id(), "--wait", "--json"]].concat()).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["status"], "succeeded");
    let human = a2a(&[&did[..], &["result", &t.endpoint, e.id()]].concat()).await;
    assert!(human.stdout.contains("status     succeeded"), "{}", human.stdout);
    // Another sender cannot read it (NEG-4, RES-1).
    let other = a2a(&["result", &t.endpoint, e.id()]).await;
    assert_eq!(other.code, 1);
    assert!(other.stderr.contains("unknown_execution"), "{}", other.stderr);
    // Still running when --wait gives up: exit 4.
    let slow = c.negotiate(&t.endpoint, "run_slow_task", None).await.expect("negotiate");
    let e = c.execute(&slow, &json!({"ms": 60_000}), &ExecuteOptions::default()).await.expect("execute");
    c.confirm(&e).await.expect("confirm");
    let r = a2a(&[&did[..], &["result", &t.endpoint, e.id(), "--wait", "--deadline", "500ms"]].concat()).await;
    assert_eq!(r.code, 4, "{} {}", r.stdout, r.stderr);
    let r = a2a(&[&did[..], &["cancel", &t.endpoint, e.id()]].concat()).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("canceled"), "{}", r.stdout);
}

#[tokio::test]
async fn an_execution_that_runs_past_its_timeout_exits_1_timed_out() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let r = a2a(&["call", &t.endpoint, "run_slow_task", "--data", r#"{"ms":30000}"#, "--timeout-ms", "200"]).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("timed_out") && r.stderr.contains("timeout_ms"), "{}", r.stderr);
}

/// `a2a ... | head`: a reader that goes away ends the command quietly (exit 141, as a shell reports SIGPIPE), never
/// a panic (exit 101) — on stdout and on stderr.
#[tokio::test]
async fn a_pipe_whose_reader_has_gone_ends_the_command_quietly() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let a2a = a2a_test_support::bin("a2a");
    let a2a = a2a.display();
    for (what, script) in [
        ("stdout", format!("{a2a} capabilities {} | true; echo \"rc=${{PIPESTATUS[0]}}\" >&2", t.endpoint)),
        ("stderr", format!("{a2a} discover {} 2>&1 >/dev/null | true; echo \"rc=${{PIPESTATUS[0]}}\" >&2", dead_url())),
    ] {
        let out = tokio::process::Command::new("bash").args(["-c", &script]).output().await.expect("bash runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("rc=141"), "{what}: {err}");
        assert!(!err.contains("panicked"), "{what}: {err}");
    }
}
