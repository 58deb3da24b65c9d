//! The demo agent of `a2a-server --demo`: a fresh identity, a few sample capabilities that show every step of the
//! protocol, and the ready-to-paste commands a newcomer needs.

use std::time::Duration;

use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use serde_json::{Value, json};

use crate::handler::{ExecutionContext, HandlerError};
use crate::{AgentBuilder, ApiKey};

/// The API key of the demo's `process_payment` capability.
pub const DEMO_API_KEY: &str = "demo-key-not-secret";

/// What `a2a-server --demo` says when `REDIS_URL` is set: it does not use it.
pub const REDIS_URL_IGNORED: &str = "REDIS_URL is set, but the demo does not use it: the demo keeps its state in \
    memory (one process, a fresh identity). To run an agent on Redis, serve a configuration: REDIS_URL=... a2a-server \
    --config agent.toml (or [store] redis_url in agent.toml).";

/// The sender the printed commands use.
pub const DEMO_SENDER: &str = "did:web:caller.example.com";

fn decl(name: &str, description: &str, auth: AuthRequirement, input_schema: Value) -> CapabilityDeclaration {
    CapabilityDeclaration {
        name: name.into(),
        description: description.into(),
        auth_requirement: auth,
        sub_capabilities: vec![],
        region_restriction: vec![],
        input_schema,
        output_schema: None,
        estimated_cost: None,
        estimated_latency_ms: None,
        fallback_for: vec![],
    }
}

/// Adds the demo capabilities to a builder.
pub fn capabilities(builder: AgentBuilder) -> AgentBuilder {
    let echo = decl(
        "echo_message",
        "Returns the payload it is given.",
        AuthRequirement::None,
        json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
    );
    let report = CapabilityDeclaration {
        estimated_cost: Some(0.01),
        estimated_latency_ms: Some(5),
        ..decl(
            "submit_report",
            "Files a report. Needs a title and a timestamp: a proposal without the timestamp is tightened to require it.",
            AuthRequirement::None,
            json!({"type": "object",
                   "properties": {"title": {"type": "string", "minLength": 1},
                                  "timestamp": {"type": "string", "format": "date-time"}},
                   "required": ["title", "timestamp"]}),
        )
    };
    let brief = CapabilityDeclaration {
        estimated_cost: Some(0.02),
        estimated_latency_ms: Some(120),
        fallback_for: vec!["generate_summary".into()],
        ..decl(
            "generate_brief_summary",
            "Summarises a text in at most 100 words (a degraded stand-in for generate_summary).",
            AuthRequirement::None,
            json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        )
    };
    let add = CapabilityDeclaration {
        output_schema: Some(json!({"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]})),
        ..decl(
            "add_numbers",
            "Adds two numbers.",
            AuthRequirement::None,
            json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
        )
    };
    let slow = decl(
        "run_slow_task",
        "Sleeps for `seconds` (at most 600) and then answers: try long-poll, timeouts and CANCEL with it.",
        AuthRequirement::None,
        json!({"type": "object", "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 600}}, "required": ["seconds"]}),
    );
    let pay = CapabilityDeclaration {
        region_restriction: vec!["eu-west-1".into()],
        ..decl(
            "process_payment",
            "Charges an amount (demo: nothing is charged). Needs the API key and `A2A-Region: eu-west-1`.",
            AuthRequirement::ApiKey,
            json!({"type": "object", "properties": {"amount": {"type": "number", "minimum": 0}, "currency": {"type": "string", "enum": ["EUR", "USD"]}},
                   "required": ["amount", "currency"]}),
        )
    };
    let notarize = decl(
        "notarize_message",
        "Countersigns a message with the caller's verified DID. Callers must sign every request (did_auth); the demo \
         resolves did:web:localhost DIDs over plain HTTP.",
        AuthRequirement::DidAuth,
        json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
    );
    let stream = decl(
        "stream_summary",
        "Summarises a text word by word: each word of the summary (at most 100) is a progress event for callers that \
         stream RESULT (`A2A-Stream: true`, spec §18), `delay_ms` apart (default 100, at most 1000); the result is the \
         whole summary.",
        AuthRequirement::None,
        json!({"type": "object",
               "properties": {"text": {"type": "string"}, "delay_ms": {"type": "number", "multipleOf": 1, "minimum": 0, "maximum": 1000}},
               "required": ["text"]}),
    );
    builder
        .streaming(crate::streaming::StreamConfig { enabled: true, ..Default::default() })
        .capability(echo, crate::handler::builtin::echo())
        .capability(report, |ctx: ExecutionContext, p: Value| async move {
            Ok(json!({"report_id": format!("r-{}", &ctx.execution_id[ctx.execution_id.len().saturating_sub(8)..]),
                      "title": p["title"], "filed_at": p["timestamp"]}))
        })
        .capability(brief, |_ctx: ExecutionContext, p: Value| async move {
            let text = p["text"].as_str().unwrap_or_default();
            let words: Vec<&str> = text.split_whitespace().collect();
            let summary = words.iter().take(100).copied().collect::<Vec<_>>().join(" ");
            Ok(json!({"summary": summary, "truncated": words.len() > 100}))
        })
        .capability(add, |_ctx: ExecutionContext, p: Value| async move {
            match (p["a"].as_f64(), p["b"].as_f64()) {
                (Some(a), Some(b)) => Ok(json!({"sum": a + b})),
                _ => Err(HandlerError::new("a and b must be numbers")),
            }
        })
        .capability(slow, |ctx: ExecutionContext, p: Value| async move {
            let secs = p["seconds"].as_f64().unwrap_or(0.0).clamp(0.0, 600.0);
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs_f64(secs)) => Ok(json!({"slept_seconds": secs})),
                () = ctx.cancel.cancelled() => Err(HandlerError::new("stopped")),
            }
        })
        .capability(pay, |ctx: ExecutionContext, p: Value| async move {
            Ok(json!({"charged": false, "amount": p["amount"], "currency": p["currency"], "execution_id": ctx.execution_id,
                      "note": "demo agent: nothing was charged"}))
        })
        .capability(stream, |ctx: ExecutionContext, p: Value| async move {
            let text = p["text"].as_str().unwrap_or_default();
            let delay = Duration::from_millis(p["delay_ms"].as_u64().unwrap_or(100).min(1000));
            let words: Vec<&str> = text.split_whitespace().take(100).collect();
            for (i, w) in words.iter().enumerate() {
                if i > 0 && !delay.is_zero() {
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        () = ctx.cancel.cancelled() => return Err(HandlerError::new("stopped")),
                    }
                }
                // Past the stream's limits the words are still summarised; only their events are dropped (STR-8).
                let _ = ctx.events.emit(json!({"index": i, "word": w})).await;
            }
            Ok(json!({"summary": words.join(" "), "words": words.len()}))
        })
        .capability(notarize, |ctx: ExecutionContext, p: Value| async move {
            Ok(json!({"message": p["message"], "signed_by": ctx.sender, "verified": ctx.sender_verified,
                      "execution_id": ctx.execution_id}))
        })
        .composite(
            decl(
                "file_brief_report",
                "Summarises a text (generate_brief_summary), then files the summary as a report (submit_report): a \
                 composite capability (spec §19); RESULT reports each step.",
                AuthRequirement::None,
                json!({"type": "object",
                       "properties": {"text": {"type": "string"}, "timestamp": {"type": "string", "format": "date-time"}},
                       "required": ["text", "timestamp"]}),
            ),
            serde_json::from_value(json!({"steps": [
                {"id": "summarize", "capability": "generate_brief_summary", "input": {"text": "/input/text"}},
                {"id": "file", "capability": "submit_report",
                 "input": {"title": "/steps/summarize/summary", "timestamp": "/input/timestamp"}}],
                "output": {"report": "/steps/file", "summary": "/steps/summarize/summary"}}))
            .expect("the demo pipeline is well-formed"),
        )
        .api_key(ApiKey::new(DEMO_API_KEY))
}

/// The text the demo prints at start: its identity and one ready-to-paste command per step.
pub fn banner(did: &str, base: &str) -> String {
    let h = format!("-H 'A2A-Version: 0.3' -H 'A2A-Sender-ID: {DEMO_SENDER}' -H 'Content-Type: application/json'");
    format!(
        r#"A2A demo agent (protocol 0.3, embedded in-memory store)
  DID        {did}
  endpoint   {base}/a2a
  DID doc    {base}/.well-known/did.json
  metrics    {base}/metrics
  A2A 1.x    {base}/.well-known/agent-card.json (the bridge, spec §20)
  MCP        {base}/mcp (Streamable HTTP: the capabilities as MCP tools, spec §21)
  API key    {DEMO_API_KEY}   (for process_payment)

Try the handshake (paste into a shell; each line is one step):

# 1. DISCOVER: who are you, what can you do?
curl -si -X OPTIONS {base}/a2a

# 2. The full capability declarations
curl -s {base}/a2a/capabilities

# 3. NEGOTIATE: propose {{title}}; the agent tightens it to {{title, timestamp}}
NEG=$(curl -s -X POST {base}/a2a/negotiate {h} -d '{{"target_capability":"submit_report","proposed_schema":{{"type":"object","properties":{{"title":{{"type":"string"}}}},"required":["title"]}},"timeout_ms":30000}}' | sed -E 's/.*"negotiation_id":"([^"]+)".*/\1/'); echo "negotiation: $NEG"

# 4. EXECUTE: send the payload (nothing runs yet)
EXE=$(curl -s -X POST {base}/a2a/execute {h} -H "A2A-Negotiation-ID: $NEG" -H 'Idempotency-Key: demo-1' -d '{{"title":"Lift 3 out of service","timestamp":"2026-11-29T21:00:00Z"}}' | sed -E 's/.*"execution_id":"([^"]+)".*/\1/'); echo "execution: $EXE"

# 5. CONFIRM: start the work (answers at once)
curl -s -X POST {base}/a2a/confirm {h} -d "{{\"execution_id\":\"$EXE\"}}"; echo

# 6. RESULT: long-poll for up to 5 s
curl -s "{base}/a2a/result/$EXE?wait_ms=5000" {h}; echo

# STREAM (spec §18): the words of a summary as they are produced, as Server-Sent Events (resume a dropped stream
# with -H 'Last-Event-ID: <last id seen>')
NEG2=$(curl -s -X POST {base}/a2a/negotiate {h} -d '{{"target_capability":"stream_summary","proposed_schema":{{"type":"object","properties":{{"text":{{"type":"string"}}}},"required":["text"]}}}}' | sed -E 's/.*"negotiation_id":"([^"]+)".*/\1/'); EXE2=$(curl -s -X POST {base}/a2a/execute {h} -H "A2A-Negotiation-ID: $NEG2" -d '{{"text":"the lift on floor three is out of service until monday"}}' | sed -E 's/.*"execution_id":"([^"]+)".*/\1/'); curl -s -X POST {base}/a2a/confirm {h} -d "{{\"execution_id\":\"$EXE2\"}}" >/dev/null
curl -sN {base}/a2a/result/$EXE2 {h} -H 'A2A-Stream: true'
# A composite capability (summarize, then file a report): one handshake, each step reported in RESULT
NEG=$(curl -s -X POST {base}/a2a/negotiate {h} -d '{{"target_capability":"file_brief_report","proposed_schema":{{"type":"object","properties":{{"text":{{"type":"string"}},"timestamp":{{"type":"string","format":"date-time"}}}},"required":["text","timestamp"]}}}}' | sed -E 's/.*"negotiation_id":"([^"]+)".*/\1/'); EXE=$(curl -s -X POST {base}/a2a/execute {h} -H "A2A-Negotiation-ID: $NEG" -d '{{"text":"Lift 3 is out of service until Monday","timestamp":"2026-11-29T21:00:00Z"}}' | sed -E 's/.*"execution_id":"([^"]+)".*/\1/'); curl -s -X POST {base}/a2a/confirm {h} -d "{{\"execution_id\":\"$EXE\"}}" >/dev/null; curl -s "{base}/a2a/result/$EXE?wait_ms=5000" {h}; echo

# A2A 1.x (spec §20): the Agent Card an a2a-sdk client reads, then SendMessage over JSON-RPC to the echo skill
curl -s {base}/.well-known/agent-card.json | head -c 1200; echo
curl -s -X POST {base}/a2a1x/jsonrpc -H 'Content-Type: application/json' -d '{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"message":{{"messageId":"demo-1x-1","role":"ROLE_USER","parts":[{{"data":{{"message":"hello from A2A 1.x"}}}}],"metadata":{{"skill":"echo_message"}}}}}}}}'; echo

# MCP (spec §21): call a capability as an MCP tool (an MCP client sends the same JSON-RPC)
curl -s -X POST {base}/mcp -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-11-25' -d '{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"add_numbers","arguments":{{"a":2,"b":3}}}}}}'; echo

# FALLBACK: ask for a capability this agent does not offer
curl -s -X POST {base}/a2a/fallback {h} -d '{{"target_capability":"generate_summary"}}'; echo

# A schema-rule violation gets a clear message (never a bare 400)
curl -s -X POST {base}/a2a/negotiate {h} -d '{{"target_capability":"submit_report","proposed_schema":{{"type":"object","properties":{{"title":{{"type":"string","nullable":true}}}},"required":["title","author"]}}}}'; echo
"#
    )
}
