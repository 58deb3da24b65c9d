//! Fallback (§11, FB-4): another agent from the registry, a degraded capability, or a refusal — as the caller chooses.

use std::sync::Arc;

use a2a_client::fallback::FallbackPolicy;
use a2a_client::{CallOptions, ClientError};
use a2a_core::wire::FallbackRelation;
use a2a_server::AgentBuilder;
use a2a_server::handler::ExecutionContext;
use a2a_server::registry::{MemoryRegistry, RegistryEntry};
use serde_json::{Value, json};

use crate::common::{TestAgent, client, dead_url, decl};

fn text_schema() -> Value {
    json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
}

/// Agent B offers `generate_summary` itself.
async fn agent_b() -> TestAgent {
    let builder = AgentBuilder::new("did:web:b.example.com")
        .capability(decl("generate_summary", text_schema()), |_c: ExecutionContext, p: Value| async move {
            Ok(json!({"summary": p["text"], "by": "b"}))
        });
    TestAgent::start(builder).await
}

/// Agent A offers only `generate_brief_summary` (fallback for `generate_summary`); its registry names B (or a dead
/// agent) for `generate_summary`.
async fn agent_a(b_url: Option<&str>) -> TestAgent {
    let mut brief = decl("generate_brief_summary", text_schema());
    brief.fallback_for = vec!["generate_summary".into()];
    brief.estimated_cost = Some(0.02);
    let entries = b_url
        .map(|u| RegistryEntry {
            agent: "did:web:b.example.com".into(),
            endpoint: Some(u.to_owned()),
            capability: decl("generate_summary", text_schema()),
            updated_at_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            expires_at_ms: None,
        })
        .into_iter()
        .collect();
    let builder = AgentBuilder::new("did:web:a.example.com")
        .capability(brief, |_c: ExecutionContext, p: Value| async move {
            Ok(json!({"summary": p["text"], "by": "a", "brief": true}))
        })
        .registry(Arc::new(MemoryRegistry::new(entries)));
    TestAgent::start(builder).await
}

#[tokio::test]
async fn by_default_the_same_capability_is_called_at_another_agent_named_by_the_registry() {
    let b = agent_b().await;
    let a = agent_a(Some(&b.endpoint)).await;
    let o = client().call(&a.endpoint, "generate_summary", json!({"text": "hello"})).await.expect("served by b");
    assert_eq!(o.result, json!({"summary": "hello", "by": "b"}));
    assert_eq!(
        (o.endpoint.as_str(), o.agent.as_str(), o.degraded),
        (b.endpoint.as_str(), "did:web:b.example.com", false)
    );
    assert_eq!(o.fallback.as_ref().and_then(|f| f.relation), Some(FallbackRelation::Same));
    assert_eq!(o.trace.attempts.len(), 2, "{:?}", o.trace.attempts);
}

#[tokio::test]
async fn the_default_policy_never_degrades_silently() {
    let a = agent_a(None).await;
    let e = client().call(&a.endpoint, "generate_summary", json!({"text": "hello"})).await.expect_err("refused");
    match &e {
        ClientError::NoMatchingCapability { capability, fallback_options, .. } => {
            assert_eq!(capability, "generate_summary");
            assert_eq!(fallback_options.len(), 1);
            assert_eq!(fallback_options[0].capability, "generate_brief_summary");
            assert_eq!(fallback_options[0].relation, Some(FallbackRelation::Degraded));
        }
        other => panic!("expected NoMatchingCapability, got {other:?}"),
    }
    assert!(e.hint().contains("accept-degraded"), "{}", e.hint());
}

#[tokio::test]
async fn accept_degraded_uses_the_degraded_capability_and_says_so() {
    let a = agent_a(None).await;
    let opts = CallOptions::default().fallback(FallbackPolicy::accept_degraded());
    let o =
        client().call_with(&a.endpoint, "generate_summary", json!({"text": "hello"}), &opts).await.expect("degraded");
    assert_eq!(o.result["brief"], json!(true));
    assert_eq!(
        (o.capability.as_str(), o.requested_capability.as_str(), o.degraded),
        ("generate_brief_summary", "generate_summary", true)
    );
}

#[tokio::test]
async fn refuse_reports_no_matching_capability_with_every_option_and_tries_nothing() {
    let b = agent_b().await;
    let a = agent_a(Some(&b.endpoint)).await;
    let opts = CallOptions::default().fallback(FallbackPolicy::refuse());
    let e =
        client().call_with(&a.endpoint, "generate_summary", json!({"text": "x"}), &opts).await.expect_err("refused");
    assert_eq!(e.code(), "no_matching_capability");
    let caps: Vec<&str> = e.fallback_options().iter().map(|o| o.capability.as_str()).collect();
    assert_eq!(caps, ["generate_summary", "generate_brief_summary"]);
    assert!(matches!(&e, ClientError::NoMatchingCapability { tried, .. } if tried.len() == 1));
}

#[tokio::test]
async fn a_dead_alternative_is_skipped_for_the_next_option() {
    let a = agent_a(Some(&dead_url())).await;
    let opts = CallOptions::default().fallback(FallbackPolicy::accept_degraded());
    let o = client().call_with(&a.endpoint, "generate_summary", json!({"text": "x"}), &opts).await.expect("degraded");
    assert!(o.degraded);
    assert_eq!(o.trace.attempts.len(), 3, "{:?}", o.trace.attempts);
    // Without degradation allowed, the dead alternative is the last try and the first agent's refusal is reported.
    let e = client().call(&a.endpoint, "generate_summary", json!({"text": "x"})).await.expect_err("nothing left");
    assert!(
        matches!(&e, ClientError::NoMatchingCapability { cause, tried, .. }
        if matches!(**cause, ClientError::CapabilityNotOffered { .. }) && tried.len() == 2),
        "{e:?}"
    );
}

#[tokio::test]
async fn the_fallback_step_lists_the_options() {
    let b = agent_b().await;
    let a = agent_a(Some(&b.endpoint)).await;
    let f = client().fallback(&a.endpoint, "generate_summary", Some("needs 300 words")).await.expect("fallback");
    assert_eq!(f.requested_capability, "generate_summary");
    assert_eq!(f.fallback_options[0].endpoint.as_deref(), Some(b.endpoint.as_str()));
    assert_eq!(f.fallback_options[1].relation, Some(FallbackRelation::Degraded));
}
