//! `[mcp]`: the section of `gateway.toml` and `agent.toml` that configures `/mcp` (spec §21).

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::FrontConfig;

/// `[mcp]`: the Model Context Protocol endpoint `/mcp` (spec §21): every capability the caller may use, as an MCP tool.
///
/// ```toml
/// [mcp]
/// enabled = true                              # a2a-gateway: on unless false; a2a-server: off unless true
/// allowed_hosts = ["localhost", "127.0.0.1", "mcp.example.com"]
/// # Sign for the caller (MCP-20): did_auth capabilities are then offered as tools.
/// did = "did:web:example.com:mcp"
/// key_file = "mcp.pem"
/// ```
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    /// Whether `/mcp` is served. Absent: `a2a-gateway` serves it, `a2a-server` does not (`--mcp` turns it on).
    #[serde(default)]
    pub enabled: Option<bool>,
    /// The DID the front calls the capabilities as (`A2A-Sender-ID`, MCP-18). Default: the DID of the gateway or
    /// agent with the path segment `mcp` added (`did:web:gateway.example.com:mcp`).
    #[serde(default)]
    pub did: Option<String>,
    /// The PEM file (PKCS#8 P-256) of `did`'s key, relative to the configuration file. With it the front signs its
    /// requests and `did_auth` capabilities are offered as tools (MCP-20); `did`'s document must list the key.
    #[serde(default)]
    pub key_file: Option<String>,
    /// The key's id in `did`'s DID document.
    #[serde(default = "default_key_id")]
    pub key_id: String,
    /// The `Host` names (`host` or `host:port`) `/mcp` answers, against DNS rebinding (MCP-3); `[]` answers any
    /// host (only behind a proxy that checks it).
    #[serde(default = "default_allowed_hosts")]
    pub allowed_hosts: Vec<String>,
    /// The most tools `tools/list` answers (MCP-7); capabilities past it are left out, and logged.
    #[serde(default = "default_max_tools")]
    pub max_tools: usize,
    /// The largest MCP request body accepted, in bytes (MCP-4).
    #[serde(default = "default_max_body_bytes")]
    pub max_body_bytes: usize,
    /// How long one `tools/call` may take, handshake and result, in milliseconds (MCP-15); then the execution is
    /// canceled and the call answers `timed_out`.
    #[serde(default = "default_call_timeout_ms")]
    pub call_timeout_ms: u64,
    /// The interval of the SSE keep-alive comments on a `tools/call` stream, in milliseconds. It also bounds how soon a
    /// caller that closed its stream is noticed, and its execution canceled (MCP-17).
    #[serde(default = "default_keep_alive_ms")]
    pub keep_alive_ms: u64,
}

fn default_key_id() -> String {
    "key-1".into()
}
fn default_allowed_hosts() -> Vec<String> {
    vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]
}
fn default_max_tools() -> usize {
    256
}
fn default_max_body_bytes() -> usize {
    1024 * 1024
}
fn default_call_timeout_ms() -> u64 {
    60_000
}
fn default_keep_alive_ms() -> u64 {
    5_000
}

impl Default for McpSection {
    fn default() -> Self {
        McpSection {
            enabled: None,
            did: None,
            key_file: None,
            key_id: default_key_id(),
            allowed_hosts: default_allowed_hosts(),
            max_tools: default_max_tools(),
            max_body_bytes: default_max_body_bytes(),
            call_timeout_ms: default_call_timeout_ms(),
            keep_alive_ms: default_keep_alive_ms(),
        }
    }
}

impl McpSection {
    /// Whether `/mcp` is served, given the host's default (`true` at a gateway, `false` at an agent).
    pub fn serves(&self, default: bool) -> bool {
        self.enabled.unwrap_or(default)
    }

    /// Checks the section without reading files: sizes, timeouts, the DID.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_tools == 0 {
            return Err("mcp.max_tools must be at least 1".into());
        }
        if self.max_body_bytes < 1024 {
            return Err("mcp.max_body_bytes must be at least 1024".into());
        }
        if self.call_timeout_ms == 0 || self.keep_alive_ms == 0 {
            return Err("mcp.call_timeout_ms and mcp.keep_alive_ms must be at least 1".into());
        }
        if let Some(d) = &self.did {
            a2a_core::did::Did::parse(d).map_err(|e| format!("mcp.did: {e}"))?;
        }
        if self.key_file.is_some() && self.did.is_none() {
            return Err("mcp.key_file needs mcp.did: the DID whose document lists the key".into());
        }
        Ok(())
    }

    /// The front's settings: `host_did` is the gateway's or agent's DID (the default caller DID is made from it),
    /// `base` the directory `key_file` is read from.
    pub fn front_config(&self, host_did: &str, base: &Path) -> Result<FrontConfig, String> {
        self.validate()?;
        let did = match &self.did {
            Some(d) => d.clone(),
            None => format!("{host_did}:mcp"),
        };
        let identity = match &self.key_file {
            Some(f) => {
                let f = base.join(f);
                a2a_client::Identity::from_pem_file(&did, &self.key_id, &f)
                    .map_err(|e| format!("mcp.key_file {}: {e}", f.display()))?
            }
            None => a2a_client::Identity::unsigned(&did).map_err(|e| format!("mcp.did {did:?}: {e}"))?,
        };
        Ok(FrontConfig::new(identity)
            .with_allowed_hosts(self.allowed_hosts.clone())
            .with_max_tools(self.max_tools)
            .with_max_body_bytes(self.max_body_bytes)
            .with_call_timeout(Duration::from_millis(self.call_timeout_ms))
            .with_keep_alive(Duration::from_millis(self.keep_alive_ms)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_caller_did_is_the_hosts_with_mcp_added() {
        let c = McpSection::default().front_config("did:web:gw.example.com", Path::new(".")).expect("config");
        assert_eq!(c.identity.did(), "did:web:gw.example.com:mcp");
        assert!(!c.identity.can_sign());
    }

    #[test]
    fn a_key_without_a_did_is_refused() {
        let s = McpSection { key_file: Some("k.pem".into()), ..McpSection::default() };
        assert!(s.validate().expect_err("refused").contains("mcp.did"));
    }
}
