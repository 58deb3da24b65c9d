//! The library's `sessions` feature (on by default): with it, an agent built with `AgentBuilder::sessions` lists
//! `sessions` in `features`, shows the one `auth_requirement` of its session endpoints (SES-2) and serves
//! `GET /a2a/sessions` (SES-3) under that requirement. An agent built without sessions — or from the crate built
//! without the feature (`--no-default-features`, which `.ci/run` checks with clippy) — serves the handshake alone: no
//! `sessions` feature, no `sessions` member, and `404 not_found` below `/a2a/sessions` like any path that is not an
//! endpoint.

use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use a2a_server::AgentBuilder;
use a2a_server::handler::ExecutionContext;
use axum::body::Body;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

const DID: &str = "did:web:localhost%3A8080";

fn echo() -> CapabilityDeclaration {
    CapabilityDeclaration {
        name: "echo_text".into(),
        description: "Echoes its input.".into(),
        auth_requirement: AuthRequirement::None,
        sub_capabilities: vec![],
        region_restriction: vec![],
        input_schema: json!({"type": "object"}),
        output_schema: None,
        estimated_cost: None,
        estimated_latency_ms: None,
        fallback_for: vec![],
    }
}

fn builder() -> AgentBuilder {
    AgentBuilder::new(DID).capability(echo(), |_ctx: ExecutionContext, payload: Value| async move { Ok(payload) })
}

/// `GET path` as sender `DID`, answered by `router`: the status and the JSON body.
async fn get(router: axum::Router, path: &str) -> (StatusCode, Value) {
    let req = Request::get(path)
        .header("A2A-Version", a2a_core::PROTOCOL_VERSION)
        .header("A2A-Sender-ID", "did:web:caller.example.com")
        .body(Body::empty())
        .expect("a request");
    let resp = router.oneshot(req).await.expect("the router answers");
    let status = resp.status();
    let bytes = resp.into_body().collect().await.expect("a body").to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

fn lists_sessions(caps: &Value) -> bool {
    caps["features"].as_array().expect("features").iter().any(|f| f == "sessions")
}

#[tokio::test]
async fn an_agent_without_sessions_serves_the_handshake_alone() {
    let agent = builder().build().expect("an agent");
    let (status, caps) = get(agent.router(), "/a2a/capabilities").await;
    assert_eq!(status, StatusCode::OK, "{caps}");
    assert!(!lists_sessions(&caps), "{caps}");
    assert!(caps.get("sessions").is_none(), "{caps}");
    let (status, body) = get(agent.router(), "/a2a/sessions").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"]["code"], "not_found", "{body}");
}

#[cfg(feature = "sessions")]
#[tokio::test]
async fn with_the_feature_an_agent_with_sessions_lists_and_serves_them() {
    use a2a_core::sessions::Delivery;
    use a2a_server::sessions::{HandlerFailure, HostedSession, SessionsBuilder};

    let desk = HostedSession::new("desk", "Answers questions.");
    let sessions = SessionsBuilder::new()
        .session(desk, |d: Delivery| async move { Ok::<_, HandlerFailure>(format!("You asked: {}", d.text)) });
    let agent = builder().sessions(sessions).build().expect("an agent");
    assert!(agent.sessions().is_some());
    let (status, caps) = get(agent.router(), "/a2a/capabilities").await;
    assert_eq!(status, StatusCode::OK, "{caps}");
    assert!(lists_sessions(&caps), "{caps}");
    assert!(caps["sessions"]["auth_requirement"].is_string(), "{caps}");
    // The endpoint is served, and asks the unsigned caller for what the capabilities document announced (SES-2).
    let (status, body) = get(agent.router(), "/a2a/sessions").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body["error"]["code"], "signature_required", "{body}");
    assert_eq!(body["error"]["details"]["auth_requirement"], caps["sessions"]["auth_requirement"], "{body}");
}
