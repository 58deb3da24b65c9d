//! The router without a socket (`tower::ServiceExt::oneshot`), as a user mounting it in their own app would.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::common::{SENDER, report_schema, standard};

async fn call(app: &axum::Router, req: Request<Body>) -> (StatusCode, axum::http::HeaderMap, Value) {
    let resp = app.clone().oneshot(req).await.expect("infallible");
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    let body = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).expect("JSON") };
    (status, headers, body)
}

fn post(uri: &str, body: &Value) -> Request<Body> {
    Request::post(uri)
        .header("A2A-Version", "0.3")
        .header("A2A-Sender-ID", SENDER)
        .header("Content-Type", "application/json")
        .body(Body::from(serde_json::to_vec(body).expect("json")))
        .expect("request")
}

#[tokio::test]
async fn router_nested_under_a_prefix_serves_the_handshake_and_points_location_below_the_prefix() {
    let agent = standard(Arc::new(AtomicUsize::new(0))).build().expect("builds");
    let app = axum::Router::new().nest("/agents/reports", agent.router());
    let (s, h, _) = call(&app, Request::options("/agents/reports/a2a").body(Body::empty()).expect("req")).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    assert!(h.contains_key("a2a-capabilities"));
    let (s, _, b) = call(
        &app,
        post(
            "/agents/reports/a2a/negotiate",
            &json!({"target_capability": "submit_report", "proposed_schema": report_schema()}),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let neg = b["negotiation_id"].as_str().expect("id").to_owned();
    let mut req = post("/agents/reports/a2a/execute", &json!({"title": "t", "timestamp": "2026-11-29T21:00:00Z"}));
    req.headers_mut().insert("A2A-Negotiation-ID", neg.parse().expect("header"));
    let (s, h, b) = call(&app, req).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let location = h.get("location").and_then(|v| v.to_str().ok()).expect("Location");
    assert!(location.starts_with("/agents/reports/a2a/result/"), "{location}");
}

#[tokio::test]
async fn unknown_path_and_wrong_method_are_json_errors_not_framework_pages() {
    let agent = standard(Arc::new(AtomicUsize::new(0))).build().expect("builds");
    let app = agent.router();
    let (s, h, b) = call(&app, Request::get("/a2a/x/y/z").body(Body::empty()).expect("req")).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(b["error"]["code"], json!("not_found"));
    assert_eq!(h.get("a2a-version").and_then(|v| v.to_str().ok()), Some("0.3"));
    let (s, _, b) = call(&app, Request::put("/a2a/confirm").body(Body::empty()).expect("req")).await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(b["error"]["code"], json!("method_not_allowed"));
}

#[tokio::test]
async fn every_request_is_audited_once_with_its_step_identifiers_and_outcome() {
    use a2a_server::store::audit::AuditQuery;
    let t = crate::common::TestAgent::start(crate::common::standard(std::sync::Arc::new(
        std::sync::atomic::AtomicUsize::new(0),
    )))
    .await;
    let body = t
        .run(
            "submit_report",
            crate::common::report_schema(),
            serde_json::json!({"title": "t", "timestamp": "2026-11-29T21:00:00Z"}),
        )
        .await;
    let exe = body["execution_id"].as_str().expect("id").to_owned();
    let neg = body["negotiation_id"].as_str().expect("neg").to_owned();
    let _ = t.negotiate("no_such_capability", serde_json::json!({"type": "object"})).await;
    let audit = t.agent.engine().audit();
    let by_exe = audit.query(&AuditQuery { execution_id: Some(exe.clone()), ..Default::default() }).await.expect("q");
    let steps: Vec<&str> = by_exe.iter().map(|r| r.step.as_str()).collect();
    assert_eq!(steps, vec!["result", "confirm", "execute"], "newest first");
    // The RESULT's record carries the execution's status, as answered; the others have none.
    assert_eq!(by_exe[0].execution_status.as_deref(), body["status"].as_str(), "{body}");
    assert!(body["status"].is_string());
    assert!(by_exe[1..].iter().all(|r| r.execution_status.is_none()));
    assert!(by_exe.iter().all(|r| r.negotiation_id.as_deref() == Some(neg.as_str())
        && r.capability.as_deref() == Some("submit_report")
        && r.outcome == "ok"
        && r.sender_id == crate::common::SENDER
        && r.agent == "did:web:agent.example.com"));
    let by_neg = audit.query(&AuditQuery { negotiation_id: Some(neg), ..Default::default() }).await.expect("q");
    assert_eq!(by_neg.len(), 4, "negotiate, execute, confirm, result");
    let all = audit.query(&AuditQuery::default()).await.expect("q");
    assert_eq!(all[0].outcome, "no_matching_capability");
}

/// DISC-2, DISC-12: DISCOVER without `Origin` carries every header of the table except the two that concern a
/// script's origin; with `Origin` it carries those too.
#[tokio::test]
async fn discover_without_origin_matches_the_table_and_the_origin_headers_are_conditional() {
    let t = crate::common::TestAgent::start(crate::common::standard(std::sync::Arc::new(
        std::sync::atomic::AtomicUsize::new(0),
    )))
    .await;
    for origin in [None, Some("https://app.example.com")] {
        let mut rb = t.req(reqwest::Method::OPTIONS, "/a2a");
        if let Some(o) = origin {
            rb = rb.header("Origin", o);
        }
        let a = t.send(rb).await;
        assert_eq!(a.status.as_u16(), 204);
        for always in [
            "a2a-version",
            "a2a-sender-id",
            "a2a-capabilities",
            "access-control-allow-methods",
            "access-control-allow-headers",
            "access-control-max-age",
        ] {
            assert!(a.header(always).is_some(), "{always} missing (Origin {origin:?})");
        }
        for conditional in ["access-control-allow-origin", "access-control-expose-headers"] {
            assert_eq!(a.header(conditional).is_some(), origin.is_some(), "{conditional} (Origin {origin:?})");
        }
    }
}
