//! Run with: `cargo run -p a2a-server --example embed`
//!
//! An existing axum application that gains an A2A agent: its own `/health` route stays, the agent's routes are nested
//! under `/agents/inventory`, and the agent offers one capability, `query_inventory`, whose handler reads the
//! validated payload and returns a JSON result.
//!
//! Try it:
//! ```text
//! curl -si -X OPTIONS http://127.0.0.1:8081/agents/inventory/a2a
//! curl -s http://127.0.0.1:8081/agents/inventory/a2a/capabilities
//! ```

use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use a2a_server::AgentBuilder;
use a2a_server::handler::{ExecutionContext, HandlerError};
use serde_json::{Value, json};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let query_inventory = CapabilityDeclaration {
        name: "query_inventory".into(),
        description: "Returns the stock level of a product by SKU.".into(),
        auth_requirement: AuthRequirement::None,
        sub_capabilities: vec![],
        region_restriction: vec![],
        input_schema: json!({
            "type": "object",
            "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"}},
            "required": ["sku"]
        }),
        output_schema: Some(json!({
            "type": "object",
            "properties": {"sku": {"type": "string"}, "in_stock": {"type": "number"}},
            "required": ["sku", "in_stock"]
        })),
        estimated_cost: Some(0.0),
        estimated_latency_ms: Some(2),
        fallback_for: vec![],
    };
    let agent = AgentBuilder::new("did:web:localhost%3A8081:agents:inventory")
        .name("Inventory desk")
        .capability(query_inventory, |_ctx: ExecutionContext, payload: Value| async move {
            let sku = payload["sku"].as_str().ok_or_else(|| HandlerError::new("sku must be a string"))?;
            // A real agent would look the SKU up; the example derives a number from it.
            let in_stock = sku.bytes().map(u32::from).sum::<u32>() % 100;
            Ok(json!({"sku": sku, "in_stock": in_stock}))
        })
        .build()?;
    let app = axum::Router::new()
        .route("/health", axum::routing::get(|| async { "ok" }))
        .nest("/agents/inventory", agent.router())
        .merge(agent.metrics_router());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:8081").await?;
    println!("serving http://127.0.0.1:8081/agents/inventory/a2a (and /health, /metrics)");
    axum::serve(listener, app).await?;
    Ok(())
}
