//! `a2a a2a1x card URL` and `a2a a2a1x call URL SKILL --data JSON [--stream]`: Agent2Agent 1.x agents from the
//! command line (`spec/PROTOCOL.md` §20.8).

use a2a_core::a2a1x::StreamResponse;
use serde_json::json;

use super::net::read_json_arg;
use super::output::Output;
use super::{A2a1xCommand, Global};
use crate::a2a1x::{A2a1xClient, A2a1xError, A2a1xOptions, CardTrust, result_of};

fn fail(out: &Output, g: &Global, e: &A2a1xError) -> i32 {
    let code = match e {
        A2a1xError::Invalid(_) => "invalid_input",
        A2a1xError::Unreachable { .. } => "unreachable",
        A2a1xError::Timeout { .. } => "timeout",
        A2a1xError::Protocol { .. } => "protocol_error",
        A2a1xError::Card { .. } => "card_not_acceptable",
        A2a1xError::Refused { .. } => "refused",
        A2a1xError::TaskFailed { .. } => "task_failed",
        A2a1xError::Unsupported { .. } => "unsupported_task_state",
    };
    out.failure(code, &e.to_string(), &hint(g, e));
    e.exit_code()
}

/// What to try when a card's signing DID could not be resolved because it is a loopback `did:web:localhost...` DID
/// (a local agent such as `a2a-server --demo`): such DIDs resolve over plain HTTP only when asked (BR-6).
fn hint(g: &Global, e: &A2a1xError) -> Vec<String> {
    match e {
        A2a1xError::Card { reason, .. }
            if !g.allow_http_loopback_dids
                && reason.contains("did_resolution_failed")
                && (reason.contains("did:web:localhost") || reason.contains("did:web:127.0.0.1")) =>
        {
            vec![
                "hint: the card is signed by a loopback did:web DID (a local agent); pass --allow-http-loopback-dids \
                 to resolve it over plain HTTP (local development only)"
                    .to_owned(),
            ]
        }
        _ => Vec::new(),
    }
}

fn client(g: &Global, require_signature: bool) -> Result<A2a1xClient, A2a1xError> {
    let mut headers = Vec::new();
    if let Some(k) = &g.api_key {
        headers.push(("A2A-Api-Key".to_owned(), k.clone()));
    }
    if let Some(t) = &g.bearer {
        headers.push(("Authorization".to_owned(), format!("Bearer {t}")));
    }
    if let Some(d) = &g.did {
        headers.push(("A2A-Sender-ID".to_owned(), d.clone()));
    }
    A2a1xClient::new(A2a1xOptions {
        require_signature,
        resolver: None,
        allow_http_loopback_dids: g.allow_http_loopback_dids,
        request_timeout: g.timeout,
        headers,
    })
}

/// Runs an `a2a a2a1x` command and returns the exit code.
pub(crate) async fn run(out: &Output, g: &Global, cmd: A2a1xCommand) -> i32 {
    match cmd {
        A2a1xCommand::Card { url, require_signature } => {
            let c = match client(g, require_signature) {
                Ok(c) => c,
                Err(e) => return fail(out, g, &e),
            };
            let agent = match c.discover(&url).await {
                Ok(a) => a,
                Err(e) => return fail(out, g, &e),
            };
            let trust = match &agent.trust {
                CardTrust::Verified { kid } => json!({"signed": true, "kid": kid}),
                CardTrust::Unsigned => json!({"signed": false}),
            };
            if out.json {
                out.json_doc(&json!({"card_url": agent.card_url, "trust": trust, "streaming": agent.streaming,
                                     "capabilities": agent.capabilities, "card": agent.card}));
            } else {
                out.line(format!("{} ({})", agent.card["name"].as_str().unwrap_or("(no name)"), agent.card_url));
                match &agent.trust {
                    CardTrust::Verified { kid } => out.line(format!("signature: verified ({kid})")),
                    CardTrust::Unsigned => out.line("signature: none (the card is unsigned)"),
                }
                out.line(format!("streaming: {}", agent.streaming));
                for c in &agent.capabilities {
                    out.line(format!("  {}  [{}]  {}", c.name, c.auth_requirement.as_str(), c.description));
                }
            }
            0
        }
        A2a1xCommand::Call { url, skill, data, stream, require_signature, deadline } => {
            let payload = match read_json_arg("--data", &data) {
                Ok(p) => p,
                Err(e) => {
                    out.failure("invalid_input", &e.to_string(), &[]);
                    return 2;
                }
            };
            let c = match client(g, require_signature) {
                Ok(c) => c,
                Err(e) => return fail(out, g, &e),
            };
            let agent = match c.discover(&url).await {
                Ok(a) => a,
                Err(e) => return fail(out, g, &e),
            };
            if !agent.capabilities.iter().any(|c| c.name == skill) {
                let names: Vec<&str> = agent.capabilities.iter().map(|c| c.name.as_str()).collect();
                let e = A2a1xError::Invalid(format!(
                    "{} has no skill {skill:?}; its skills are: {}",
                    agent.card_url,
                    names.join(", ")
                ));
                return fail(out, g, &e);
            }
            let task = if stream {
                let on_event = |ev: &StreamResponse| {
                    if out.json {
                        return;
                    }
                    match ev {
                        StreamResponse::Task(t) => out.note(format!("task {}: {}", t.id, t.status.state.as_str())),
                        StreamResponse::StatusUpdate(u) => out.note(format!("status: {}", u.status.state.as_str())),
                        StreamResponse::ArtifactUpdate(u) => {
                            for p in &u.artifact.parts {
                                if let Some(t) = &p.text {
                                    out.note(format!("artifact {}: {t}", u.artifact.artifact_id));
                                }
                            }
                        }
                        StreamResponse::Message(_) => out.note("message"),
                    }
                };
                tokio::time::timeout(deadline, c.stream(&agent, &skill, payload, on_event))
                    .await
                    .unwrap_or(Err(A2a1xError::Timeout { url: agent.card_url.clone(), after: deadline }))
            } else {
                c.call(&agent, &skill, payload, Some(deadline)).await
            };
            let task = match task {
                Ok(t) => t,
                Err(e) => return fail(out, g, &e),
            };
            match result_of(&task) {
                Ok(result) if out.json => {
                    out.json_doc(&json!({"task_id": task.id, "state": task.status.state, "result": result}));
                    0
                }
                Ok(result) => {
                    out.line(serde_json::to_string_pretty(&result).unwrap_or_default());
                    0
                }
                Err(A2a1xError::TaskFailed { state, .. }) if !state.is_terminal() => {
                    fail(out, g, &A2a1xError::Timeout { url: agent.card_url, after: deadline })
                }
                Err(e) => fail(out, g, &e),
            }
        }
    }
}
