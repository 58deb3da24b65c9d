//! Fallback (FB-4): when an agent cannot serve a capability, try the agents its registry names, accept a
//! degraded capability, or refuse — the caller's choice.
//!
//! Run with: `cargo run -p a2a-tests --example fallback`
//!
//! Agent A offers only `generate_brief_summary` (a degraded stand-in for `generate_summary`) and its registry names
//! agent B for `generate_summary`. The same call is made with each policy.

use std::sync::Arc;

use a2a_client::fallback::FallbackPolicy;
use a2a_client::{CallOptions, Client, Identity};
use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use a2a_server::registry::{MemoryRegistry, RegistryEntry};
use serde_json::{Value, json};

fn decl(name: &str, fallback_for: &[&str]) -> CapabilityDeclaration {
    CapabilityDeclaration {
        name: name.into(),
        description: format!("{name}, for the example"),
        auth_requirement: AuthRequirement::None,
        sub_capabilities: vec![],
        region_restriction: vec![],
        input_schema: json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        output_schema: None,
        estimated_cost: Some(if fallback_for.is_empty() { 0.05 } else { 0.02 }),
        estimated_latency_ms: None,
        fallback_for: fallback_for.iter().map(|s| (*s).to_owned()).collect(),
    }
}

async fn serve(agent: a2a_server::Agent) -> Result<String, Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/a2a", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, agent.router()).await });
    Ok(url)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let b = serve(
        a2a_server::AgentBuilder::new("did:web:b.example.com")
            .capability(
                decl("generate_summary", &[]),
                |_c: a2a_server::handler::ExecutionContext, p: Value| async move {
                    Ok(json!({"summary": p["text"], "by": "b, full summary"}))
                },
            )
            .build()?,
    )
    .await?;
    let registry = |with_b: bool| {
        let entries = if with_b {
            vec![RegistryEntry {
                agent: "did:web:b.example.com".into(),
                endpoint: Some(b.clone()),
                capability: decl("generate_summary", &[]),
                updated_at_ms: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64),
                expires_at_ms: None,
            }]
        } else {
            Vec::new()
        };
        Arc::new(MemoryRegistry::new(entries))
    };
    let agent_a = |with_b: bool| {
        a2a_server::AgentBuilder::new("did:web:a.example.com")
            .capability(
                decl("generate_brief_summary", &["generate_summary"]),
                |_c: a2a_server::handler::ExecutionContext, p: Value| async move {
                    Ok(json!({"summary": p["text"], "by": "a, at most 100 words"}))
                },
            )
            .registry(registry(with_b))
            .build()
    };
    let a_with_registry = serve(agent_a(true)?).await?;
    let a_alone = serve(agent_a(false)?).await?;

    let client = Client::builder(Identity::unsigned("did:web:newsroom.example.com")?).build()?;
    let payload = json!({"text": "The lift in building 3 is out of service until Monday."});
    for (label, url, policy) in [
        ("default (try other agents)", &a_with_registry, FallbackPolicy::default()),
        ("default, no other agent known", &a_alone, FallbackPolicy::default()),
        ("accept degraded", &a_alone, FallbackPolicy::accept_degraded()),
        ("refuse", &a_with_registry, FallbackPolicy::refuse()),
    ] {
        let opts = CallOptions::default().fallback(policy);
        match client.call_with(url, "generate_summary", payload.clone(), &opts).await {
            Ok(o) => {
                println!("{label}: {} ran {} (degraded: {}) -> {}", o.agent, o.capability, o.degraded, o.result["by"])
            }
            Err(e) => {
                let options: Vec<String> = e.fallback_options().iter().map(|o| o.capability.clone()).collect();
                println!("{label}: {} [{}]; options offered: {options:?}", e.code(), e.hint());
            }
        }
    }
    Ok(())
}
