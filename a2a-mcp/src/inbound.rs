//! `/mcp`: the capabilities an A2A surface offers, as MCP tools (spec §21.1–§21.8, MCP-1..MCP-29).
//!
//! A [`Front`] is an MCP server (the Streamable HTTP transport of the official SDK, `rmcp`, stateless) in front of one
//! A2A endpoint — the gateway's or the agent's own, over loopback. `tools/list` reads the endpoint's capabilities
//! document and answers one tool per capability the caller may use ([`tools`]); `tools/call` runs the handshake
//! with the A2A client SDK ([`call`]): NEGOTIATE with the tool's schema, the arguments checked against the agreed
//! schema, EXECUTE, CONFIRM and RESULT (streamed as MCP progress when the caller asked for progress), CANCEL when the
//! caller cancels. Refusals are tool errors carrying the §12 error body ([`errors`]).
//!
//! ```no_run
//! # async fn run() -> Result<(), String> {
//! use a2a_mcp::inbound::{Front, FrontConfig};
//! let identity = a2a_client::Identity::unsigned("did:web:agent.example.com:mcp").map_err(|e| e.to_string())?;
//! let front = Front::new(FrontConfig::new(identity))?;
//! front.set_endpoint("http://127.0.0.1:8080/a2a");
//! let app = axum::Router::new().route_service("/mcp", front.service());
//! # let _ = app; Ok(()) }
//! ```

mod call;
mod config;
mod errors;
mod handler;
mod tools;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use a2a_client::{Client, ClientConfig, Identity, ResponseVerification};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

pub use config::McpSection;
pub use handler::Handler;

/// The path `/mcp` is served at (MCP-1).
pub const PATH: &str = "/mcp";

/// The MCP service of a [`Front`]: a `tower::Service` of HTTP requests, mounted at [`PATH`].
pub type McpService = StreamableHttpService<Handler, NeverSessionManager>;

/// The settings of a [`Front`] (`[mcp]`, [`McpSection::front_config`]).
#[derive(Clone)]
#[non_exhaustive]
pub struct FrontConfig {
    /// Who the front calls the capabilities as (MCP-18); with a key, it signs (MCP-20).
    pub identity: Identity,
    /// `Host` names answered (MCP-3); empty: any.
    pub allowed_hosts: Vec<String>,
    /// The most tools listed (MCP-7).
    pub max_tools: usize,
    /// The largest request body (MCP-4).
    pub max_body_bytes: usize,
    /// How long one `tools/call` may take (MCP-15).
    pub call_timeout: Duration,
    /// The SSE keep-alive interval (MCP-17).
    pub keep_alive: Duration,
    /// The server name in `initialize` / `server/discover`.
    pub name: String,
}

impl FrontConfig {
    /// The defaults of [`McpSection`] for this identity.
    pub fn new(identity: Identity) -> Self {
        FrontConfig {
            identity,
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            max_tools: 256,
            max_body_bytes: 1024 * 1024,
            call_timeout: Duration::from_secs(60),
            keep_alive: Duration::from_secs(5),
            name: "a2a".into(),
        }
    }

    /// Sets the `Host` names answered.
    #[must_use]
    pub fn with_allowed_hosts(mut self, hosts: Vec<String>) -> Self {
        self.allowed_hosts = hosts;
        self
    }

    /// Sets the most tools listed.
    #[must_use]
    pub fn with_max_tools(mut self, n: usize) -> Self {
        self.max_tools = n;
        self
    }

    /// Sets the largest request body.
    #[must_use]
    pub fn with_max_body_bytes(mut self, n: usize) -> Self {
        self.max_body_bytes = n;
        self
    }

    /// Sets how long one `tools/call` may take.
    #[must_use]
    pub fn with_call_timeout(mut self, d: Duration) -> Self {
        self.call_timeout = d;
        self
    }

    /// Sets the SSE keep-alive interval.
    #[must_use]
    pub fn with_keep_alive(mut self, d: Duration) -> Self {
        self.keep_alive = d;
        self
    }

    /// Sets the server name.
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
}

/// The MCP front of one A2A endpoint.
pub struct Front {
    cfg: FrontConfig,
    /// The client of the callers without credentials of their own (credentials make a client per call, MCP-19).
    client: Client,
    /// The A2A endpoint fronted, known once its listener is bound.
    endpoint: RwLock<Option<String>>,
    /// The endpoint's capabilities, read at most [`CAPABILITIES_TTL`] ago (MCP-5).
    capabilities: std::sync::Mutex<Option<(std::time::Instant, Arc<Vec<a2a_core::capability::CapabilityDeclaration>>)>>,
}

/// How long the endpoint's capabilities are reused for `tools/list` and `tools/call` (MCP-5: a few seconds at most).
const CAPABILITIES_TTL: Duration = Duration::from_secs(2);

impl std::fmt::Debug for Front {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Front").field("did", &self.cfg.identity.did()).field("endpoint", &self.endpoint()).finish()
    }
}

impl Front {
    /// A front with these settings; [`Front::set_endpoint`] names the A2A endpoint before it serves calls.
    pub fn new(cfg: FrontConfig) -> Result<Arc<Front>, String> {
        let client = Self::client(&cfg, None).map_err(|e| e.to_string())?;
        Ok(Arc::new(Front { cfg, client, endpoint: RwLock::new(None), capabilities: std::sync::Mutex::new(None) }))
    }

    /// An A2A client as the front, with the caller's credentials when it sent some (MCP-19).
    fn client(
        cfg: &FrontConfig,
        creds: Option<(&str, &handler::Credentials)>,
    ) -> Result<Client, a2a_client::ClientError> {
        // The front and the endpoint it fronts are one process talking over loopback: its own answers need no
        // verification; the caller's deadline is the front's (MCP-15).
        let config = ClientConfig::default()
            .with_response_verification(ResponseVerification::Off)
            .with_call_deadline(cfg.call_timeout)
            .with_discover_ttl(Duration::from_secs(2));
        let mut b = Client::builder(cfg.identity.clone()).config(config);
        if let Some((url, c)) = creds {
            if let Some(t) = &c.bearer {
                b = b.bearer_token(url, t.clone())?;
            }
            if let Some(k) = &c.api_key {
                b = b.api_key(url, k.clone())?;
            }
        }
        b.build()
    }

    /// The endpoint's capability declarations, from a read at most [`CAPABILITIES_TTL`] old.
    async fn declarations(
        &self,
        url: &str,
    ) -> Result<Arc<Vec<a2a_core::capability::CapabilityDeclaration>>, a2a_client::ClientError> {
        let held = self.capabilities.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        if let Some((_, decls)) = held.filter(|(at, _)| at.elapsed() < CAPABILITIES_TTL) {
            return Ok(decls);
        }
        let decls = Arc::new(self.client.capabilities(url).await?.document.capabilities);
        *self.capabilities.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((std::time::Instant::now(), decls.clone()));
        Ok(decls)
    }

    /// Names the A2A endpoint the front calls (`http://127.0.0.1:<port>/a2a` for its own listener).
    pub fn set_endpoint(&self, url: &str) {
        *self.endpoint.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(url.to_owned());
    }

    /// The A2A endpoint, once named.
    pub fn endpoint(&self) -> Option<String> {
        self.endpoint.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The loopback URL of the A2A endpoint served on `addr` (an unspecified address is reached on loopback).
    pub fn loopback_endpoint(addr: std::net::SocketAddr) -> String {
        let ip = match addr.ip() {
            std::net::IpAddr::V4(v4) if v4.is_unspecified() => std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            std::net::IpAddr::V6(v6) if v6.is_unspecified() => std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        format!("http://{}/a2a", std::net::SocketAddr::new(ip, addr.port()))
    }

    /// The settings in force.
    pub fn config(&self) -> &FrontConfig {
        &self.cfg
    }

    /// Whether the front signs for its callers, so that `did_auth` capabilities are tools (MCP-20).
    pub fn signs(&self) -> bool {
        self.cfg.identity.can_sign()
    }

    /// The MCP service (MCP-1..MCP-4): Streamable HTTP, stateless, at every protocol revision `rmcp` speaks.
    pub fn service(self: &Arc<Self>) -> McpService {
        let hosts = self.cfg.allowed_hosts.clone();
        let mut config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(false)
            .with_sse_keep_alive(Some(self.cfg.keep_alive))
            .with_sse_retry(None)
            .with_max_request_body_bytes(self.cfg.max_body_bytes);
        config = if hosts.is_empty() { config.disable_allowed_hosts() } else { config.with_allowed_hosts(hosts) };
        let front = self.clone();
        StreamableHttpService::new(
            move || Ok(Handler::new(front.clone())),
            Arc::new(NeverSessionManager::default()),
            config,
        )
    }

    /// Serves one HTTP request of `/mcp` (for servers that route requests themselves, like the gateway's).
    pub async fn handle(self: &Arc<Self>, req: http::Request<axum::body::Body>) -> http::Response<axum::body::Body> {
        // MCP-4: a body declared over the limit is refused before it is read (a server that read it already hands
        // it on as its declared length).
        let declared = req
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.cfg.max_body_bytes as u64) {
            let mut r = http::Response::new(axum::body::Body::from(format!(
                "the request body is larger than this MCP endpoint accepts ({} bytes, mcp.max_body_bytes)",
                self.cfg.max_body_bytes
            )));
            *r.status_mut() = http::StatusCode::PAYLOAD_TOO_LARGE;
            return r;
        }
        match tower::ServiceExt::oneshot(self.service(), req).await {
            Ok(r) => r.map(axum::body::Body::new),
            Err(never) => match never {},
        }
    }
}
