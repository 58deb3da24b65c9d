//! Sessions and agent-to-agent conversations (`spec/PROTOCOL.md` §17): the registry, send and runs, ping-pong,
//! announce, history, spawn and policy, served below the agent's A2A endpoint when sessions are enabled.
//!
//! The wire types and the pure rules (skip tokens, addresses, allow lists, wait chains, redaction, provenance) live
//! in [`a2a_core::sessions`]; this module holds what needs a runtime: state ([`store`]), HTTP ([`routes`]) and the
//! session handlers ([`handler`]).
//!
//! ```no_run
//! use a2a_server::AgentBuilder;
//! use a2a_server::sessions::{HandlerFailure, HostedSession, SessionsBuilder};
//! use a2a_core::sessions::Delivery;
//!
//! # fn build() -> Result<(), Box<dyn std::error::Error>> {
//! let desk = HostedSession::new("bonus-desk", "Knows the boss's payroll, bonuses and performance reviews.");
//! let sessions = SessionsBuilder::new().session(desk, |d: Delivery| async move {
//!     Ok::<_, HandlerFailure>(format!("You asked: {}", d.text))
//! });
//! let agent = AgentBuilder::new("did:web:work.example.com").sessions(sessions).build()?;
//! # let _ = agent; Ok(()) }
//! ```

pub mod config;
pub mod events;
pub mod handler;
pub mod history;
pub mod pingpong;
pub mod policy;
pub mod registry;
pub(crate) mod routes;
pub mod runs;
pub mod settings;
pub mod spawn;
pub mod store;
pub mod webhooks;

use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use a2a_core::error::{A2aError, ErrorCode};
use a2a_core::keys::SigningKey;
use a2a_core::sessions::{HandlerKind, Session, SessionAddress, SessionKind};

pub use handler::{HandlerFailure, SessionHandler};
pub use settings::{SessionSettings, Visibility};
pub use store::{MemorySessionStore, SessionRecord, SessionStore};
pub use webhooks::WebhookStats;

use crate::store::{now_ms, timestamp};

/// A session the agent hosts with a handler (SES-3, SES-9).
#[derive(Debug, Clone)]
pub struct HostedSession {
    /// The session key.
    pub key: String,
    /// A label to find it by.
    pub label: Option<String>,
    /// Its kind (default `main`).
    pub kind: SessionKind,
    /// What it is about.
    pub summary: String,
}

impl HostedSession {
    /// A `main` session with this key and summary.
    pub fn new(key: impl Into<String>, summary: impl Into<String>) -> Self {
        HostedSession { key: key.into(), label: None, kind: SessionKind::Main, summary: summary.into() }
    }

    /// With a label.
    #[must_use]
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// With a kind.
    #[must_use]
    pub fn kind(mut self, kind: SessionKind) -> Self {
        self.kind = kind;
        self
    }
}

/// Configures the sessions of an agent; give it to [`crate::AgentBuilder::sessions`].
#[must_use]
pub struct SessionsBuilder {
    settings: SessionSettings,
    hosted: Vec<(HostedSession, Option<Arc<dyn SessionHandler>>)>,
    templates: BTreeMap<String, Arc<dyn SessionHandler>>,
    default_template: Option<String>,
    store: Option<Arc<dyn SessionStore>>,
    endpoint: Option<String>,
    signer: Option<(String, SigningKey)>,
}

impl Default for SessionsBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl SessionsBuilder {
    /// Sessions with the default settings, no hosted session and the memory store.
    pub fn new() -> Self {
        SessionsBuilder {
            settings: SessionSettings::default(),
            hosted: Vec::new(),
            templates: BTreeMap::new(),
            default_template: None,
            store: None,
            endpoint: None,
            signer: None,
        }
    }

    /// The key (published in the agent's DID document as `<did>#<key_id>`) that signs the agent's own session
    /// requests, the ping-pong turns (§9.5); by default the key of [`crate::AgentBuilder::sign_responses`].
    pub fn signing_key(mut self, key_id: impl Into<String>, key: SigningKey) -> Self {
        self.signer = Some((key_id.into(), key));
        self
    }

    /// The limits and policy.
    pub fn settings(mut self, settings: SessionSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Hosts a session answered by `handler`.
    pub fn session(self, session: HostedSession, handler: impl SessionHandler) -> Self {
        self.session_boxed(session, Arc::new(handler))
    }

    /// Hosts a session answered by an already shared handler.
    pub fn session_boxed(mut self, session: HostedSession, handler: Arc<dyn SessionHandler>) -> Self {
        self.hosted.push((session, Some(handler)));
        self
    }

    /// Declares an inbox session owned by the agent itself (SES-5): its deliveries wait in its inbox until the agent
    /// (a request signed as the agent's DID) reads and answers them.
    pub fn inbox_session(mut self, session: HostedSession) -> Self {
        self.hosted.push((session, None));
        self
    }

    /// A spawn template (SPN-1): workers spawned with `template: name` are answered by `handler`; the first one
    /// added is the default.
    pub fn spawn_template(self, name: impl Into<String>, handler: impl SessionHandler) -> Self {
        self.spawn_template_boxed(name, Arc::new(handler))
    }

    /// A spawn template with an already shared handler.
    pub fn spawn_template_boxed(mut self, name: impl Into<String>, handler: Arc<dyn SessionHandler>) -> Self {
        let name = name.into();
        if self.default_template.is_none() {
            self.default_template = Some(name.clone());
        }
        self.templates.insert(name, handler);
        self
    }

    /// The store (default: a new [`MemorySessionStore`]); agents sharing one see each other's sessions.
    pub fn store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// The agent's A2A endpoint (`https://host/a2a`), listed with its sessions and given to targets for ping-pong.
    pub fn endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// Checks the sessions and builds the runtime for the agent `did`.
    pub(crate) fn build(self, did: &str, signer: Option<(String, SigningKey)>) -> Result<Arc<Sessions>, String> {
        let agent = a2a_core::did::Did::parse(did).map_err(|e| e.to_string())?;
        let mut handlers = HashMap::new();
        let mut hosted = Vec::new();
        let now = now_ms();
        for (h, handler) in self.hosted {
            let address = SessionAddress::new(&agent, &h.key).map_err(|e| format!("hosted session: {e}"))?;
            if handlers.contains_key(&h.key) || hosted.iter().any(|r: &SessionRecord| r.session.session_key == h.key) {
                return Err(format!("hosted session {:?} is declared twice", h.key));
            }
            let kind = if handler.is_some() { HandlerKind::Hosted } else { HandlerKind::Inbox };
            let owner = handler.is_none().then(|| did.to_owned());
            if let Some(handler) = handler {
                handlers.insert(h.key.clone(), handler);
            }
            hosted.push(SessionRecord {
                session: Session {
                    address,
                    session_key: h.key.clone(),
                    agent: did.to_owned(),
                    endpoint: None,
                    label: h.label,
                    kind: h.kind,
                    summary: h.summary,
                    handler: kind,
                    owner,
                    created_at: timestamp(now),
                    updated_at: timestamp(now),
                    ended_at: None,
                    parent: None,
                    depth: 0,
                },
                updated_ms: now,
                spawn: None,
            });
        }
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_millis(self.settings.limits.max_wait_ms.saturating_add(5_000)))
            .build()
            .map_err(|e| e.to_string())?;
        let stop = tokio_util::sync::CancellationToken::new();
        let signer = self.signer.or(signer);
        let webhooks = webhooks::Webhooks::start(&self.settings.webhooks, did, signer.clone(), &stop)?;
        let sessions = Arc::new(Sessions {
            did: did.to_owned(),
            settings: self.settings,
            handlers,
            hosted,
            default_template: self.default_template,
            templates: self.templates,
            shared_store: self.store.is_some(),
            store: self.store.unwrap_or_else(|| Arc::new(MemorySessionStore::new())),
            endpoint: RwLock::new(self.endpoint),
            record_writes: tokio::sync::Mutex::new(()),
            slots: Mutex::new(HashMap::new()),
            slot_seq: AtomicU64::new(0),
            signer,
            http,
            spawned_in_progress: AtomicUsize::new(0),
            streams: stop.child_token(),
            stop,
            webhooks,
        });
        sessions.start_heartbeat();
        Ok(sessions)
    }
}

/// The sessions runtime of one agent.
pub struct Sessions {
    pub(crate) did: String,
    pub(crate) settings: SessionSettings,
    handlers: HashMap<String, Arc<dyn SessionHandler>>,
    hosted: Vec<SessionRecord>,
    templates: BTreeMap<String, Arc<dyn SessionHandler>>,
    default_template: Option<String>,
    pub(crate) store: Arc<dyn SessionStore>,
    shared_store: bool,
    endpoint: RwLock<Option<String>>,
    /// Held while a hosted session's record is read and written back ([`Sessions::refresh_hosted`], ending a
    /// session): the heartbeat's refresh and the one after [`Sessions::set_endpoint`] never interleave, so a refresh
    /// that read no endpoint cannot land after one that wrote it, and no refresh writes back a session ended at
    /// shutdown.
    pub(crate) record_writes: tokio::sync::Mutex<()>,
    slots: Mutex<HashMap<String, Slot>>,
    slot_seq: AtomicU64,
    signer: Option<(String, SigningKey)>,
    pub(crate) http: reqwest::Client,
    pub(crate) spawned_in_progress: AtomicUsize,
    stop: tokio_util::sync::CancellationToken,
    /// Cancelled when the agent shuts down: open event streams end (ANN-4).
    pub(crate) streams: tokio_util::sync::CancellationToken,
    pub(crate) webhooks: Option<webhooks::Webhooks>,
}

impl Drop for Sessions {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A readable error with a §12/§17 code.
pub(crate) fn error(code: ErrorCode, message: impl Into<String>) -> A2aError {
    A2aError::with_message(code, message)
}

/// A store failure as `503 store_unavailable`.
pub(crate) fn store_error(e: store::StoreError) -> A2aError {
    error(ErrorCode::STORE_UNAVAILABLE, e.to_string())
}

impl Sessions {
    /// The agent's DID.
    pub fn did(&self) -> &str {
        &self.did
    }

    /// The settings.
    pub fn settings(&self) -> &SessionSettings {
        &self.settings
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.store
    }

    /// Sets the agent's A2A endpoint once it is known (after binding a port).
    pub fn set_endpoint(&self, endpoint: impl Into<String>) {
        let mut g = self.endpoint.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        *g = Some(endpoint.into());
    }

    /// The agent's A2A endpoint, when known.
    pub fn endpoint(&self) -> Option<String> {
        self.endpoint.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The counters of the webhooks (ANN-5), in the configured order; empty when none is configured.
    pub fn webhook_stats(&self) -> Vec<WebhookStats> {
        self.webhooks.as_ref().map_or_else(Vec::new, webhooks::Webhooks::stats)
    }

    /// Ends every open event stream (`GET /a2a/events`) with a last `shutdown` event (ANN-4), and every stream
    /// opened from now on at once. Called when the server receives its shutdown signal, before it drains, so that
    /// the streams do not hold up the drain; [`Sessions::shutdown`] calls it too.
    pub fn close_streams(&self) {
        self.streams.cancel();
    }

    pub(crate) fn signer(&self) -> Option<&(String, SigningKey)> {
        self.signer.as_ref()
    }

    /// The address of session `key` at this agent.
    pub(crate) fn address(&self, key: &str) -> Result<SessionAddress, A2aError> {
        let did = a2a_core::did::Did::parse(&self.did).map_err(|e| error(ErrorCode::INTERNAL_ERROR, e.to_string()))?;
        SessionAddress::new(&did, key).map_err(|e| {
            error(ErrorCode::INVALID_REQUEST, e.to_string()).details(serde_json::json!({"member": "session_key"}))
        })
    }

    /// The handler of a session: its own for a hosted one, its template's for a worker, none for an inbox one.
    pub(crate) fn handler_for(&self, rec: &SessionRecord) -> Option<Arc<dyn SessionHandler>> {
        if rec.session.agent != self.did {
            return None;
        }
        match (&rec.spawn, rec.session.handler) {
            (Some(s), _) => self.templates.get(&s.template).cloned(),
            (None, HandlerKind::Hosted) => self.handlers.get(&rec.session.session_key).cloned(),
            (None, HandlerKind::Inbox) => None,
        }
    }

    /// The spawn template `name`, or the default one.
    pub(crate) fn template(&self, name: Option<&str>) -> Option<String> {
        match name {
            Some(n) => self.templates.contains_key(n).then(|| n.to_owned()),
            None => self.default_template.clone(),
        }
    }

    /// Writes the hosted sessions to the store and refreshes them while the agent runs (SES-6).
    fn start_heartbeat(self: &Arc<Self>) {
        if self.hosted.is_empty() {
            return;
        }
        let weak = Arc::downgrade(self);
        let stop = self.stop.clone();
        let every = (self.settings.stale_after / 24).max(std::time::Duration::from_secs(1));
        tokio::spawn(async move {
            loop {
                let Some(s) = weak.upgrade() else { return };
                s.refresh_hosted().await;
                drop(s);
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(every) => {}
                }
            }
        });
    }

    /// Refreshes the hosted sessions in the store (SES-6); nothing once the agent shuts down.
    pub async fn refresh_hosted(&self) {
        let _writes = self.record_writes.lock().await;
        if self.stop.is_cancelled() {
            // Shutting down: the sessions are being ended, not refreshed.
            return;
        }
        let now = now_ms();
        for h in &self.hosted {
            let address = h.session.address.to_string();
            let mut rec = match self.store.get_session(&address).await {
                Ok(Some(r)) if r.session.ended_at.is_none() => r,
                Ok(_) => h.clone(),
                Err(e) => {
                    tracing::warn!(error = %e, session = %address, "cannot refresh a hosted session");
                    continue;
                }
            };
            rec.session.endpoint = self.endpoint();
            rec.session.updated_at = timestamp(now);
            rec.updated_ms = now;
            if let Err(e) = self.store.put_session(&rec).await {
                tracing::warn!(error = %e, session = %address, "cannot refresh a hosted session");
            }
        }
    }

    /// The hosted session record `key` as declared (used before the first heartbeat reached the store).
    pub(crate) fn declared(&self, key: &str) -> Option<SessionRecord> {
        self.hosted.iter().find(|h| h.session.session_key == key).cloned().map(|mut r| {
            r.session.endpoint = self.endpoint();
            r
        })
    }

    /// Ends every hosted session (SES-7: an agent ends the sessions it hosts when it shuts down) — unless the store
    /// was given, i.e. may be shared with other processes of the same agent that still serve them (SES-12).
    pub async fn shutdown(&self) {
        self.close_streams();
        self.stop.cancel();
        if self.shared_store {
            return;
        }
        for h in &self.hosted {
            let _ = self.end_session(&h.session.address.to_string(), None).await;
        }
    }

    /// Waits for the session `key` to be free, higher priority first (SND-12); the guard frees it.
    pub(crate) async fn acquire(self: &Arc<Self>, key: &str, priority: u8) -> SlotGuard {
        let rx = {
            let mut slots = self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let slot = slots.entry(key.to_owned()).or_default();
            if slot.busy {
                let (tx, rx) = tokio::sync::oneshot::channel();
                let seq = self.slot_seq.fetch_add(1, Ordering::Relaxed);
                slot.waiting.push(SlotWaiter { priority, seq: std::cmp::Reverse(seq), tx });
                Some(rx)
            } else {
                slot.busy = true;
                None
            }
        };
        if let Some(rx) = rx {
            // The sender is dropped only after it handed over the slot, or with the runtime.
            let _ = rx.await;
        }
        SlotGuard { sessions: self.clone(), key: key.to_owned() }
    }

    fn release(&self, key: &str) {
        let mut slots = self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(slot) = slots.get_mut(key) else { return };
        while let Some(w) = slot.waiting.pop() {
            if w.tx.send(()).is_ok() {
                return;
            }
        }
        slots.remove(key);
    }
}

#[derive(Default)]
struct Slot {
    busy: bool,
    waiting: BinaryHeap<SlotWaiter>,
}

struct SlotWaiter {
    priority: u8,
    seq: std::cmp::Reverse<u64>,
    tx: tokio::sync::oneshot::Sender<()>,
}

impl PartialEq for SlotWaiter {
    fn eq(&self, o: &Self) -> bool {
        (self.priority, self.seq) == (o.priority, o.seq)
    }
}
impl Eq for SlotWaiter {}
impl PartialOrd for SlotWaiter {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for SlotWaiter {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.priority, self.seq).cmp(&(o.priority, o.seq))
    }
}

/// Holds a session while one delivery is handled (SND-12).
pub(crate) struct SlotGuard {
    sessions: Arc<Sessions>,
    key: String,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        self.sessions.release(&self.key);
    }
}

tokio::task_local! {
    /// The wait chain of the delivery being handled (POL-5), for sends made from within a handler.
    static WAIT_CHAIN: String;
}

/// The `A2A-Wait-Chain` value a send made from within the current handler must carry (POL-5): the chain the
/// delivery came with plus the handling session, when its requester is waiting. `None` outside a handler or when
/// nobody waits.
pub fn current_wait_chain() -> Option<String> {
    WAIT_CHAIN.try_with(Clone::clone).ok().filter(|c| !c.is_empty())
}

/// Runs `f` with the wait chain visible to [`current_wait_chain`].
pub(crate) async fn with_wait_chain<F: std::future::Future>(chain: String, f: F) -> F::Output {
    WAIT_CHAIN.scope(chain, f).await
}
