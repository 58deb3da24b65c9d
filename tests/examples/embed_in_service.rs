//! Embedding the client in a service: an axum service whose `POST /reports` files each report with an A2A agent,
//! sharing one `Client` (connection pool, caches) across requests.
//!
//! Run with: `cargo run -p a2a-tests --example embed_in_service`
//!
//! The example starts an agent (the `a2a-server` library) and the service on loopback, sends the service two
//! requests and prints what happened; point `AGENT_URL` at a real agent to use it instead.

use std::time::Duration;

use a2a_client::{CallOptions, Client, ClientConfig, ClientError, Identity};
use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Json, Router};
use serde_json::{Value, json};

#[derive(Clone)]
struct App {
    a2a: Client,
    agent_url: String,
}

/// `POST /reports`: one A2A call per request; the agent's typed errors become HTTP answers for our own callers.
async fn file_report(State(app): State<App>, Json(report): Json<Value>) -> (StatusCode, Json<Value>) {
    let opts = CallOptions::default().deadline(Duration::from_secs(5));
    match app.a2a.call_with(&app.agent_url, "submit_report", report, &opts).await {
        Ok(o) => (
            StatusCode::CREATED,
            Json(json!({"report": o.result, "execution": o.execution_id,
                                                   "cached": o.trace.negotiation_cached})),
        ),
        Err(e @ ClientError::Agent { .. }) if e.code() == "payload_invalid" => {
            (StatusCode::UNPROCESSABLE_ENTITY, Json(json!({"error": e.to_string(), "hint": e.hint()})))
        }
        Err(e) => (StatusCode::BAD_GATEWAY, Json(json!({"error": e.to_string(), "code": e.code()}))),
    }
}

async fn start_demo_agent() -> Result<String, Box<dyn std::error::Error>> {
    let decl = CapabilityDeclaration {
        name: "submit_report".into(),
        description: "Files a report; needs a title and a timestamp.".into(),
        auth_requirement: AuthRequirement::None,
        sub_capabilities: vec![],
        region_restriction: vec![],
        input_schema: json!({"type": "object", "required": ["title", "timestamp"],
            "properties": {"title": {"type": "string"}, "timestamp": {"type": "string", "format": "date-time"}}}),
        output_schema: None,
        estimated_cost: None,
        estimated_latency_ms: None,
        fallback_for: vec![],
    };
    let agent = a2a_server::AgentBuilder::new("did:web:reports.example.com")
        .capability(decl, |_ctx: a2a_server::handler::ExecutionContext, p: Value| async move {
            Ok(json!({"filed": true, "title": p["title"]}))
        })
        .build()?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/a2a", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, agent.router()).await });
    Ok(url)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let agent_url = match std::env::var("AGENT_URL") {
        Ok(u) => u,
        Err(_) => start_demo_agent().await?,
    };
    let a2a = Client::builder(Identity::unsigned("did:web:intake.example.com")?)
        .config(ClientConfig::default().with_step_timeout(Duration::from_secs(3)))
        .build()?;
    let app = Router::new().route("/reports", axum::routing::post(file_report)).with_state(App { a2a, agent_url });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let service = format!("http://{}/reports", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });

    let http = reqwest::Client::new();
    for body in [json!({"title": "Lift 3 out of service", "timestamp": "2026-11-29T21:00:00Z"}), json!({"title": 7})] {
        let resp = http.post(&service).json(&body).send().await?;
        println!("POST /reports {body} -> {} {}", resp.status(), resp.text().await?);
    }
    Ok(())
}
