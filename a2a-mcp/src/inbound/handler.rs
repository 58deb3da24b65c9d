//! The MCP server handler of a [`Front`]: `initialize` / `server/discover`, `tools/list`, `tools/call`.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

use super::Front;

/// The credentials an MCP request carried, passed on to the capabilities that ask for them (MCP-19).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Credentials {
    /// `Authorization: Bearer <token>`: for `oauth2` capabilities.
    pub(crate) bearer: Option<String>,
    /// `A2A-Api-Key`: for `api_key` capabilities.
    pub(crate) api_key: Option<String>,
}

impl Credentials {
    /// The credentials of the HTTP request behind an MCP request.
    pub(crate) fn of(ctx: &RequestContext<RoleServer>) -> Credentials {
        let Some(parts) = ctx.extensions.get::<http::request::Parts>() else { return Credentials::default() };
        let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
        let bearer = header("authorization").and_then(|v| {
            let (scheme, token) = v.split_once(' ')?;
            (scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty()).then(|| token.trim().to_owned())
        });
        let api_key = header("a2a-api-key").filter(|k| !k.is_empty()).map(str::to_owned);
        Credentials { bearer, api_key }
    }

    /// Whether there are any.
    pub(crate) fn any(&self) -> bool {
        self.bearer.is_some() || self.api_key.is_some()
    }
}

/// The MCP server handler of one [`Front`] (made per request: the transport is stateless, MCP-2).
#[derive(Clone)]
pub struct Handler {
    front: Arc<Front>,
}

impl Handler {
    pub(crate) fn new(front: Arc<Front>) -> Self {
        Handler { front }
    }
}

impl ServerHandler for Handler {
    #[allow(deprecated)] // `logging`: the first message of a call without a progress token (MCP-17).
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_logging().build())
            .with_server_info(Implementation::new(self.front.cfg.name.clone(), env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Each tool is a capability of an A2A semantic-handshake agent: a call negotiates the tool's input \
                 schema, runs the capability and returns its result as structuredContent. A refusal is a tool error \
                 whose structuredContent is the A2A error body (error.code, error.message, fallback_options).",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let creds = Credentials::of(&ctx);
        let tools = super::tools::list(&self.front, &creds).await?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let creds = Credentials::of(&ctx);
        super::call::run(&self.front, request, &creds, ctx).await.map(CallToolResponse::from)
    }
}
