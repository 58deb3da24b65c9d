//! The `mcp` handler of `[[capabilities]]` (`spec/PROTOCOL.md` §21.9): connecting to the MCP servers a
//! configuration names, importing their tools, and reporting the tools that could not be imported (MCP-33) — in
//! the log at start, in `a2a-server check`'s warnings and in the console's `/console/api/agent` (`mcp`).
//!
//! ```toml
//! [[capabilities]]
//! auth_requirement = "none"
//! handler = { type = "mcp", url = "http://127.0.0.1:8000/mcp", prefix = "calc", tools = ["add", "divide"] }
//! ```

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::config::{
    CapabilityHandler, Config, ConfigError, LoadedCapability, Step, locate, position, resolve_program,
};
use crate::handler::mcp::{
    ImportOptions, Imported, McpServer, McpToolHandler, McpTransport, import_tools, stdio_command,
};

/// How long the agent tries to reach an MCP server at start by default (MCP-38).
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 10_000;

/// The declaration fields an `mcp` entry may not have: each imported capability takes them from its tool.
const FROM_THE_TOOL: [&str; 3] = ["name", "input_schema", "output_schema"];

/// One `mcp` handler's server, connected, and what was imported of its tools.
#[derive(Debug, Clone)]
pub struct McpImport {
    /// The connection, shared by the handlers of its tools.
    pub server: Arc<McpServer>,
    /// The tools imported and those that were not, with the reason.
    pub imported: Imported,
}

impl McpImport {
    /// A capability per imported tool, each a `tools/call` of it.
    pub fn capabilities(&self, timeout: Option<Duration>) -> impl Iterator<Item = LoadedCapability> + '_ {
        self.imported.tools.iter().map(move |t| LoadedCapability {
            declaration: t.declaration.clone(),
            handler: Arc::new(McpToolHandler::new(self.server.clone(), t.tool.clone()).with_timeout(timeout)),
        })
    }

    /// What the console shows of it: the server, the tools imported (tool and capability names) and those skipped.
    pub fn report(&self, entry: usize) -> Value {
        json!({
            "entry": entry,
            "server": self.server.display(),
            "imported": self.imported.tools.iter().map(|t| json!({"tool": t.tool, "capability": t.declaration.name})).collect::<Vec<_>>(),
            "skipped": self.imported.skipped,
        })
    }
}

impl Config {
    /// Connects to the MCP server of every `mcp` handler and imports its tools (MCP-31..MCP-34), logging each tool
    /// that is not imported with the reason (MCP-33). A server still unreachable after its `connect_timeout_ms`
    /// is an error naming the entry and the server: the agent does not start without the capabilities its file
    /// describes (MCP-38).
    pub async fn connect_mcp(&mut self, text: &str, path: &Path) -> Result<(), ConfigError> {
        let base = path.parent().unwrap_or(Path::new("."));
        for (i, spanned) in self.capabilities.iter().enumerate() {
            let section = spanned.get_ref();
            let CapabilityHandler::Mcp {
                url,
                argv,
                headers,
                env,
                env_allow,
                cwd,
                tools,
                prefix,
                rename,
                connect_timeout_ms,
                ..
            } = &section.handler.handler
            else {
                continue;
            };
            let at = |field: Option<&str>, msg: String| {
                let mut steps = vec![Step::Key("capabilities"), Step::Index(i)];
                steps.extend(field.map(Step::Key));
                ConfigError(format!("{}: capabilities[{i}]: {msg}", position(path, text, &steps)))
            };
            if let Some(field) = FROM_THE_TOOL.iter().find(|f| section.declaration.contains_key(**f)) {
                return Err(at(
                    Some(*field),
                    format!(
                        "an mcp handler's capabilities take `{field}` from each tool (§21.9): remove it (choose names \
                         with the handler's `prefix` or `rename`)"
                    ),
                ));
            }
            if section.input_schema_file.is_some() {
                return Err(at(
                    Some("input_schema_file"),
                    "an mcp handler's capabilities take their input schema from each tool's inputSchema: remove it"
                        .into(),
                ));
            }
            // The shared fields are checked once, here, rather than refused again for every tool.
            let shared: Map<String, Value> = section.declaration.clone().into_iter().collect();
            let mut probe = shared.clone();
            probe.insert("name".into(), json!("mcp_tool"));
            probe.entry("description").or_insert(json!("An MCP tool"));
            if let Err(e) = a2a_core::capability::parse_declaration(&Value::Object(probe)) {
                let field = e.field().filter(|f| section.declaration.contains_key(*f));
                return Err(at(field, e.to_string()));
            }
            let handler_at = Some("handler");
            let transport = match (url, argv) {
                (Some(url), None) => {
                    let parsed =
                        url::Url::parse(url).map_err(|e| at(handler_at, format!("handler.url {url:?}: {e}")))?;
                    if !matches!(parsed.scheme(), "http" | "https") {
                        return Err(at(handler_at, format!("handler.url {url:?} must be http or https")));
                    }
                    McpTransport::Http {
                        url: url.clone(),
                        headers: headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                    }
                }
                (None, Some(argv)) => {
                    let Some((program, args)) = argv.split_first() else {
                        return Err(at(handler_at, "handler.argv is empty: give the MCP server's program and arguments, e.g. [\"python3\", \"server.py\"]".into()));
                    };
                    McpTransport::Stdio(stdio_command(
                        resolve_program(base, program),
                        args.to_vec(),
                        env.clone(),
                        env_allow.clone(),
                        cwd.as_ref().map(|c| base.join(c)),
                    ))
                }
                _ => {
                    return Err(at(
                        handler_at,
                        "an mcp handler needs exactly one of `url` (Streamable HTTP) and `argv` (stdio)".into(),
                    ));
                }
            };
            let wait = Duration::from_millis(connect_timeout_ms.unwrap_or(DEFAULT_CONNECT_TIMEOUT_MS));
            let server = McpServer::connect(transport, wait).await.map_err(|e| at(handler_at, e.to_string()))?;
            let listed = server.list_tools().await.map_err(|e| at(handler_at, e.to_string()))?;
            let options = ImportOptions::new(shared)
                .with_tools(tools.clone())
                .with_prefix(prefix.clone())
                .with_rename(rename.clone());
            let schemas: Vec<Value> = listed.iter().map(|t| Value::Object((*t.input_schema).clone())).collect();
            let imported = import_tools(
                listed.iter().zip(&schemas).map(|(t, s)| (t.name.as_ref(), t.description.as_deref(), s)),
                &options,
            );
            tracing::info!(
                server = %server.display(),
                imported = imported.tools.len(),
                skipped = imported.skipped.len(),
                "imported the MCP server's tools as capabilities"
            );
            let import = McpImport { server, imported };
            for w in mcp_warnings_of(i, &import, text, path) {
                tracing::warn!("{w}");
            }
            self.mcp_imports.insert(i, import);
        }
        Ok(())
    }

    /// The tools of the connected MCP servers that were not imported, each with the reason (MCP-33), as
    /// `file:line:column:` warnings at their `[[capabilities]]` entry: what `a2a-server check` adds to
    /// [`Config::warnings`].
    pub fn mcp_warnings(&self, text: &str, path: &Path) -> Vec<String> {
        self.mcp_imports.iter().flat_map(|(i, m)| mcp_warnings_of(*i, m, text, path)).collect()
    }

    /// What the console shows of the MCP servers (`mcp` of `/console/api/agent`): per `mcp` entry its server, the
    /// tools imported and those skipped with the reason.
    pub fn mcp_report(&self) -> Value {
        Value::Array(self.mcp_imports.iter().map(|(i, m)| m.report(*i)).collect())
    }

    /// The connected MCP servers.
    pub fn mcp_servers(&self) -> Vec<Arc<McpServer>> {
        self.mcp_imports.values().map(|m| m.server.clone()).collect()
    }
}

fn mcp_warnings_of(i: usize, m: &McpImport, text: &str, path: &Path) -> Vec<String> {
    let here = locate(text, &[Step::Key("capabilities"), Step::Index(i), Step::Key("handler")])
        .map_or_else(|| path.display().to_string(), |(l, c)| format!("{}:{l}:{c}", path.display()));
    m.imported
        .skipped
        .iter()
        .map(|s| {
            let cap = s.capability.as_ref().map(|c| format!(" (capability {c})")).unwrap_or_default();
            format!(
                "{here}: capabilities[{i}].handler: the MCP tool `{}`{cap} of {} is not imported: {}",
                s.tool,
                m.server.display(),
                s.reason
            )
        })
        .collect()
}
