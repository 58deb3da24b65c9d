//! Every error code of the table (`spec/PROTOCOL.md` §12) that an agent can answer, triggered over HTTP, with its
//! status and JSON body. Codes an agent never answers are listed with the reason.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use a2a_core::error::{ErrorKind, TABLE};
use reqwest::{Method, StatusCode};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{Answer, SENDER, TestAgent, report_schema, standard, test_limits};

/// Codes this test does not trigger, with the reason.
const NOT_ANSWERED_BY_AN_AGENT: &[(&str, &str)] = &[
    ("clock_skew", "a gateway policy (GW-4)"),
    ("rate_limited", "a gateway policy"),
    ("agent_unavailable", "a gateway answer"),
    ("agent_timeout", "a gateway answer"),
    ("forbidden", "gateway and session policies"),
    ("internal_error", "no input triggers it; it would be a bug"),
    // Sessions and conversations (spec §17) are not served by a2a-server yet; when they are, these codes
    // move to the sessions tests and out of this list.
];

/// Codes exercised elsewhere in this test binary (auth.rs, lifecycle.rs).
const COVERED_ELSEWHERE: &[&str] = &[
    // GW-20: a transfer coding other than chunked, answered 501 by the gateway's HTTP/1.1 (a2a-gateway tests/it/h1.rs)
    "not_implemented",
    // sessions (§17): sessions.rs
    "unknown_session",
    "unknown_run",
    "session_conflict",
    "ambiguous_label",
    "wait_cycle",
    "hop_limit",
    "spawn_limit",
    "session_ended",
    // composite capabilities (§19): composite.rs
    "composite_unsatisfiable",
    "step_failed",
    // streaming (§18): streaming.rs
    "stream_limit_exceeded",
    // per-sender shares (LIM-4, LIM-5): steady_state.rs
    "quota_exceeded",
    "auth_required",
    "auth_invalid",
    "did_auth_required",
    "signature_required",
    "signature_malformed",
    "unsupported_algorithm",
    "unsupported_key_type",
    "unknown_key",
    "did_resolution_failed",
    "sender_mismatch",
    "audience_mismatch",
    "signature_invalid",
    "integrity_mismatch",
    "signature_expired",
    "signature_not_yet_valid",
    "signature_lifetime_exceeded",
    "replayed_request",
    "overloaded",
    "idempotency_conflict",
    "invalid_state",
    "region_restricted",
    "tightening_refused",
    "handler_failed",
    "timed_out",
    "canceled",
    "confirm_window_elapsed",
    "output_invalid",
];

fn expect(a: &Answer, status: u16, code: &str, seen: &mut BTreeSet<String>) {
    assert_eq!(a.status.as_u16(), status, "{code}: {}", a.body);
    assert_eq!(a.code(), code, "{}", a.body);
    assert!(!a.body["error"]["message"].as_str().unwrap_or("").is_empty(), "{code} has no message");
    assert_eq!(a.header("content-type"), Some("application/json"), "{code}");
    assert_eq!(a.header("a2a-version"), Some("0.3"), "{code}");
    seen.insert(code.to_owned());
}

#[tokio::test]
async fn every_error_code_an_agent_answers_is_triggered_with_its_status_and_json_body() {
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0))).limits({
        let mut l = test_limits();
        l.max_body_bytes = 4096;
        l.body_read_timeout_ms = 300;
        l
    }))
    .await;
    let mut seen = BTreeSet::new();
    let neg_body = json!({"target_capability": "submit_report", "proposed_schema": report_schema()});

    let a = t.send(t.http.post(t.url("/a2a/negotiate")).header("A2A-Sender-ID", SENDER).json(&neg_body)).await;
    expect(&a, 400, "version_required", &mut seen);
    let a = t
        .send(
            t.http
                .post(t.url("/a2a/negotiate"))
                .header("A2A-Version", "0.2")
                .header("A2A-Sender-ID", SENDER)
                .json(&neg_body),
        )
        .await;
    expect(&a, 400, "unsupported_version", &mut seen);
    assert_eq!(a.body["error"]["details"]["supported_versions"], json!(["0.3"]));
    let a = t.send(t.http.post(t.url("/a2a/negotiate")).header("A2A-Version", "0.3").json(&neg_body)).await;
    expect(&a, 400, "sender_required", &mut seen);
    let a = t
        .send(
            t.http
                .post(t.url("/a2a/negotiate"))
                .header("A2A-Version", "0.3")
                .header("A2A-Sender-ID", "bob")
                .json(&neg_body),
        )
        .await;
    expect(&a, 400, "invalid_sender", &mut seen);
    let a =
        t.send(t.req(Method::POST, "/a2a/execute").header("A2A-Negotiation-ID", "not a token").json(&json!({}))).await;
    expect(&a, 400, "invalid_header", &mut seen);
    let a = t
        .send(
            t.req(Method::POST, "/a2a/negotiate")
                .header("Content-Type", "application/json")
                .body("{\"target_capability\":"),
        )
        .await;
    expect(&a, 400, "invalid_json", &mut seen);
    let a = t.post("/a2a/negotiate", json!({"proposed_schema": report_schema()})).await;
    expect(&a, 400, "invalid_request", &mut seen);
    let a = t
        .post("/a2a/negotiate", json!({"target_capability": "submit_report", "proposed_schema": {}, "surprise": 1}))
        .await;
    expect(&a, 400, "invalid_request", &mut seen);
    let a = t.send(t.req(Method::POST, "/a2a/negotiate").header("Content-Type", "text/plain").body("hello")).await;
    expect(&a, 415, "unsupported_media_type", &mut seen);
    let big = json!({"target_capability": "submit_report", "proposed_schema": {"type": "object", "description": "x".repeat(10_000)}});
    let a = t.post("/a2a/negotiate", big).await;
    expect(&a, 413, "payload_too_large", &mut seen);
    assert_eq!(a.body["error"]["details"]["limit_bytes"], json!(4096));
    let mut rb = t.req(Method::GET, "/a2a/capabilities");
    for i in 0..70 {
        rb = rb.header(format!("x-filler-{i}"), "v");
    }
    let a = t.send(rb).await;
    expect(&a, 431, "headers_too_large", &mut seen);
    let a = t.get("/a2a/nothing-here").await;
    expect(&a, 404, "not_found", &mut seen);
    let a = t.get("/a2a/negotiate").await;
    expect(&a, 405, "method_not_allowed", &mut seen);
    assert_eq!(a.header("allow"), Some("POST, OPTIONS"));
    let a = t.send(t.req(Method::DELETE, "/a2a")).await;
    expect(&a, 405, "method_not_allowed", &mut seen);

    let a = t.negotiate("generate_summary", json!({"type": "object"})).await;
    expect(&a, 404, "no_matching_capability", &mut seen);
    assert!(a.body["fallback_options"].is_array());
    let a = t
        .negotiate(
            "submit_report",
            json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["b"]}),
        )
        .await;
    expect(&a, 422, "schema_rule_violation", &mut seen);
    let rules: Vec<&str> = a.body["error"]["details"]["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .filter_map(|v| v["rule"].as_str())
        .collect();
    assert!(rules.contains(&"type_not_allowed") && rules.contains(&"required_not_defined"), "{rules:?}");
    let a = t.negotiate("submit_report", json!({"type": "object", "properties": {"title": {"type": "number"}}})).await;
    expect(&a, 409, "schema_incompatible", &mut seen);
    assert!(a.body["fallback_options"].is_array());
    let a = t.send(t.req(Method::POST, "/a2a/execute").json(&json!({}))).await;
    expect(&a, 400, "negotiation_required", &mut seen);
    let a = t.execute("n_doesnotexist", json!({})).await;
    expect(&a, 404, "unknown_negotiation", &mut seen);
    let neg = t.negotiated("submit_report", report_schema()).await;
    let a = t.execute(&neg, json!({"title": 5})).await;
    expect(&a, 422, "payload_invalid", &mut seen);
    let paths: Vec<&str> = a.body["error"]["details"]["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter_map(|e| e["path"].as_str())
        .collect();
    assert!(paths.contains(&"/title"), "{paths:?}");
    let a = t.execute(&neg, json!({"title": "t", "timestamp": "yesterday"})).await;
    expect(&a, 422, "payload_invalid", &mut seen);
    let a = t.confirm("did:web:caller.example.com_1764450000000000000_aaaaaaaaaaaaaaaaaaaaaaaaaa").await;
    expect(&a, 404, "unknown_execution", &mut seen);
    let a = t.get("/a2a/result/garbage").await;
    expect(&a, 404, "unknown_execution", &mut seen);

    // A failing store answers 503 store_unavailable (see the store-fault test below), a slow body 408.
    let addr = t.base.trim_start_matches("http://").to_owned();
    let mut s = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    s.write_all(
        format!(
            "POST /a2a/negotiate HTTP/1.1\r\nHost: {addr}\r\nA2A-Version: 0.3\r\nA2A-Sender-ID: {SENDER}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"tar"
        )
        .as_bytes(),
    )
    .await
    .expect("write");
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await;
    let text = String::from_utf8_lossy(&buf);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("\"request_timeout\""), "{text}");
    seen.insert("request_timeout".into());
    seen.insert("store_unavailable".into());

    let excluded: BTreeSet<&str> =
        NOT_ANSWERED_BY_AN_AGENT.iter().map(|(c, _)| *c).chain(COVERED_ELSEWHERE.iter().copied()).collect();
    for e in TABLE {
        let covered = seen.contains(e.code) || excluded.contains(e.code);
        assert!(covered, "error code {} is neither triggered here nor listed as covered elsewhere", e.code);
        if let ErrorKind::Http(_) = e.kind {
            assert!(!(seen.contains(e.code) && excluded.contains(e.code)), "{} is listed twice", e.code);
        }
    }
}

/// A store that fails every call, as a store does when its backend is down.
struct DownStore;

#[async_trait::async_trait]
impl a2a_server::store::Executions for DownStore {
    async fn put_negotiation(
        &self,
        _: a2a_server::store::NegotiationRecord,
    ) -> Result<(), a2a_server::store::StoreError> {
        Err(a2a_server::store::StoreError("connection refused".into()))
    }
    async fn get_negotiation(
        &self,
        _: &str,
    ) -> Result<Option<a2a_server::store::NegotiationRecord>, a2a_server::store::StoreError> {
        Err(a2a_server::store::StoreError("connection refused".into()))
    }
    async fn create_execution(
        &self,
        _: a2a_server::store::ExecutionRecord,
        _: Option<a2a_server::store::IdempotencyClaim>,
    ) -> Result<a2a_server::store::Created, a2a_server::store::StoreError> {
        Err(a2a_server::store::StoreError("connection refused".into()))
    }
    async fn get_execution(
        &self,
        _: &str,
    ) -> Result<Option<a2a_server::store::ExecutionRecord>, a2a_server::store::StoreError> {
        Err(a2a_server::store::StoreError("connection refused".into()))
    }
    async fn transition(
        &self,
        _: &str,
        _: a2a_server::store::Transition,
        _: Option<&a2a_server::store::ExecutionRecord>,
    ) -> Result<a2a_server::store::TransitionOutcome, a2a_server::store::StoreError> {
        Err(a2a_server::store::StoreError("connection refused".into()))
    }
    async fn wait_change(
        &self,
        _: &str,
        _: a2a_core::wire::ExecutionStatus,
        _: Duration,
    ) -> Result<Option<a2a_server::store::ExecutionRecord>, a2a_server::store::StoreError> {
        Err(a2a_server::store::StoreError("connection refused".into()))
    }
    async fn terminal_signal(&self, _: &str, timeout: Duration) -> bool {
        tokio::time::sleep(timeout).await;
        false
    }
}

#[async_trait::async_trait]
impl a2a_server::store::WorkQueue for DownStore {
    async fn prepare_queue(&self, _: &[String]) -> Result<(), a2a_server::store::StoreError> {
        Err(a2a_server::store::StoreError("connection refused".into()))
    }
    async fn claim_work(
        &self,
        _: usize,
        _: usize,
        _: Duration,
    ) -> Result<Vec<a2a_server::store::WorkItem>, a2a_server::store::StoreError> {
        Err(a2a_server::store::StoreError("connection refused".into()))
    }
    async fn touch_work(&self, _: &[a2a_server::store::WorkItem]) -> Result<(), a2a_server::store::StoreError> {
        Err(a2a_server::store::StoreError("connection refused".into()))
    }
    async fn complete_work(
        &self,
        _: &a2a_server::store::WorkItem,
        _: Option<a2a_server::store::Transition>,
        _: Option<&a2a_server::store::ExecutionRecord>,
    ) -> Result<Option<a2a_server::store::TransitionOutcome>, a2a_server::store::StoreError> {
        Err(a2a_server::store::StoreError("connection refused".into()))
    }
    fn visibility_timeout(&self) -> Duration {
        Duration::from_secs(30)
    }
}

#[async_trait::async_trait]
impl a2a_server::store::ReplayMemory for DownStore {
    async fn remember_jti(&self, _: &str, _: &str, _: u64) -> Result<bool, a2a_server::store::StoreError> {
        Err(a2a_server::store::StoreError("connection refused".into()))
    }
}

#[async_trait::async_trait]
impl a2a_server::store::Store for DownStore {}

#[tokio::test]
async fn a_failing_store_is_503_store_unavailable_for_every_step_that_needs_it() {
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0))).store(Arc::new(DownStore))).await;
    let mut seen = BTreeSet::new();
    let a = t.negotiate("submit_report", report_schema()).await;
    expect(&a, 503, "store_unavailable", &mut seen);
    assert!(a.header("retry-after").is_some());
    let a = t.execute("n_x", json!({})).await;
    expect(&a, 503, "store_unavailable", &mut seen);
    let a = t.confirm("did:web:caller.example.com_1764450000000000000_aaaaaaaaaaaaaaaaaaaaaaaaaa").await;
    expect(&a, 503, "store_unavailable", &mut seen);
    // DISCOVER and the capabilities document need no store.
    let d = t.send(t.http.request(Method::OPTIONS, t.url("/a2a"))).await;
    assert_eq!(d.status, StatusCode::NO_CONTENT);
}
