//! The client as the way an agent's composite steps reach other agents ([`a2a_core::remote::RemoteAgents`],
//! CMP-10): the agent's binary gives one to `a2a_server::AgentBuilder::remote_agents_from`.

use std::sync::Arc;
use std::time::Duration;

use a2a_core::capability::CapabilityDeclaration;
use a2a_core::error::{ErrorCode, ErrorObject};
use a2a_core::keys::SigningKey;
use a2a_core::remote::{RemoteAgents, RemoteCall, RemoteExecution};
use a2a_core::wire::ResultResponse;

use crate::{Client, ClientError, ExecuteOptions, Execution, Identity, Negotiation, Wait};

/// A [`Client`] that runs composites' remote steps: NEGOTIATE (a negotiation is kept while fresh, for 5 minutes at
/// most), EXECUTE, CONFIRM, RESULT and CANCEL.
pub struct RemoteClient {
    client: Client,
    negotiations: moka::future::Cache<String, Arc<Negotiation>>,
}

impl RemoteClient {
    /// Remote steps run with `client`.
    pub fn new(client: Client) -> RemoteClient {
        RemoteClient {
            client,
            negotiations: moka::future::Cache::builder()
                .max_capacity(1024)
                .time_to_live(Duration::from_secs(300))
                .build(),
        }
    }

    /// The client of an agent: its DID, signing with its key (`key_id`, key) when it has one.
    pub fn for_agent(did: &str, key: Option<(&str, &SigningKey)>) -> Result<Arc<dyn RemoteAgents>, String> {
        let identity = match key {
            Some((key_id, key)) => Identity::new(did, key_id, key.clone()),
            None => Identity::unsigned(did),
        }
        .map_err(|e| e.to_string())?;
        let client = Client::builder(identity).build().map_err(|e| e.to_string())?;
        Ok(Arc::new(RemoteClient::new(client)))
    }

    async fn negotiation(
        &self,
        endpoint: &str,
        capability: &str,
        timeout_ms: Option<u64>,
    ) -> Result<Arc<Negotiation>, ErrorObject> {
        let key = format!("{endpoint} {capability} {timeout_ms:?}");
        if let Some(n) = self.negotiations.get(&key).await
            && n.is_fresh()
        {
            return Ok(n);
        }
        let n = self
            .client
            .negotiate_with(endpoint, capability, None, timeout_ms, false)
            .await
            .map_err(|e| error_object(&e))?;
        let n = Arc::new(n);
        self.negotiations.insert(key, n.clone()).await;
        Ok(n)
    }
}

/// The error object a step reports for a client error: the other agent's own, or `agent_unavailable` /
/// `agent_timeout` when it could not be reached in time.
fn error_object(e: &ClientError) -> ErrorObject {
    if let Some(a) = e.agent_error() {
        return ErrorObject { code: a.code.clone(), message: a.message.clone(), details: a.details.clone() };
    }
    let code = match e.code() {
        "unreachable" => ErrorCode::AGENT_UNAVAILABLE,
        "timeout" | "deadline_exceeded" => ErrorCode::AGENT_TIMEOUT,
        other => ErrorCode(std::borrow::Cow::Owned(other.to_owned())),
    };
    ErrorObject { code, message: e.to_string(), details: None }
}

struct Started {
    client: Client,
    execution: Execution,
}

#[async_trait::async_trait]
impl RemoteExecution for Started {
    fn id(&self) -> &str {
        self.execution.id()
    }

    async fn confirm(&self) -> Result<(), ErrorObject> {
        self.client.confirm(&self.execution).await.map(|_| ()).map_err(|e| error_object(&e))
    }
}

#[async_trait::async_trait]
impl RemoteAgents for RemoteClient {
    async fn declaration(
        &self,
        endpoint: &str,
        did: Option<&str>,
        capability: &str,
    ) -> Result<Option<CapabilityDeclaration>, ErrorObject> {
        let caps = self.client.capabilities(endpoint).await.map_err(|e| error_object(&e))?;
        if let Some(d) = did
            && caps.document.agent.id != d
        {
            return Err(ErrorObject {
                code: ErrorCode::AGENT_UNAVAILABLE,
                message: format!("the agent at {endpoint} is {}, not {d}", caps.document.agent.id),
                details: None,
            });
        }
        Ok(caps.declaration(capability).cloned())
    }

    async fn execute(&self, call: RemoteCall<'_>) -> Result<Box<dyn RemoteExecution>, ErrorObject> {
        let neg = self.negotiation(call.endpoint, call.capability, call.timeout_ms).await?;
        let opts = ExecuteOptions::default().idempotency_key(call.idempotency_key.to_owned());
        let execution = self.client.execute(&neg, call.input, &opts).await.map_err(|e| error_object(&e))?;
        Ok(Box::new(Started { client: self.client.clone(), execution }))
    }

    async fn result(&self, endpoint: &str, execution_id: &str, wait: Duration) -> Result<ResultResponse, ErrorObject> {
        self.client.result(endpoint, execution_id, Wait::For(wait)).await.map_err(|e| error_object(&e))
    }

    async fn cancel(&self, endpoint: &str, execution_id: &str) -> Result<(), ErrorObject> {
        self.client.cancel(endpoint, execution_id).await.map(|_| ()).map_err(|e| error_object(&e))
    }
}
