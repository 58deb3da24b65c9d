//! Pre-warming known peers at start-up (CLI-1): DISCOVER and NEGOTIATE ahead of time, so that the first
//! real call of each peer skips both (its agreed schema comes from the cache).
//!
//! Run with: `cargo run -p a2a-tests --example prewarm`

use std::time::Instant;

use a2a_client::{Client, Identity, Peer};
use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use serde_json::{Value, json};

async fn agent(did: &str, capability: &str) -> Result<String, Box<dyn std::error::Error>> {
    let decl = CapabilityDeclaration {
        name: capability.into(),
        description: format!("{capability}, for the example"),
        auth_requirement: AuthRequirement::None,
        sub_capabilities: vec![],
        region_restriction: vec![],
        input_schema: json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        output_schema: None,
        estimated_cost: None,
        estimated_latency_ms: None,
        fallback_for: vec![],
    };
    let name = capability.to_owned();
    let agent = a2a_server::AgentBuilder::new(did)
        .capability(decl, move |_ctx: a2a_server::handler::ExecutionContext, p: Value| {
            let name = name.clone();
            async move { Ok(json!({"by": name, "text": p["text"]})) }
        })
        .build()?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/a2a", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, agent.router()).await });
    Ok(url)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let translate = agent("did:web:translate.example.com", "translate_text").await?;
    let summarize = agent("did:web:summarize.example.com", "summarize_text").await?;
    let client = Client::builder(Identity::unsigned("did:web:newsroom.example.com")?).build()?;

    let started = Instant::now();
    let peers = [
        Peer::new(&translate, "translate_text"),
        Peer::new(&summarize, "summarize_text"),
        Peer::new("http://127.0.0.1:9/a2a", "summarize_text"), // down: reported, and the others still warm up
    ];
    for (peer, outcome) in peers.iter().zip(client.prewarm(&peers).await) {
        match outcome {
            Ok(n) => {
                println!("warm: {} {} (negotiation {}, valid {:?})", peer.url, peer.capability, n.id(), n.valid_for)
            }
            Err(e) => println!("cold: {} {}: {e}", peer.url, peer.capability),
        }
    }
    println!("pre-warm took {:?}", started.elapsed());

    for (url, cap) in [(&translate, "translate_text"), (&summarize, "summarize_text")] {
        let o = client.call(url, cap, json!({"text": "bonjour"})).await?;
        println!(
            "{cap}: {} — DISCOVER cached: {}, NEGOTIATE cached: {}, {:?}",
            o.result, o.trace.discover_cached, o.trace.negotiation_cached, o.trace.total
        );
    }
    println!("{:?}", client.cache_stats());
    Ok(())
}
