//! The happy path of every endpoint, over loopback HTTP.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::{SENDER, TestAgent, report_schema, standard};

#[tokio::test]
async fn discover_answers_204_with_version_sender_capabilities_and_cors_without_any_request_header() {
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0)))).await;
    let a = t.send(t.http.request(Method::OPTIONS, t.url("/a2a"))).await;
    assert_eq!(a.status, StatusCode::NO_CONTENT);
    assert_eq!(a.body, serde_json::Value::Null);
    assert_eq!(a.header("a2a-version"), Some("0.3"));
    assert_eq!(a.header("a2a-sender-id"), Some("did:web:agent.example.com"));
    assert_eq!(
        a.header("a2a-capabilities"),
        Some(r#"["submit_report","run_slow_task","fail_on_purpose","crash_on_purpose"]"#)
    );
    let methods = a.header("access-control-allow-methods").unwrap_or_default();
    for m in ["OPTIONS", "POST", "GET"] {
        assert!(methods.contains(m), "{methods}");
    }
    let allowed = a.header("access-control-allow-headers").unwrap_or_default().to_ascii_lowercase();
    for h in ["a2a-version", "a2a-sender-id", "a2a-negotiation-id", "a2a-signature", "content-type", "idempotency-key"]
    {
        assert!(allowed.contains(h), "{allowed} lacks {h}");
    }
}

#[tokio::test]
async fn discover_from_a_browser_origin_exposes_the_a2a_headers() {
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0)))).await;
    let a = t
        .send(
            t.http
                .request(Method::OPTIONS, t.url("/a2a"))
                .header("Origin", "https://app.example.org")
                .header("Access-Control-Request-Method", "OPTIONS"),
        )
        .await;
    assert_eq!(a.status, StatusCode::NO_CONTENT);
    assert_eq!(a.header("access-control-allow-origin"), Some("*"));
    let exposed = a.header("access-control-expose-headers").unwrap_or_default().to_ascii_lowercase();
    for h in ["a2a-version", "a2a-sender-id", "a2a-capabilities", "a2a-execution-id", "location", "retry-after"] {
        assert!(exposed.contains(h), "{exposed} lacks {h}");
    }
}

#[tokio::test]
async fn preflight_of_a_post_endpoint_is_answered_without_version_or_sender() {
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0)))).await;
    for path in ["/a2a/negotiate", "/a2a/execute", "/a2a/confirm", "/a2a/result/x", "/a2a/fallback", "/a2a/cancel"] {
        let a = t
            .send(
                t.http
                    .request(Method::OPTIONS, t.url(path))
                    .header("Origin", "https://app.example.org")
                    .header("Access-Control-Request-Method", "POST")
                    .header("Access-Control-Request-Headers", "a2a-version,a2a-sender-id,content-type"),
            )
            .await;
        assert!(a.status.is_success(), "{path}: {}", a.status);
        assert_eq!(a.header("access-control-allow-origin"), Some("*"), "{path}");
        assert!(a.header("access-control-allow-headers").unwrap_or_default().contains("A2A-Sender-ID"), "{path}");
    }
}

#[tokio::test]
async fn capabilities_document_lists_every_declaration_features_and_limits() {
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0)))).await;
    let a = t.send(t.http.get(t.url("/a2a/capabilities"))).await;
    assert_eq!(a.status, StatusCode::OK);
    let doc: a2a_core::wire::CapabilitiesDocument =
        serde_json::from_value(a.body.clone()).expect("a CapabilitiesDocument");
    assert_eq!(doc.a2a_version, "0.3");
    assert_eq!(doc.agent.id, "did:web:agent.example.com");
    let names: Vec<&str> = doc.capabilities.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["submit_report", "run_slow_task", "fail_on_purpose", "crash_on_purpose"]);
    assert_eq!(doc.features, ["long_poll", "cancel", "idempotency"]);
    assert_eq!(doc.limits.expect("limits").max_body_bytes, 1024 * 1024);
}

#[tokio::test]
async fn negotiate_tightens_the_seed_proposal_to_require_timestamp() {
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0)))).await;
    let proposal = json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]});
    let a = t.negotiate("submit_report", proposal).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.body["agreed_schema"]["required"], json!(["title", "timestamp"]));
    assert_eq!(a.body["tightened"], json!(true));
    let kinds: Vec<&str> =
        a.body["changes"].as_array().expect("changes").iter().filter_map(|c| c["kind"].as_str()).collect();
    assert!(kinds.contains(&"added_property") && kinds.contains(&"added_required"), "{kinds:?}");
    assert_eq!(a.header("a2a-negotiation-id"), a.body["negotiation_id"].as_str());
    assert_eq!(a.body["timeout_ms"], json!(30_000));
    assert_eq!(a.body["auth_requirement"], json!("none"));
    let expires =
        a2a_core::wire::parse_timestamp(a.body["expires_at"].as_str().expect("expires_at")).expect("RFC 3339");
    assert!(expires > std::time::SystemTime::now());
}

#[tokio::test]
async fn negotiate_lowers_timeout_to_the_agents_maximum_and_keeps_an_exact_proposal_untightened() {
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0)))).await;
    let a = t
        .post(
            "/a2a/negotiate",
            json!({"target_capability": "submit_report", "proposed_schema": report_schema(), "timeout_ms": 99_999_999}),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.body["timeout_ms"], json!(300_000));
    assert_eq!(a.body["tightened"], json!(false));
    assert_eq!(a.body["changes"], json!([]));
}

#[tokio::test]
async fn strict_negotiation_that_needs_tightening_is_refused_with_a_counter_proposal() {
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0)))).await;
    let proposal = json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]});
    let a = t
        .post(
            "/a2a/negotiate",
            json!({"target_capability": "submit_report", "proposed_schema": proposal, "strict": true}),
        )
        .await;
    assert_eq!(a.status, StatusCode::CONFLICT);
    assert_eq!(a.code(), "tightening_refused");
    assert_eq!(a.body["error"]["details"]["counter_proposal"]["required"], json!(["title", "timestamp"]));
}

#[tokio::test]
async fn full_handshake_returns_the_result_with_location_and_execution_headers() {
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0)))).await;
    let neg = t.negotiated("submit_report", report_schema()).await;
    let payload = json!({"title": "Lift 3 out of service", "timestamp": "2026-11-29T21:00:00Z"});
    let e = t.execute(&neg, payload.clone()).await;
    assert_eq!(e.status, StatusCode::CREATED, "{}", e.body);
    let id = e.body["execution_id"].as_str().expect("id").to_owned();
    assert_eq!(e.body["status"], json!("received"));
    assert_eq!(e.header("a2a-execution-id"), Some(id.as_str()));
    assert_eq!(e.header("a2a-negotiation-id"), Some(neg.as_str()));
    let parsed = a2a_core::execution_id::ExecutionId::parse(&id).expect("execution id parses");
    assert_eq!(parsed.sender().to_string(), SENDER);
    let location = e.header("location").expect("Location").to_owned();
    assert_eq!(location, format!("/a2a/result/{}", parsed.to_path_segment()));
    let c = t.confirm(&id).await;
    assert_eq!(c.status, StatusCode::ACCEPTED);
    assert_eq!(c.body, json!({"execution_id": id, "status": "accepted"}));
    let r = t.get(&format!("{location}?wait_ms=10000")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["status"], json!("succeeded"));
    assert_eq!(r.body["result"], json!({"filed": payload}));
    assert!(r.body.get("error").is_none());
    assert!(r.body["deadline"].is_string());
}

#[tokio::test]
async fn fallback_lists_local_degraded_options_and_registry_agents() {
    use a2a_server::registry::{MemoryRegistry, RegistryEntry};
    let mut brief = crate::common::decl("generate_brief_summary", json!({"type": "object"}));
    brief.fallback_for = vec!["generate_summary".into()];
    brief.estimated_cost = Some(0.02);
    let mut remote = crate::common::decl("generate_summary", json!({"type": "object"}));
    remote.estimated_cost = Some(0.05);
    let registry = MemoryRegistry::new(vec![RegistryEntry {
        agent: "did:web:b.example.com".into(),
        endpoint: Some("https://b.example.com/a2a".into()),
        capability: remote,
        updated_at_ms: 0,
        expires_at_ms: None,
    }]);
    let t = TestAgent::start(
        a2a_server::AgentBuilder::new("did:web:agent.example.com")
            .capability(brief, a2a_server::handler::builtin::echo())
            .registry(Arc::new(registry)),
    )
    .await;
    let a = t.post("/a2a/fallback", json!({"target_capability": "generate_summary"})).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.body["requested_capability"], json!("generate_summary"));
    let options = a.body["fallback_options"].as_array().expect("options");
    assert_eq!(options.len(), 2, "{options:?}");
    assert_eq!(options[0]["relation"], json!("same"));
    assert_eq!(options[0]["agent"], json!("did:web:b.example.com"));
    assert_eq!(options[1]["relation"], json!("degraded"));
    assert_eq!(options[1]["capability"], json!("generate_brief_summary"));
    assert_eq!(options[1]["estimated_cost"], json!(0.02));
    // The same options come with the capability-mismatch error.
    let n = t.negotiate("generate_summary", json!({"type": "object"})).await;
    assert_eq!(n.status, StatusCode::NOT_FOUND);
    assert_eq!(n.code(), "no_matching_capability");
    assert_eq!(n.body["fallback_options"], a.body["fallback_options"]);
}

#[tokio::test]
async fn region_restricted_capability_needs_a_matching_region_header() {
    let mut pay = crate::common::decl("process_payment", json!({"type": "object"}));
    pay.region_restriction = vec!["eu-west-1".into()];
    let t = TestAgent::start(
        a2a_server::AgentBuilder::new("did:web:agent.example.com")
            .capability(pay, a2a_server::handler::builtin::echo()),
    )
    .await;
    let d = t.send(t.http.request(Method::OPTIONS, t.url("/a2a"))).await;
    assert_eq!(d.header("a2a-region"), Some(r#"{"process_payment":["eu-west-1"]}"#));
    let body = json!({"target_capability": "process_payment", "proposed_schema": {"type": "object"}});
    let refused = t.post("/a2a/negotiate", body.clone()).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(refused.code(), "region_restricted");
    assert!(refused.body["fallback_options"].is_array());
    let ok = t.send(t.req(Method::POST, "/a2a/negotiate").header("A2A-Region", "eu-west-1").json(&body)).await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.body);
    assert_eq!(ok.header("a2a-region"), Some("eu-west-1"));
}

#[tokio::test]
async fn metrics_count_requests_by_step_without_ids_in_labels() {
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0)))).await;
    let neg = t.negotiated("submit_report", report_schema()).await;
    let exe = t.executed(&neg, json!({"title": "t", "timestamp": "2026-11-29T21:00:00Z"})).await;
    assert_eq!(t.confirm(&exe).await.status, StatusCode::ACCEPTED);
    assert_eq!(t.result(&exe, 10_000).await.body["status"], json!("succeeded"));
    let _ = t.negotiate("no_such_thing", json!({"type": "object"})).await;
    let text = t.http.get(t.url("/metrics")).send().await.expect("metrics").text().await.expect("text");
    assert!(text.contains(r#"a2a_requests_total{step="negotiate",outcome="ok"} 1"#), "{text}");
    assert!(text.contains(r#"a2a_requests_total{step="negotiate",outcome="no_matching_capability"} 1"#), "{text}");
    assert!(
        text.contains(r#"a2a_executions_finished_total{capability="submit_report",status="succeeded"} 1"#),
        "{text}"
    );
    assert!(text.contains("a2a_request_duration_seconds_bucket"), "{text}");
    assert!(!text.contains("did:web:caller"), "a DID leaked into labels");
    assert!(!text.contains(&neg), "a negotiation id leaked into labels");
    assert!(!text.contains(&exe), "an execution id leaked into labels");
}
