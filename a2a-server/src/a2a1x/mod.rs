//! The bridge to the Linux Foundation Agent2Agent (A2A) protocol 1.x (`spec/PROTOCOL.md` §20, BR-1..BR-18): an
//! A2A 1.0 Agent Card at `/.well-known/agent-card.json` (signed with the agent's key, BR-5), and the JSON-RPC
//! (`POST /a2a1x/jsonrpc`) and HTTP+JSON (`/a2a1x/...`) operations, each carried out by the agent's own NEGOTIATE,
//! EXECUTE, CONFIRM, RESULT and CANCEL.
//!
//! ```no_run
//! # async fn run(agent: a2a_server::Agent) -> Result<(), Box<dyn std::error::Error>> {
//! use a2a_server::a2a1x::{Bridge, BridgeOptions};
//! let bridge = Bridge::new(&agent, BridgeOptions::default())?;
//! let app = axum::Router::new().merge(agent.router()).merge(bridge.router());
//! # let _ = app; Ok(()) }
//! ```

mod card;
mod http_json;
mod jsonrpc;
mod ops;
mod stream;

// The bridge's protocol pieces, shared with the gateway, at the paths this module has always had them.
pub use a2a_runtime::a2a1x::{
    ANONYMOUS_SENDER, CardSource, RpcRequest, bridge_asked, bridge_asked_in, bridge_to_at, check_headers,
    check_version, envelope, error, list_query, method_error, origin_of, origin_of_host, params, parse_rpc,
    read_body_within, render_card, sender_of, sign_card_with,
};

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use a2a_core::keys::SigningKey;
use axum::Router;
use axum::http::HeaderMap;
use bytes::Bytes;
use serde::Deserialize;

use crate::Agent;
use crate::router::AppState;

/// The limits of the bridge (BR-9, BR-16); the body size is the agent's `max_body_bytes`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BridgeLimits {
    /// Most parts in a message.
    pub max_parts: usize,
    /// Longest `text` part, in bytes of UTF-8.
    pub max_text_bytes: usize,
    /// Streams open at once.
    pub max_streams: usize,
    /// Tasks remembered for `ListTasks` and `history` (oldest forgotten first).
    pub max_indexed_tasks: usize,
    /// How often a stream reads its execution, in milliseconds.
    pub stream_poll_ms: u64,
}

impl Default for BridgeLimits {
    fn default() -> Self {
        BridgeLimits {
            max_parts: 16,
            max_text_bytes: 65_536,
            max_streams: 256,
            max_indexed_tasks: 10_000,
            stream_poll_ms: 200,
        }
    }
}

/// How the bridge is served.
#[derive(Clone, Default)]
pub struct BridgeOptions {
    /// The agent's public URL (`https://agent.example.com`); without it, `http://` and the request's `Host`.
    pub public_url: Option<String>,
    /// The key that signs the card (BR-5): its id in the agent's DID document, and the key. Unsigned without.
    pub signing_key: Option<(String, SigningKey)>,
    /// The skill a message that names none goes to when the agent has several and not exactly one of them accepts
    /// the message (BR-27); it must be on the card. Without it such a message is refused with the list of skills.
    pub default_skill: Option<String>,
    /// The limits.
    pub limits: BridgeLimits,
}

/// Why a bridge could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BridgeBuildError {
    /// The public URL is not an absolute http(s) URL.
    #[error(
        "the bridge's public URL {0:?} is not an absolute http(s) URL without path (e.g. https://agent.example.com)"
    )]
    PublicUrl(String),
    /// The signing key id is not valid.
    #[error("the card signing key id {0:?} is not 1-128 of A-Z a-z 0-9 . _ ~ -")]
    KeyId(String),
    /// A limit is zero.
    #[error("bridge limit {0} must be at least 1")]
    Limit(&'static str),
    /// The default skill is not a skill of the card.
    #[error("the default skill {0:?} is not one of this agent's A2A 1.x skills ({1}; did_auth capabilities are not)")]
    DefaultSkill(String, String),
}

/// What the `/a2a` router needs to offer `bridge_to` (BR-17).
pub(crate) struct Announce {
    pub(crate) public_url: Option<String>,
    pub(crate) skills: Vec<String>,
}

/// A task the bridge took: for `ListTasks`, `contextId` and `history`.
#[derive(Clone)]
struct Indexed {
    seq: u64,
    task_id: String,
    sender: String,
    context_id: String,
    message: a2a_core::a2a1x::Message,
}

#[derive(Default)]
struct TaskIndex {
    next_seq: u64,
    order: VecDeque<Indexed>,
    by_id: HashMap<String, u64>,
}

/// Shared state of the bridge.
pub(crate) struct Inner {
    pub(crate) app: Arc<AppState>,
    pub(crate) opts: BridgeOptions,
    /// (sender, capability) -> (negotiation id, reuse until): a bounded cache (LIM-6: `O(1)` per insert, no clear-all
    /// when full).
    negotiations: moka::sync::Cache<(String, String), (String, u64)>,
    index: Mutex<TaskIndex>,
    cards: Mutex<HashMap<String, Bytes>>,
    pub(crate) streams: Arc<tokio::sync::Semaphore>,
    /// The input schema of each skill, compiled, to choose the skill of a message that names none (BR-27).
    input_schemas: HashMap<String, a2a_core::negotiation::AgreedSchema>,
}

/// The bridge of one agent; mount [`Bridge::router`] next to [`Agent::router`].
#[derive(Clone)]
pub struct Bridge {
    inner: Arc<Inner>,
}

impl Bridge {
    /// A bridge to `agent`. Also makes the agent's NEGOTIATE offer `bridge_to` (BR-17).
    pub fn new(agent: &Agent, opts: BridgeOptions) -> Result<Self, BridgeBuildError> {
        if let Some(u) = &opts.public_url {
            let ok = url::Url::parse(u)
                .is_ok_and(|p| matches!(p.scheme(), "http" | "https") && p.has_host() && p.path() == "/");
            if !ok || u.ends_with('/') {
                return Err(BridgeBuildError::PublicUrl(u.clone()));
            }
        }
        if let Some((id, _)) = &opts.signing_key
            && !a2a_core::integrity::is_valid_key_id(id)
        {
            return Err(BridgeBuildError::KeyId(id.clone()));
        }
        let l = &opts.limits;
        for (name, v) in [
            ("max_parts", l.max_parts),
            ("max_text_bytes", l.max_text_bytes),
            ("max_streams", l.max_streams),
            ("max_indexed_tasks", l.max_indexed_tasks),
            ("stream_poll_ms", l.stream_poll_ms as usize),
        ] {
            if v == 0 {
                return Err(BridgeBuildError::Limit(name));
            }
        }
        let app = agent.state.clone();
        let skills = card::skills(&app.engine);
        if let Some(d) = &opts.default_skill
            && !skills.iter().any(|c| &c.decl.name == d)
        {
            let names = skills.iter().map(|c| c.decl.name.as_str()).collect::<Vec<_>>().join(", ");
            return Err(BridgeBuildError::DefaultSkill(d.clone(), names));
        }
        let input_schemas = skills
            .iter()
            .filter_map(|c| {
                a2a_core::negotiation::AgreedSchema::compile(&c.decl.input_schema)
                    .ok()
                    .map(|s| (c.decl.name.clone(), s))
            })
            .collect();
        let _ = app.bridge.set(Announce {
            public_url: opts.public_url.clone(),
            skills: card::skills(&app.engine).into_iter().map(|c| c.decl.name.clone()).collect(),
        });
        let streams = Arc::new(tokio::sync::Semaphore::new(opts.limits.max_streams));
        Ok(Bridge {
            inner: Arc::new(Inner {
                app,
                opts,
                // LRU, not moka's default TinyLFU: TinyLFU refuses a new key while the cache is full of keys seen as
                // often, so past the bound every new caller would re-negotiate on each message (LIM-6).
                negotiations: moka::sync::Cache::builder()
                    .max_capacity(ops::MAX_CACHED_NEGOTIATIONS)
                    .eviction_policy(moka::policy::EvictionPolicy::lru())
                    .build(),
                index: Mutex::default(),
                cards: Mutex::default(),
                streams,
                input_schemas,
            }),
        })
    }

    /// The card and the 1.x endpoints (BR-1).
    pub fn router(&self) -> Router {
        Router::new()
            .route(a2a_core::a2a1x::AGENT_CARD_PATH, axum::routing::get(card::serve))
            .route("/a2a1x/jsonrpc", axum::routing::post(jsonrpc::serve))
            .merge(http_json::routes())
            .with_state(self.inner.clone())
    }
}

impl Inner {
    /// The origin the card and `bridge_to` name: the public URL, or `http://` and the request's `Host`.
    pub(crate) fn origin(&self, headers: &HeaderMap) -> String {
        origin_of(self.opts.public_url.as_deref(), headers)
    }

    fn remember(&self, task_id: &str, sender: &str, context_id: &str, message: &a2a_core::a2a1x::Message) {
        let mut idx = self.index.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if idx.by_id.contains_key(task_id) {
            return;
        }
        let seq = idx.next_seq;
        idx.next_seq += 1;
        idx.by_id.insert(task_id.to_owned(), seq);
        idx.order.push_back(Indexed {
            seq,
            task_id: task_id.to_owned(),
            sender: sender.to_owned(),
            context_id: context_id.to_owned(),
            message: message.clone(),
        });
        while idx.order.len() > self.opts.limits.max_indexed_tasks {
            if let Some(old) = idx.order.pop_front() {
                idx.by_id.remove(&old.task_id);
            }
        }
    }

    fn indexed(&self, task_id: &str) -> Option<Indexed> {
        let idx = self.index.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let seq = *idx.by_id.get(task_id)?;
        let first = idx.order.front()?.seq;
        idx.order.get(usize::try_from(seq - first).ok()?).cloned()
    }

    /// The caller's indexed tasks, newest first, with sequence numbers below `before`.
    fn list_indexed(&self, sender: &str, context: Option<&str>, before: u64) -> Vec<Indexed> {
        let idx = self.index.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        idx.order
            .iter()
            .rev()
            .filter(|t| t.seq < before && t.sender == sender && context.is_none_or(|c| t.context_id == c))
            .cloned()
            .collect()
    }
}

/// The `bridge_to` of a NEGOTIATE (BR-17) when the caller announced `a2a1x` in `A2A-Bridges` and the capability is on
/// the card.
pub(crate) fn bridge_to(state: &AppState, headers: &HeaderMap, capability: &str) -> Option<a2a_core::wire::BridgeTo> {
    let announce = state.bridge.get()?;
    if !bridge_asked(headers) || !announce.skills.iter().any(|s| s == capability) {
        return None;
    }
    Some(bridge_to_at(&origin_of(announce.public_url.as_deref(), headers), capability))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The negotiation-id cache filled past its bound (LIM-6): it holds at most the bound, and the newest entries
    /// are kept and reused (the bridge does not re-negotiate for the caller who just negotiated).
    #[tokio::test]
    async fn the_bridge_s_negotiation_cache_filled_past_its_bound_stays_within_it_and_keeps_the_newest() {
        let echo = a2a_core::capability::CapabilityDeclaration {
            name: "echo_message".into(),
            description: "Echoes its input.".into(),
            auth_requirement: a2a_core::capability::AuthRequirement::None,
            sub_capabilities: vec![],
            region_restriction: vec![],
            input_schema: serde_json::json!({"type": "object"}),
            output_schema: None,
            estimated_cost: None,
            estimated_latency_ms: None,
            fallback_for: vec![],
        };
        let agent = crate::AgentBuilder::new("did:web:localhost%3A1")
            .capability(echo, crate::handler::builtin::echo())
            .build()
            .expect("agent");
        let bridge = Bridge::new(&agent, BridgeOptions::default()).expect("bridge");
        let cache = &bridge.inner.negotiations;
        let bound = ops::MAX_CACHED_NEGOTIATIONS;
        let total = bound * 2;
        for i in 0..total {
            cache.insert((format!("did:web:s{i}.example"), "echo_message".to_owned()), (format!("n{i}"), u64::MAX));
            if i % 1024 == 0 {
                cache.run_pending_tasks();
            }
        }
        cache.run_pending_tasks();
        assert!(cache.entry_count() <= bound, "{} entries held, bound {bound}", cache.entry_count());
        for i in total - 4..total {
            let got = cache.get(&(format!("did:web:s{i}.example"), "echo_message".to_owned()));
            assert_eq!(got.map(|(id, _)| id), Some(format!("n{i}")), "the newest entry {i} is kept");
        }
    }
}
