//! The agent's TOML configuration (`a2a-server --config agent.toml`): identity, limits, authentication, CORS, static
//! registry entries, and capabilities whose handlers are a program (`command`), an HTTP service (`http`), `echo`, or
//! every tool of an MCP server (`mcp`, see [`crate::mcp`]) —
//! no Rust needed. Errors name the file, the line and the field.
//!
//! ```toml
//! [agent]
//! did = "did:web:localhost%3A8080"
//! name = "Report desk"
//! listen = "127.0.0.1:8080"
//!
//! [[capabilities]]
//! name = "submit_report"
//! description = "File a report"
//! auth_requirement = "none"
//! input_schema = { type = "object", properties = { title = { type = "string" } }, required = ["title"] }
//! handler = { type = "command", argv = ["python3", "report.py"] }
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use a2a_runtime::store::StoreSection;

use a2a_core::capability::CapabilityDeclaration;
use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

use crate::handler::BoxHandler;
use crate::handler::builtin::{CommandHandler, HttpHandler};
use crate::limits::Limits;
use crate::registry::RegistryEntry;

/// The whole file.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Identity and listening address.
    pub agent: AgentSection,
    /// Limits (`spec/PROTOCOL.md` §13); absent members keep their defaults.
    #[serde(default)]
    pub limits: Limits,
    /// Authentication.
    #[serde(default)]
    pub auth: AuthSection,
    /// Browser access.
    #[serde(default)]
    pub cors: CorsSection,
    /// Where the state lives: the in-memory store (default) or Redis.
    #[serde(default)]
    pub store: StoreSection,
    /// Streaming results (`spec/PROTOCOL.md` §18): `enabled = true` and the limits of `crate::streaming::StreamConfig`.
    #[serde(default)]
    pub streaming: crate::streaming::StreamConfig,
    /// Other agents' capabilities, offered as fallback options.
    #[serde(default)]
    #[schemars(with = "Vec<serde_json::Map<String, Value>>")]
    pub registry: Vec<RegistryEntry>,
    /// The capabilities.
    #[serde(default)]
    #[schemars(with = "Vec<CapabilitySection>")]
    pub capabilities: Vec<Spanned<CapabilitySection>>,
    /// Composite capabilities (`spec/PROTOCOL.md` §19): a declaration plus its `steps` and `output`.
    #[serde(default)]
    #[schemars(with = "Vec<CompositeSection>")]
    pub composites: Vec<Spanned<CompositeSection>>,
    /// Sessions and conversations (§17; `[sessions]`, see [`crate::sessions::config`]).
    #[serde(default)]
    pub sessions: Option<crate::sessions::config::SessionsConfig>,
    /// The A2A 1.x bridge (§20; `[bridge]`).
    #[serde(default)]
    pub bridge: BridgeSection,
    /// The operator surface, `/metrics` (OPS-1; `[admin]`): closed unless configured here.
    #[serde(default)]
    pub admin: AdminSection,
    /// The MCP servers of `mcp` handlers once connected ([`Config::connect_mcp`]), by `[[capabilities]]` index.
    #[serde(skip)]
    #[schemars(skip)]
    pub mcp_imports: BTreeMap<usize, crate::mcp::McpImport>,
    /// The Model Context Protocol endpoint `/mcp` (spec §21; `[mcp]`): the capabilities as MCP tools. Off unless
    /// `enabled = true` (or `a2a-server --mcp`).
    #[serde(default)]
    pub mcp: a2a_mcp::inbound::McpSection,
}

/// `[admin]`: where `/metrics` is served (OPS-1). With neither key it is not served at all.
///
/// ```toml
/// [admin]
/// listen = "127.0.0.1:9090"      # a listener of its own (keep it on loopback or a private network)
/// token_env = "A2A_ADMIN_TOKEN"  # and/or: require `Authorization: Bearer <token>` (on the agent's listener too)
/// ```
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdminSection {
    /// Serve `/metrics` on this address of its own (e.g. `127.0.0.1:9090`); with `token_env`, it asks for the token
    /// there too.
    #[serde(default)]
    pub listen: Option<String>,
    /// The environment variable holding a bearer token: `/metrics` is served on the agent's own listener too, to
    /// requests with `Authorization: Bearer <token>` (`401 auth_required` without, `401 auth_invalid` with another).
    #[serde(default)]
    pub token_env: Option<String>,
    /// Serve the agent's operator console at `/console` (`docs/console.md`) where `/metrics` is served: on
    /// `listen`, and on the agent's own listener behind `token_env`'s token. `a2a-server --console` turns it on too.
    /// Default `false`.
    #[serde(default)]
    pub console: bool,
}

/// `[bridge]`: serve the A2A 1.x bridge (`spec/PROTOCOL.md` §20) beside the agent: the Agent Card at
/// `/.well-known/agent-card.json` (signed with `agent.key_file` when there is one, BR-5) and the 1.x operations.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BridgeSection {
    /// Serve the bridge.
    #[serde(default)]
    pub enabled: bool,
    /// The public origin written into the card (`https://agent.example.com`); default: `http://` and the request's
    /// `Host`.
    #[serde(default)]
    pub public_url: Option<String>,
    /// The skill a 1.x message that names none goes to when not exactly one skill's input schema accepts it
    /// (spec BR-27, e.g. `"echo_message"`); it must be a capability that is not `did_auth`. Default: none (such a
    /// message is refused with the list of skills).
    #[serde(default)]
    pub default_skill: Option<String>,
}

/// `[[composites]]`: the declaration's fields (as `[[capabilities]]`, without a handler), `steps` and `output` (§19.1).
///
/// ```toml
/// [[composites]]
/// name = "file_brief_report"
/// description = "Summarise, then file the summary as a report"
/// auth_requirement = "none"
/// input_schema = { type = "object", properties = { text = { type = "string" } }, required = ["text"] }
/// steps = [
///   { id = "summarize", capability = "generate_brief_summary", input = { text = "/input/text" } },
///   { id = "file", capability = "submit_report", agent = "https://desk.example.com/a2a",
///     input = { title = "/steps/summarize/summary", timestamp = { const = "2026-12-01T00:00:00Z" } } },
/// ]
/// ```
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct CompositeSection {
    /// The declaration's fields.
    #[serde(flatten)]
    pub declaration: BTreeMap<String, Value>,
    /// The pipeline's steps.
    pub steps: Vec<Value>,
    /// The pipeline's output mapping.
    #[serde(default)]
    pub output: Option<Value>,
}

/// `[agent]`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentSection {
    /// The agent's did:web DID.
    pub did: String,
    /// Display name.
    #[serde(default)]
    pub name: Option<String>,
    /// Address to listen on (the command line's `--listen` wins).
    #[serde(default)]
    pub listen: Option<String>,
    /// PEM file of the agent's P-256 key; when set, the agent serves its DID document at `/.well-known/did.json`.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// The key's id in the DID document.
    #[serde(default = "default_key_id")]
    pub key_id: String,
    /// Further keys the DID document lists beside `key_file`'s without the agent signing with them (DID-14): the next
    /// key before a rotation, the previous one after it, so that signatures made with either verify while callers'
    /// caches of the document expire (`docs/operations.md`, "Rotate keys").
    #[serde(default)]
    pub published_keys: Vec<PublishedKey>,
    /// The public URL of this process's A2A endpoint (`https://a.example.com/a2a`), announced in the shared
    /// capability registry; default: the listening address.
    #[serde(default)]
    pub endpoint: Option<String>,
}

/// `[[agent.published_keys]]`: a key the DID document lists without the agent signing with it.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishedKey {
    /// Its id in the DID document (`<did>#<key_id>`); distinct from `agent.key_id` and from the others'.
    pub key_id: String,
    /// PEM file of the key, relative to the configuration file: a P-256 `PUBLIC KEY`, or a private key (only its
    /// public half is published; `a2a keygen` writes one).
    pub key_file: PathBuf,
}

fn default_key_id() -> String {
    "key-1".to_owned()
}

/// `[auth]`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthSection {
    /// API keys for `api_key` capabilities.
    #[serde(default)]
    pub api_keys: Vec<ApiKeySection>,
    /// OAuth 2.0 issuer for `oauth2` capabilities.
    #[serde(default)]
    pub oauth2: Option<OAuth2Section>,
    /// Internal domains (AUTH-7).
    #[serde(default)]
    pub internal_domains: Vec<String>,
    /// Require signatures from callers outside the internal domains.
    #[serde(default)]
    pub require_did_auth_cross_domain: bool,
    /// Resolve `did:web:localhost...` senders over plain HTTP (development only).
    #[serde(default)]
    pub allow_http_loopback_dids: bool,
    /// DIDs of gateways trusted to forward requests on behalf of their callers (`A2A-Forwarded-Sender`, GW-9).
    #[serde(default)]
    pub trusted_gateways: Vec<String>,
}

/// One API key: given inline (`key`) or, better, by environment variable (`key_env`).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApiKeySection {
    /// The key itself.
    #[serde(default)]
    pub key: Option<String>,
    /// The environment variable holding the key.
    #[serde(default)]
    pub key_env: Option<String>,
    /// Senders allowed to use it (empty: any).
    #[serde(default)]
    pub senders: Vec<String>,
}

/// `[auth.oauth2]`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OAuth2Section {
    /// Expected `iss`.
    pub issuer: String,
    /// Expected `aud` (default: the agent's DID).
    #[serde(default)]
    pub audience: Option<String>,
    /// The issuer's public keys as JWKs (P-256).
    #[serde(default)]
    pub keys: Vec<Value>,
    /// PEM files of the issuer's public keys.
    #[serde(default)]
    pub key_files: Vec<PathBuf>,
    /// Scope required per capability.
    #[serde(default)]
    pub required_scopes: BTreeMap<String, String>,
}

/// `[cors]`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CorsSection {
    /// Allowed origins; empty or `["*"]` allows all.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
}

/// One `[[capabilities]]` entry: the declaration plus its handler.
// Unknown fields are not refused here but by `Config::capabilities` (serde cannot combine `deny_unknown_fields`
// with the flattened declaration: it would refuse every declaration field), which names the field and its line.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct CapabilitySection {
    /// The declaration's fields.
    #[serde(flatten)]
    pub declaration: BTreeMap<String, Value>,
    /// The input schema, from a JSON file instead of inline.
    #[serde(default)]
    pub input_schema_file: Option<PathBuf>,
    /// What runs it.
    #[schemars(with = "CapabilityHandler")]
    pub handler: HandlerSection,
}

/// The handler of a configured capability, as written: `handler = { type = "command", argv = [...] }`, the syntax
/// session handlers use (`[[sessions.session]]`, SES-9). The older `kind`/`program`/`args` spelling is still read,
/// with a deprecation warning ([`Config::warnings`]).
#[derive(Debug)]
pub struct HandlerSection {
    /// What runs the capability.
    pub handler: CapabilityHandler,
    /// Written with the deprecated `kind`/`program`/`args` keys.
    pub legacy_syntax: bool,
}

/// What runs a configured capability (`handler = { type = ... }`).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum CapabilityHandler {
    /// Answers `{"echo": payload}`.
    Echo,
    /// A program per execution: the payload as JSON on stdin, the result as JSON on stdout (see
    /// [`CommandHandler`]).
    Command {
        /// The program and its arguments; no shell is involved. A program with a `/` is relative to the
        /// configuration file's folder, one without is looked up on `PATH`.
        argv: Vec<String>,
        /// Extra environment variables.
        #[serde(default)]
        env: BTreeMap<String, String>,
        /// The agent's environment variables the program gets (HDL-5; default `PATH`, `HOME`, `LANG`, `LC_ALL`,
        /// `TZ`, `TMPDIR`); every other one, such as an `auth.api_keys` `key_env`, is withheld.
        #[serde(default)]
        env_allow: Option<Vec<String>>,
        /// Working directory (relative to the configuration file's folder; default: the agent's).
        #[serde(default)]
        cwd: Option<PathBuf>,
        /// Its own time limit, in milliseconds (default: the execution's).
        #[serde(default)]
        timeout_ms: Option<u64>,
    },
    /// Forwards the payload to a URL as a JSON POST (see [`HttpHandler`]).
    Http {
        /// The `http` or `https` URL.
        url: String,
        /// Extra headers.
        #[serde(default)]
        headers: BTreeMap<String, String>,
        /// Its own time limit, in milliseconds (default: the execution's).
        #[serde(default)]
        timeout_ms: Option<u64>,
    },
    /// Every tool of an MCP server, each imported as a capability (`spec/PROTOCOL.md` §21.9, MCP-30..MCP-41): give
    /// `url` (Streamable HTTP) or `argv` (a child process speaking MCP on stdio). The entry's other fields
    /// (`auth_requirement`, `region_restriction`, `estimated_cost`, ...) apply to every imported tool; it has no
    /// `name` nor `input_schema`: each capability is named after its tool and takes the tool's `inputSchema`. A
    /// tool whose schema breaks a schema rule is not imported and is listed with the reason (the log at start,
    /// `a2a-server check`, the console's `/console/api/agent`).
    Mcp {
        /// The server's Streamable HTTP endpoint (`http://127.0.0.1:8000/mcp`).
        #[serde(default)]
        url: Option<String>,
        /// Or the program and arguments of a stdio server (no shell; a program with a `/` is relative to the
        /// configuration file's folder, as for `command`).
        #[serde(default)]
        argv: Option<Vec<String>>,
        /// Extra headers on every HTTP request (with `url`).
        #[serde(default)]
        headers: BTreeMap<String, String>,
        /// Extra environment variables of the stdio server (with `argv`).
        #[serde(default)]
        env: BTreeMap<String, String>,
        /// The agent's environment variables the stdio server gets (HDL-5; default as for `command`).
        #[serde(default)]
        env_allow: Option<Vec<String>>,
        /// Working directory of the stdio server (relative to the configuration file's folder).
        #[serde(default)]
        cwd: Option<PathBuf>,
        /// Import only these tools (MCP names); default: every tool the server lists. A name the server does not
        /// list is reported like a tool that cannot be imported.
        #[serde(default)]
        tools: Option<Vec<String>>,
        /// Prepended with `_` to every capability name (`prefix = "calc"`: tool `add` is `calc_add`). Names are the
        /// tools' in snake case (`getWeather` is `get_weather`) and must match `^[a-z]+(_[a-z]+)+$`.
        #[serde(default)]
        prefix: Option<String>,
        /// Capability names chosen for some tools: `rename = { add = "add_numbers" }` (the prefix is not added).
        #[serde(default)]
        rename: BTreeMap<String, String>,
        /// A time limit of each call's own, in milliseconds (default: the execution's); the call is then canceled.
        #[serde(default)]
        timeout_ms: Option<u64>,
        /// How long the agent tries to reach the server at start before it gives up and does not start, in
        /// milliseconds (default 10000; MCP-38).
        #[serde(default)]
        connect_timeout_ms: Option<u64>,
    },
}

impl<'de> Deserialize<'de> for HandlerSection {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let table = toml::Table::deserialize(d)?;
        if table.contains_key("kind") && !table.contains_key("type") {
            // The deprecated spelling (`kind`, `program`, `args`) is rewritten into the one syntax and read by the
            // same type, so that both accept exactly the same members.
            let mut table = table;
            if let Some(kind) = table.remove("kind") {
                table.insert("type".into(), kind);
            }
            if let Some(program) = table.remove("program") {
                if table.contains_key("argv") {
                    return Err(D::Error::custom("give either `argv` or the deprecated `program`/`args`, not both"));
                }
                let mut argv = vec![program];
                match table.remove("args") {
                    Some(toml::Value::Array(args)) => argv.extend(args),
                    Some(_) => return Err(D::Error::custom("handler.args must be an array of strings")),
                    None => {}
                }
                table.insert("argv".into(), toml::Value::Array(argv));
            }
            let handler = CapabilityHandler::deserialize(table).map_err(D::Error::custom)?;
            return Ok(HandlerSection { handler, legacy_syntax: true });
        }
        let handler = CapabilityHandler::deserialize(table).map_err(D::Error::custom)?;
        Ok(HandlerSection { handler, legacy_syntax: false })
    }
}

/// Why the program of a command handler cannot start, if it cannot: a path that is not an executable file, a name
/// not found on `PATH`, or a `cwd` that is not a folder.
fn missing_program(base: &Path, argv: &[String], cwd: Option<&Path>) -> Option<String> {
    if let Some(dir) = cwd {
        let dir = base.join(dir);
        if !dir.is_dir() {
            return Some(format!("cwd {} is not a folder: the program can never start", dir.display()));
        }
    }
    let program = argv.first()?;
    let found = if program.contains('/') {
        is_executable(&base.join(program))
    } else {
        std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| is_executable(&dir.join(program))))
    };
    (!found).then(|| {
        if program.contains('/') {
            format!("program {} is not an executable file: every execution fails", base.join(program).display())
        } else {
            format!("program {program:?} is not found on PATH: every execution fails")
        }
    })
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

/// A program as a handler runs it: one written with a `/` (`./report.py`, `bin/desk`) is relative to `base`, the
/// configuration file's folder; a bare name (`python3`) is looked up on `PATH`.
pub fn resolve_program(base: &Path, program: &str) -> String {
    if program.contains('/') && Path::new(program).is_relative() {
        base.join(program).to_string_lossy().into_owned()
    } else {
        program.to_owned()
    }
}

/// A configuration error, already formatted as `file:line:column: message`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rfind('\n').map_or(before.len(), |i| before.len() - i - 1) + 1;
    (line, col)
}

/// One step of the path to a value of the configuration: a key of a table or an index of an array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    /// A key of a table.
    Key(&'a str),
    /// An element of an array (e.g. the second `[[capabilities]]`).
    Index(usize),
}

/// The `(line, column)` where the value at `path` is written: the position of its key (of the element for an array
/// index), or of the closest enclosing entry the text has; `None` when the text does not parse or has none of it.
pub fn locate(text: &str, path: &[Step<'_>]) -> Option<(usize, usize)> {
    use toml::de::{DeTable, DeValue};
    let doc = DeTable::parse(text).ok()?;
    let mut best = None;
    let mut current: Option<&DeValue<'_>> = None;
    for step in path {
        match *step {
            Step::Key(k) => {
                let table = match current {
                    None => doc.get_ref(),
                    Some(DeValue::Table(t)) => t,
                    Some(_) => break,
                };
                let Some((key, value)) = table.get_key_value(k) else { break };
                best = Some(key.span().start);
                current = Some(value.get_ref());
            }
            Step::Index(i) => {
                let Some(DeValue::Array(items)) = current else { break };
                let Some(item) = items.get(i) else { break };
                best = Some(item.span().start);
                current = Some(item.get_ref());
            }
        }
    }
    best.map(|offset| line_col(text, offset))
}

/// `file:line:column` of the value at `path` (see [`locate`]); `file` alone when it cannot be located.
pub fn position(file: &Path, text: &str, path: &[Step<'_>]) -> String {
    match locate(text, path) {
        Some((line, col)) => format!("{}:{line}:{col}", file.display()),
        None => file.display().to_string(),
    }
}

/// A configured capability, ready for the builder.
pub struct LoadedCapability {
    /// The declaration.
    pub declaration: CapabilityDeclaration,
    /// The handler.
    pub handler: BoxHandler,
}

impl Config {
    /// Reads and parses a file; errors name the file, line and field.
    pub fn load(path: &Path) -> Result<(Config, String), ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("{}: cannot read the configuration: {e}", path.display())))?;
        let cfg = Self::parse(&text, path)?;
        Ok((cfg, text))
    }

    /// Parses configuration text (`path` is used in messages and to resolve relative paths).
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let mut cfg = toml::from_str::<Config>(text).map_err(|e| {
            let (line, col) = e.span().map_or((0, 0), |s| line_col(text, s.start));
            ConfigError(format!("{}:{line}:{col}: {}", path.display(), e.message()))
        })?;
        if let Some(s) = &mut cfg.sessions {
            s.resolve_paths(path.parent().unwrap_or(Path::new(".")));
        }
        Ok(cfg)
    }

    /// What this configuration gets wrong without being refused: settings under which something can never work
    /// (an `api_key` capability when no key is configured, a command handler whose program is not found, ...) and
    /// deprecated spellings. Each warning starts with `file:line:column:`. `a2a-server check` prints them (exit 2);
    /// the agent logs them at start.
    pub fn warnings(&self, text: &str, path: &Path) -> Vec<String> {
        let base = path.parent().unwrap_or(Path::new("."));
        let mut out = Vec::new();
        let at = |steps: &[Step<'_>], msg: String| format!("{}: {msg}", position(path, text, steps));
        let auth_of = |decl: &BTreeMap<String, Value>| {
            decl.get("auth_requirement").and_then(Value::as_str).unwrap_or_default().to_owned()
        };
        let check_auth = |steps: &[Step<'_>], what: &str, auth: &str, out: &mut Vec<String>| match auth {
            "api_key" if self.auth.api_keys.is_empty() => out.push(at(
                steps,
                format!("{what} requires api_key but [[auth.api_keys]] configures no key: every call is refused"),
            )),
            "oauth2" if self.auth.oauth2.is_none() => out
                .push(at(steps, format!("{what} requires oauth2 but [auth.oauth2] is absent: every call is refused"))),
            _ => {}
        };
        for (i, c) in self.capabilities.iter().enumerate() {
            let c = c.get_ref();
            let here = [Step::Key("capabilities"), Step::Index(i)];
            let name = c.declaration.get("name").and_then(Value::as_str).unwrap_or("?");
            check_auth(
                &[Step::Key("capabilities"), Step::Index(i), Step::Key("auth_requirement")],
                &format!("capabilities[{i}] ({name})"),
                &auth_of(&c.declaration),
                &mut out,
            );
            if c.handler.legacy_syntax {
                out.push(at(
                    &[Step::Key("capabilities"), Step::Index(i), Step::Key("handler")],
                    format!(
                        "capabilities[{i}].handler: `kind`/`program`/`args` is deprecated; write \
                         `{{ type = \"command\", argv = [program, args...] }}` (`type` for echo and http too), as \
                         session handlers do"
                    ),
                ));
            }
            if let CapabilityHandler::Command { argv, cwd, .. } = &c.handler.handler
                && let Some(w) = missing_program(base, argv, cwd.as_deref())
            {
                out.push(at(&here, format!("capabilities[{i}] ({name}).handler: {w}")));
            }
        }
        for (i, c) in self.composites.iter().enumerate() {
            check_auth(
                &[Step::Key("composites"), Step::Index(i), Step::Key("auth_requirement")],
                &format!("composites[{i}]"),
                &auth_of(&c.get_ref().declaration),
                &mut out,
            );
        }
        if let Some(s) = self.sessions.as_ref().filter(|s| s.enabled) {
            check_auth(
                &[Step::Key("sessions"), Step::Key("auth_requirement")],
                "sessions",
                s.auth_requirement.as_str(),
                &mut out,
            );
            let handlers =
                s.session.iter().enumerate().map(|(i, e)| (Step::Key("session"), i, &e.handler)).chain(
                    s.spawn_template.iter().enumerate().map(|(i, t)| (Step::Key("spawn_template"), i, &t.handler)),
                );
            for (list, i, h) in handlers {
                // The session's paths were resolved against the file's folder when it was read.
                if let crate::sessions::config::HandlerConfig::Command(c) = h
                    && let Some(w) = missing_program(Path::new(""), &c.argv, c.cwd.as_deref())
                    && let Step::Key(l) = list
                {
                    out.push(at(
                        &[Step::Key("sessions"), list, Step::Index(i)],
                        format!("sessions.{l}[{i}].handler: {w}"),
                    ));
                }
            }
        }
        out
    }

    /// The composite capabilities (§19), each declaration checked; their pipelines are checked by the builder.
    pub fn composites(
        &self,
        text: &str,
        path: &Path,
    ) -> Result<Vec<(CapabilityDeclaration, crate::compose::Pipeline)>, ConfigError> {
        let mut out = Vec::new();
        for (i, spanned) in self.composites.iter().enumerate() {
            let (line, col) = line_col(text, spanned.span().start);
            let section = spanned.get_ref();
            let at_field = |field: Option<&str>, msg: String| {
                let pos = field
                    .and_then(|f| locate(text, &[Step::Key("composites"), Step::Index(i), Step::Key(f)]))
                    .unwrap_or((line, col));
                ConfigError(format!("{}:{}:{}: composites[{i}]: {msg}", path.display(), pos.0, pos.1))
            };
            let decl: serde_json::Map<String, Value> = section.declaration.clone().into_iter().collect();
            let decl = a2a_core::capability::parse_declaration(&Value::Object(decl)).map_err(|e| match e {
                a2a_core::capability::CapabilityError::MissingField { .. } => at_field(None, e.to_string()),
                _ => at_field(e.field(), e.to_string()),
            })?;
            let mut pipeline = serde_json::Map::new();
            pipeline.insert("steps".into(), Value::Array(section.steps.clone()));
            if let Some(o) = &section.output {
                pipeline.insert("output".into(), o.clone());
            }
            let pipeline: crate::compose::Pipeline = serde_json::from_value(Value::Object(pipeline))
                .map_err(|e| at_field(Some("steps"), format!("the pipeline is malformed: {e} (see spec §19.1)")))?;
            out.push((decl, pipeline));
        }
        Ok(out)
    }

    /// Builds the capabilities and their handlers, checking each declaration.
    pub fn capabilities(&self, text: &str, path: &Path) -> Result<Vec<LoadedCapability>, ConfigError> {
        let base = path.parent().unwrap_or(Path::new("."));
        let mut out = Vec::new();
        for (i, spanned) in self.capabilities.iter().enumerate() {
            let (line, col) = line_col(text, spanned.span().start);
            let section = spanned.get_ref();
            // An error about a field points at the field's line; otherwise at the capability's `[[capabilities]]`.
            let at_field = |field: Option<&str>, msg: String| {
                let pos = field
                    .and_then(|f| locate(text, &[Step::Key("capabilities"), Step::Index(i), Step::Key(f)]))
                    .unwrap_or((line, col));
                ConfigError(format!("{}:{}:{}: capabilities[{i}]: {msg}", path.display(), pos.0, pos.1))
            };
            let at = |msg: String| at_field(None, msg);
            if let CapabilityHandler::Mcp { timeout_ms, .. } = &section.handler.handler {
                // §21.9: one capability per imported tool.
                let Some(import) = self.mcp_imports.get(&i) else {
                    return Err(at("the MCP server of this mcp handler is not connected (Config::connect_mcp)".into()));
                };
                out.extend(import.capabilities(timeout_ms.map(Duration::from_millis)));
                continue;
            }
            let mut decl: serde_json::Map<String, Value> = section.declaration.clone().into_iter().collect();
            if let Some(file) = &section.input_schema_file {
                let file = base.join(file);
                let at_file = |msg: String| at_field(Some("input_schema_file"), msg);
                if decl.contains_key("input_schema") {
                    return Err(at_file(
                        "give the input schema inline (`input_schema`) or in a file (`input_schema_file`), not both"
                            .into(),
                    ));
                }
                let schema_text = std::fs::read_to_string(&file)
                    .map_err(|e| at_file(format!("input_schema_file {}: {e}", file.display())))?;
                let schema: Value = serde_json::from_str(&schema_text)
                    .map_err(|e| at_file(format!("input_schema_file {} is not JSON: {e}", file.display())))?;
                decl.insert("input_schema".into(), schema);
            }
            let decl = a2a_core::capability::parse_declaration(&Value::Object(decl)).map_err(|e| {
                match (e.field(), &section.input_schema_file) {
                    (Some("input_schema"), Some(file)) => {
                        at_field(Some("input_schema_file"), format!("{e} (read from {})", base.join(file).display()))
                    }
                    // A missing field has no line of its own: point at the capability.
                    _ if matches!(e, a2a_core::capability::CapabilityError::MissingField { .. }) => {
                        at_field(None, e.to_string())
                    }
                    (field, _) => at_field(field, e.to_string()),
                }
            })?;
            let handler: BoxHandler = match &section.handler.handler {
                CapabilityHandler::Echo => crate::handler::boxed(crate::handler::builtin::echo()),
                CapabilityHandler::Command { argv, env, env_allow, cwd, timeout_ms } => {
                    let Some((program, args)) = argv.split_first() else {
                        return Err(at_field(Some("handler"), "handler.argv is empty: give the program and its arguments, e.g. [\"python3\", \"report.py\"]".into()));
                    };
                    let mut h = CommandHandler::new(resolve_program(base, program), args.to_vec());
                    h.env = env.clone();
                    if let Some(allow) = env_allow {
                        h.env_allow = allow.clone();
                    }
                    h.cwd = cwd.as_ref().map(|c| base.join(c));
                    h.timeout = timeout_ms.map(Duration::from_millis);
                    Arc::new(h)
                }
                // Handled above, one capability per tool.
                CapabilityHandler::Mcp { .. } => continue,
                CapabilityHandler::Http { url, headers, timeout_ms } => {
                    let at_url = |msg: String| {
                        let pos = locate(
                            text,
                            &[Step::Key("capabilities"), Step::Index(i), Step::Key("handler"), Step::Key("url")],
                        )
                        .unwrap_or((line, col));
                        ConfigError(format!("{}:{}:{}: capabilities[{i}].{msg}", path.display(), pos.0, pos.1))
                    };
                    let parsed = url::Url::parse(url).map_err(|e| at_url(format!("handler.url {url:?}: {e}")))?;
                    if !matches!(parsed.scheme(), "http" | "https") {
                        return Err(at_url(format!("handler.url {url:?} must be http or https")));
                    }
                    let headers = headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                    Arc::new(HttpHandler::new(url.clone(), headers, timeout_ms.map(Duration::from_millis)).map_err(at)?)
                }
            };
            out.push(LoadedCapability { declaration: decl, handler });
        }
        Ok(out)
    }
}
