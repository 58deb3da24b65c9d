//! How an agent reaches other agents for the remote steps of its composite capabilities (§19, CMP-8, CMP-10):
//! the handshake with another agent, as a trait that the agent's runtime calls and a client implements
//! (`a2a_client::Client` does; the agent's binary wires it in), so that the agent library needs no HTTP client.

use std::time::Duration;

use crate::capability::CapabilityDeclaration;
use crate::error::ErrorObject;
use crate::wire::ResultResponse;

/// One sub-execution to start at another agent.
#[derive(Debug, Clone, Copy)]
pub struct RemoteCall<'a> {
    /// The agent's endpoint (as [`endpoint_url`] gives it).
    pub endpoint: &'a str,
    /// The capability.
    pub capability: &'a str,
    /// Its input.
    pub input: &'a serde_json::Value,
    /// The `timeout_ms` to negotiate.
    pub timeout_ms: Option<u64>,
    /// The `Idempotency-Key` of EXECUTE: a re-run of the same step sends the same (CMP-16).
    pub idempotency_key: &'a str,
}

/// The handshake with other agents (CMP-10). Errors are the other agent's error objects, or `agent_unavailable` /
/// `agent_timeout` when it could not be reached.
#[async_trait::async_trait]
pub trait RemoteAgents: Send + Sync {
    /// The declaration of `capability` at the agent at `endpoint` (`None`: it does not offer it), after checking that
    /// the agent is `did` when one is given (CMP-8).
    async fn declaration(
        &self,
        endpoint: &str,
        did: Option<&str>,
        capability: &str,
    ) -> Result<Option<CapabilityDeclaration>, ErrorObject>;

    /// NEGOTIATE (a fresh negotiation may be reused) and EXECUTE: nothing runs at the other agent before
    /// [`RemoteExecution::confirm`] (EXE-5).
    async fn execute(&self, call: RemoteCall<'_>) -> Result<Box<dyn RemoteExecution>, ErrorObject>;

    /// RESULT of `execution_id`, waiting for a terminal state up to `wait`.
    async fn result(&self, endpoint: &str, execution_id: &str, wait: Duration) -> Result<ResultResponse, ErrorObject>;

    /// CANCEL of `execution_id`.
    async fn cancel(&self, endpoint: &str, execution_id: &str) -> Result<(), ErrorObject>;
}

/// A sub-execution EXECUTE answered, not yet confirmed.
#[async_trait::async_trait]
pub trait RemoteExecution: Send + Sync {
    /// Its `execution_id`.
    fn id(&self) -> &str;

    /// CONFIRM: the other agent starts it.
    async fn confirm(&self) -> Result<(), ErrorObject>;
}

/// An agent's A2A endpoint URL from `s`: `http` or `https`, a host, no credentials, query or fragment, its path
/// ending in `/a2a` (appended when it does not: TR-2). `Err` says why `s` is not one.
pub fn endpoint_url(s: &str) -> Result<url::Url, String> {
    let bad = |why: &str| format!("{s:?} is not an agent URL: {why}");
    let mut url =
        url::Url::parse(s.trim()).map_err(|e| bad(&format!("{e} (write e.g. https://agent.example.com/a2a)")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("the scheme must be http or https"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("it has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("credentials in the URL are not supported; use --api-key or --bearer"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("an endpoint has no query or fragment"));
    }
    let path = url.path().trim_end_matches('/').to_owned();
    let path = if path.ends_with("/a2a") { path } else { format!("{path}/a2a") };
    url.set_path(&path);
    Ok(url)
}
