//! The gateway's TOML configuration (`a2a-gateway --config gateway.toml`). Every section is strict (unknown fields are
//! refused) and every limit has an explicit default.
//!
//! ```toml
//! [gateway]
//! did = "did:web:gateway.example.com"
//! listen = "127.0.0.1:8443"
//! key_file = "gateway-key.pem"      # P-256; needed to verify signatures at the edge and re-sign (GW-8)
//!
//! [[agents]]
//! url = "http://10.0.0.5:9001/a2a"
//!
//! [store]                            # optional: share routes, replay memory and audit with other gateways
//! redis_url = "redis://127.0.0.1:6379"
//!
//! [edge]
//! max_clock_skew_s = 25
//! rate_limit_per_s = 200
//!
//! [audit]
//! file = "audit.jsonl"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The whole file.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Identity and listening address.
    pub gateway: GatewaySection,
    /// Agents named in configuration (more come from the capability registry).
    #[serde(default)]
    pub agents: Vec<AgentSection>,
    /// Where shared state lives (the same section as `a2a-server`'s): in memory, or Redis shared by several gateways.
    #[serde(default)]
    pub store: a2a_runtime::store::StoreSection,
    /// Reading agents from the capability registry.
    #[serde(default)]
    pub registry: RegistrySection,
    /// Edge security.
    #[serde(default)]
    pub edge: EdgeSection,
    /// Request limits.
    #[serde(default)]
    pub limits: LimitsSection,
    /// Balancing and outlier ejection.
    #[serde(default)]
    pub balancing: BalancingSection,
    /// The cache of agents' DISCOVER answers.
    #[serde(default)]
    pub discover_cache: DiscoverCacheSection,
    /// The audit log.
    #[serde(default)]
    pub audit: AuditSection,
    /// The admin endpoints (`/metrics`, `/gateway/audit`, `/gateway/agents`).
    #[serde(default)]
    pub admin: AdminSection,
    /// Protocol versions callers may speak, translated to the agents' version (GW-5, GW-11..GW-13).
    #[serde(default)]
    pub translations: Vec<crate::version::Translation>,
    /// The A2A 1.x bridge the gateway serves unless `gateway.bridge = false` (§20.10).
    #[serde(default)]
    pub bridge: BridgeSection,
    /// The Model Context Protocol endpoint `/mcp` (spec §21): every capability the caller may use, as an MCP tool.
    /// Served unless `enabled = false`.
    #[serde(default)]
    pub mcp: a2a_mcp::inbound::McpSection,
}

/// `[bridge]`: the gateway's A2A 1.x bridge (served unless `gateway.bridge = false`).
///
/// ```toml
/// [bridge]
/// default_skill = "echo_message"
/// ```
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BridgeSection {
    /// The skill a 1.x message that names none goes to when the agents behind the gateway offer several and not
    /// exactly one skill's input schema accepts the message (spec BR-27, BR-29, e.g. `"echo_message"`). It is
    /// used while some agent offers it (not `did_auth`). Default: none (such a message is refused with the list of
    /// skills).
    #[serde(default)]
    pub default_skill: Option<String>,
}

/// The most serving threads `gateway.workers` may ask for.
pub const MAX_WORKERS: usize = 256;

/// `[gateway]`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GatewaySection {
    /// The gateway's did:web DID: its `A2A-Sender-ID`, the audience callers sign for (GW-3).
    pub did: String,
    /// Display name in the merged capabilities document.
    #[serde(default)]
    pub name: Option<String>,
    /// Address to listen on (the command line's `--listen` wins).
    #[serde(default)]
    pub listen: Option<String>,
    /// Threads serving connections, each with its own event loop and its own pool of agent connections, all
    /// accepting on the one listener (as nginx's worker processes do). `0` (the default): one per CPU.
    #[serde(default)]
    pub workers: usize,
    /// PEM file of the gateway's P-256 key; the gateway serves its DID document when set.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// The key's id in the DID document.
    #[serde(default = "default_key_id")]
    pub key_id: String,
    /// Serve the A2A 1.x bridge (`spec/PROTOCOL.md` §20.10): the gateway's Agent Card, `/a2a1x`, and `bridge_to` in
    /// NEGOTIATE answers naming the gateway (BR-26). `false`: none of them, and the agents' `bridge_to` is removed
    /// from their NEGOTIATE answers (BR-18).
    #[serde(default = "default_true")]
    pub bridge: bool,
}

fn default_true() -> bool {
    true
}

fn default_key_id() -> String {
    "key-1".to_owned()
}

/// One `[[agents]]` entry.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentSection {
    /// The agent's A2A endpoint, `http://host:port/a2a` (or a path prefix before `/a2a`).
    pub url: String,
}

/// `[registry]`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RegistrySection {
    /// Read agents that registered themselves in the shared capability registry (needs `[store]` Redis).
    pub enabled: bool,
    /// How often the registry is read, in milliseconds.
    pub poll_ms: u64,
}

impl Default for RegistrySection {
    fn default() -> Self {
        RegistrySection { enabled: true, poll_ms: 5_000 }
    }
}

/// `[edge]`: what the gateway checks before any request reaches an agent.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct EdgeSection {
    /// Verify `A2A-Signature` at the edge (as the audience, GW-3) and re-sign forwarded requests (GW-8). Off: the
    /// gateway forwards requests as they are and agents verify (transparent mode; no key needed).
    pub verify_signatures: bool,
    /// Largest difference between a request's time (signature `iat`, else its `Date` header) and the gateway's
    /// clock, in seconds (GW-4; `401 clock_skew` beyond).
    pub max_clock_skew_s: u64,
    /// Requests per second allowed per sender DID (`429 rate_limited` beyond); 0 disables the limit.
    pub rate_limit_per_s: u32,
    /// Burst above the rate, in requests.
    pub rate_limit_burst: u32,
    /// Senders tracked by the rate limiter at most (least recently seen are forgotten first).
    pub rate_limit_max_senders: u64,
    /// Internal domains (AUTH-7): callers from elsewhere are cross-domain.
    pub internal_domains: Vec<String>,
    /// Cross-domain callers must sign every request (`403 did_auth_required`), whatever the capability declares.
    pub require_did_auth_cross_domain: bool,
    /// Resolve `did:web:localhost…` / `127.0.0.1` senders over plain HTTP (tests and local development only).
    pub allow_http_loopback_dids: bool,
    /// Lifetime of the signatures the gateway makes when it re-signs, in seconds.
    pub resign_lifetime_s: u32,
}

impl Default for EdgeSection {
    fn default() -> Self {
        EdgeSection {
            verify_signatures: true,
            max_clock_skew_s: 25,
            rate_limit_per_s: 0,
            rate_limit_burst: 0,
            rate_limit_max_senders: 100_000,
            internal_domains: Vec::new(),
            require_did_auth_cross_domain: false,
            allow_http_loopback_dids: false,
            resign_lifetime_s: 60,
        }
    }
}

/// `[limits]`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsSection {
    /// Largest request body, in bytes (`413 payload_too_large`).
    pub max_body_bytes: usize,
    /// Largest total size of request headers, in bytes (`431 headers_too_large`).
    pub max_header_bytes: usize,
    /// Most request headers (`431 headers_too_large`).
    pub max_headers: usize,
    /// Time to receive the request headers, in milliseconds (the connection is closed after it): a new connection's
    /// first head, and a later head from its first byte on.
    pub header_read_timeout_ms: u64,
    /// Longest a caller's kept-alive HTTP/1.1 connection waits for its next request, in milliseconds (nginx's
    /// `keepalive_timeout`). Keep it above the callers' pool idle time (a2a-client: 60 s) so that the gateway does
    /// not close a connection as a caller sends a request on it. 0 closes a connection after each answer.
    pub keepalive_timeout_ms: u64,
    /// Time to receive the request body, in milliseconds (`408 request_timeout`).
    pub body_read_timeout_ms: u64,
    /// Time a caller has to take each write of its answer, in milliseconds: a caller that stops reading is
    /// disconnected after it (its agent connection is released).
    pub answer_write_timeout_ms: u64,
    /// Time an agent has to start answering, in milliseconds (`504 agent_timeout`); above the agents' `max_wait_ms`.
    pub agent_timeout_ms: u64,
    /// Time to open a connection to an agent, in milliseconds (`502 agent_unavailable`).
    pub connect_timeout_ms: u64,
    /// Idle keep-alive connections kept per agent.
    pub pool_max_idle_per_agent: usize,
    /// Longest an agent connection waits unused in the pool, in milliseconds. Keep it below the agents' own idle
    /// timeout (a2a-server: its `header_read_timeout_ms`, 10 s; Node.js and uvicorn: 5 s), so that the gateway
    /// drops an idle connection before the agent closes it under a request.
    pub pool_idle_timeout_ms: u64,
    /// Agents known at most (configuration, registry and routes together).
    pub max_agents: usize,
    /// Routes (negotiation, execution and idempotency key → agent) kept in memory at most, of each kind.
    pub max_routes: u64,
    /// How long an execution stays routable after EXECUTE when the agent does not announce its limits, in ms.
    pub execution_route_ttl_ms: u64,
    /// How long an agent keeps a terminal result (RES-3; not announced by agents), added to the execution route TTL.
    pub result_retention_ms: u64,
    /// Time given to requests in flight on shutdown, in milliseconds.
    pub shutdown_grace_ms: u64,
    /// Bytes of request bodies the gateway holds at once, over every connection, HTTP/1.1 and HTTP/2 alike (GW-23): a
    /// body that would take the total past it is refused `503 overloaded` with `Retry-After` (an HTTP/1.1 connection
    /// is then closed). Body buffers grow as bytes arrive, never to the length a caller declares.
    pub max_buffered_body_bytes: usize,
    /// Caller connections open at once (GW-23); `0` (the default): half the process's soft limit of open files
    /// (each proxied request may hold an agent connection too), at most 65,536. At the cap the gateway stops
    /// accepting (new connections wait in the listen backlog) and logs it.
    pub max_connections: usize,
}

impl LimitsSection {
    /// [`LimitsSection::max_connections`], with `0` resolved against the soft limit of open files (Linux:
    /// `/proc/self/limits`; 4,096 where it cannot be read).
    pub fn connection_cap(&self) -> usize {
        if self.max_connections > 0 {
            return self.max_connections;
        }
        let soft = std::fs::read_to_string("/proc/self/limits").ok().and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3).and_then(|v| v.parse::<usize>().ok()))
        });
        soft.map_or(4096, |n| (n / 2).clamp(64, 65_536))
    }
}

impl Default for LimitsSection {
    fn default() -> Self {
        LimitsSection {
            max_body_bytes: 1024 * 1024,
            max_header_bytes: 16 * 1024,
            max_headers: 64,
            header_read_timeout_ms: 10_000,
            keepalive_timeout_ms: 75_000,
            body_read_timeout_ms: 30_000,
            answer_write_timeout_ms: 30_000,
            agent_timeout_ms: 35_000,
            connect_timeout_ms: 2_000,
            pool_max_idle_per_agent: 256,
            pool_idle_timeout_ms: crate::upstream::DEFAULT_POOL_IDLE_TIMEOUT.as_millis() as u64,
            max_agents: 256,
            max_routes: 1_000_000,
            execution_route_ttl_ms: 2 * 3_600_000,
            result_retention_ms: 3_600_000,
            shutdown_grace_ms: 10_000,
            max_buffered_body_bytes: 64 * 1024 * 1024,
            max_connections: 0,
        }
    }
}

/// `[balancing]`: which agent gets a NEGOTIATE, and when an agent is taken out of rotation.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct BalancingSection {
    /// Consecutive failures (connection refused or reset, timeout, 5xx) after which an agent is ejected.
    pub consecutive_failures: u32,
    /// First ejection time, in milliseconds; doubled at each further ejection, up to `max_ejection_ms`.
    pub ejection_ms: u64,
    /// Longest ejection, in milliseconds.
    pub max_ejection_ms: u64,
}

impl Default for BalancingSection {
    fn default() -> Self {
        BalancingSection { consecutive_failures: 3, ejection_ms: 10_000, max_ejection_ms: 300_000 }
    }
}

/// `[discover_cache]`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DiscoverCacheSection {
    /// How long an agent's DISCOVER and capabilities answers are reused, in milliseconds (DISC-4: 5 minutes).
    pub ttl_ms: u64,
    /// Agents' answers kept at most (least recently used dropped first).
    pub max_entries: u64,
    /// How long a failed DISCOVER is remembered before the agent is asked again, in milliseconds.
    pub negative_ttl_ms: u64,
}

impl Default for DiscoverCacheSection {
    fn default() -> Self {
        DiscoverCacheSection { ttl_ms: 300_000, max_entries: 1024, negative_ttl_ms: 2_000 }
    }
}

/// `[audit]`: one record per request.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AuditSection {
    /// JSON-lines file the records are appended to.
    pub file: Option<PathBuf>,
    /// Append the records to a Redis stream (when `[store]` names Redis).
    pub redis_stream: bool,
    /// Bound of the stream (`XADD MAXLEN ~`).
    pub stream_max_len: u64,
    /// Records waiting to be written to the file at most; beyond it records are dropped and counted.
    pub queue: usize,
}

impl Default for AuditSection {
    fn default() -> Self {
        AuditSection { file: None, redis_stream: true, stream_max_len: 1_000_000, queue: 65_536 }
    }
}

/// `[admin]`: the operator endpoints (`/metrics`, `/gateway/audit`, `/gateway/agents`) are closed unless a token is
/// configured, and then need it (GW-22): they name callers, executions and agents.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AdminSection {
    /// Environment variable holding the bearer token the admin endpoints require (`Authorization: Bearer …`).
    pub token_env: Option<String>,
    /// File holding the token (its first line; relative to the configuration file), instead of `token_env`.
    pub token_file: Option<PathBuf>,
    /// Whether the operator console is served at `/console` while a token is configured (GW-22: behind the same
    /// token; `docs/console.md`). Default `true`.
    pub console: bool,
    /// How long a console login lasts, in seconds (the cookie's lifetime; 60 to 2 592 000, default 43 200: 12 h).
    pub console_session_s: u64,
    /// How often the console samples the gateway's metrics for its charts, in milliseconds (100 to 60 000, default
    /// 5 000). Needs a restart.
    pub console_sample_ms: u64,
    /// How many metric samples the console keeps (2 to 10 000, default 120: ten minutes at the default rate). Needs
    /// a restart.
    pub console_samples: usize,
    /// Audit records the console keeps in memory to show when no audit log is configured, and the most one live
    /// traffic stream may fall behind before it is told it missed records (1 to 100 000, default 1 000). Needs a
    /// restart.
    pub console_records: usize,
}

impl Default for AdminSection {
    fn default() -> Self {
        AdminSection {
            token_env: None,
            token_file: None,
            console: true,
            console_session_s: 43_200,
            console_sample_ms: 5_000,
            console_samples: 120,
            console_records: 1_000,
        }
    }
}

impl AdminSection {
    /// Checks the console's bounds.
    fn validate(&self) -> Result<(), String> {
        if !(60..=2_592_000).contains(&self.console_session_s) {
            return Err("admin.console_session_s: must be 60 to 2592000".into());
        }
        if !(100..=60_000).contains(&self.console_sample_ms) {
            return Err("admin.console_sample_ms: must be 100 to 60000".into());
        }
        if !(2..=10_000).contains(&self.console_samples) {
            return Err("admin.console_samples: must be 2 to 10000".into());
        }
        if !(1..=100_000).contains(&self.console_records) {
            return Err("admin.console_records: must be 1 to 100000".into());
        }
        Ok(())
    }
}

/// A configuration error, formatted as `file:line:column: message` where a position is known.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// The JSON Schema of `gateway.toml` (see `a2a_runtime::config_reference`).
pub fn schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Config)).unwrap_or(serde_json::Value::Null)
}

impl Config {
    /// Reads and parses a file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("{}: cannot read the configuration: {e}", path.display())))?;
        Self::parse(&text, path)
    }

    /// Parses configuration text (`path` is used in messages).
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let cfg: Config = toml::from_str(text).map_err(|e| {
            let (line, col) = e.span().map_or((0, 0), |s| {
                let before = &text[..s.start.min(text.len())];
                (
                    before.matches('\n').count() + 1,
                    before.rfind('\n').map_or(before.len(), |i| before.len() - i - 1) + 1,
                )
            });
            ConfigError(format!("{}:{line}:{col}: {}", path.display(), e.message()))
        })?;
        cfg.validate().map_err(|m| ConfigError(format!("{}: {m}", path.display())))?;
        Ok(cfg)
    }

    /// Checks values serde cannot.
    pub fn validate(&self) -> Result<(), String> {
        a2a_core::did::Did::parse(&self.gateway.did).map_err(|e| format!("gateway.did: {e}"))?;
        for (i, a) in self.agents.iter().enumerate() {
            crate::agents::Endpoint::parse(&a.url).map_err(|e| format!("agents[{i}].url: {e}"))?;
        }
        if self.edge.verify_signatures && self.gateway.key_file.is_none() {
            return Err(
                "edge.verify_signatures needs gateway.key_file: the gateway re-signs the requests it verified \
                        (GW-8); give a P-256 key, or set edge.verify_signatures = false to forward requests unchanged"
                    .into(),
            );
        }
        self.admin.validate()?;
        self.mcp.validate()?;
        if self.gateway.workers > MAX_WORKERS {
            return Err(format!("gateway.workers: at most {MAX_WORKERS} (0 is one per CPU)"));
        }
        if self.edge.resign_lifetime_s == 0 || u64::from(self.edge.resign_lifetime_s) > 300 {
            return Err("edge.resign_lifetime_s: must be 1 to 300".into());
        }
        let l = &self.limits;
        if l.header_read_timeout_ms == 0 || l.body_read_timeout_ms == 0 || l.answer_write_timeout_ms == 0 {
            return Err("limits: header_read_timeout_ms, body_read_timeout_ms and answer_write_timeout_ms must be at \
                        least 1"
                .into());
        }
        if l.max_buffered_body_bytes < l.max_body_bytes {
            return Err(format!(
                "limits.max_buffered_body_bytes ({}) must be at least limits.max_body_bytes ({}): one body must fit",
                l.max_buffered_body_bytes, l.max_body_bytes
            ));
        }
        if l.keepalive_timeout_ms > 3_600_000 {
            return Err("limits.keepalive_timeout_ms: at most 3600000 (one hour); 0 closes after each answer".into());
        }
        if l.pool_idle_timeout_ms > 3_600_000 {
            return Err("limits.pool_idle_timeout_ms: at most 3600000 (one hour); 0 keeps no idle connection".into());
        }
        if self.admin.token_env.is_some() && self.admin.token_file.is_some() {
            return Err("admin: set token_env or token_file, not both".into());
        }
        if self.balancing.consecutive_failures == 0 {
            return Err("balancing.consecutive_failures: must be at least 1".into());
        }
        let mut seen = BTreeMap::new();
        for (i, t) in self.translations.iter().enumerate() {
            t.validate().map_err(|e| format!("translations[{i}]: {e}"))?;
            if seen.insert(t.caller_version.clone(), i).is_some() {
                return Err(format!("translations[{i}]: caller_version {:?} is translated twice", t.caller_version));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(gateway_extra: &str, rest: &str) -> Result<Config, String> {
        let text = format!(
            "[gateway]\ndid = \"did:web:gw.example.com\"\n{gateway_extra}\n[edge]\nverify_signatures = false\n{rest}"
        );
        Config::parse(&text, Path::new("gateway.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn workers_default_to_one_per_cpu_and_are_bounded() {
        assert_eq!(parse("", "").expect("config").gateway.workers, 0);
        assert_eq!(parse("workers = 4", "").expect("config").gateway.workers, 4);
        let e = parse(&format!("workers = {}", MAX_WORKERS + 1), "").expect_err("too many");
        assert!(e.contains("gateway.workers: at most 256"), "{e}");
    }

    #[test]
    fn memory_limits_have_defaults_and_one_body_must_fit_the_budget() {
        let l = parse("", "").expect("config").limits;
        assert_eq!(l.max_buffered_body_bytes, 64 * 1024 * 1024);
        assert!(l.connection_cap() >= 64, "a cap from the open-file limit");
        let l = parse("", "[limits]\nmax_connections = 7\n").expect("config").limits;
        assert_eq!(l.connection_cap(), 7);
        let e = parse("", "[limits]\nmax_body_bytes = 2000\nmax_buffered_body_bytes = 1000\n").expect_err("too small");
        assert!(e.contains("max_buffered_body_bytes"), "{e}");
        let e = parse("", "[admin]\ntoken_env = \"X\"\ntoken_file = \"t\"\n").expect_err("both");
        assert!(e.contains("token_env or token_file"), "{e}");
    }

    #[test]
    fn zero_timeouts_are_refused() {
        let e = parse("", "[limits]\nanswer_write_timeout_ms = 0\n").expect_err("zero");
        assert!(e.contains("answer_write_timeout_ms"), "{e}");
        // The pool's idle time: 0 keeps no idle connection; an hour at most.
        assert_eq!(parse("", "[limits]\npool_idle_timeout_ms = 0\n").expect("valid").limits.pool_idle_timeout_ms, 0);
        let e = parse("", "[limits]\npool_idle_timeout_ms = 3600001\n").expect_err("too long");
        assert!(e.contains("pool_idle_timeout_ms"), "{e}");
        // The callers' keep-alive: 0 closes after each answer; an hour at most.
        assert_eq!(parse("", "[limits]\nkeepalive_timeout_ms = 0\n").expect("valid").limits.keepalive_timeout_ms, 0);
        let e = parse("", "[limits]\nkeepalive_timeout_ms = 3600001\n").expect_err("too long");
        assert!(e.contains("keepalive_timeout_ms"), "{e}");
    }
}
