//! Sessions and agent-to-agent conversations (`spec/PROTOCOL.md` §17): register and list sessions, send a message
//! and wait for the reply, await a run, read a transcript, spawn a worker, answer an inbox, and follow an agent's
//! event channel.
//!
//! A [`Sessions`] handle talks to one agent's session endpoints with the [`Client`]'s identity: requests are signed
//! as the rest of the client's (SES-1, SES-2: `did_auth` unless the client never signs), responses verified when
//! signed. Outcomes are values — a send answers a [`SendResponse`] whose [`SendStatus`] says exactly what happened
//! (`accepted`, `ok`, `no_reply`, `timeout`, `error`, `forbidden`) — and every failure is a [`ClientError`] with
//! readable text and a hint.
//!
//! ```no_run
//! use a2a_client::{Client, Identity};
//! use a2a_client::sessions::{message, SendStatus};
//! use std::time::Duration;
//!
//! # async fn run() -> Result<(), a2a_client::ClientError> {
//! let client = Client::builder(Identity::generate("did:web:main.example.com", "key-1")?).build()?;
//! let work = client.sessions("https://work.example.com/a2a")?;
//! let mut ask = message("bonus-desk", "What is the boss's performance bonus this month?");
//! ask.from = Some("main".into());
//! let answer = work.ask(ask, Some(Duration::from_secs(30))).await?;
//! match answer.status {
//!     SendStatus::Ok => println!("{}", answer.reply.unwrap_or_default()),
//!     // Still working: the reply is kept; read it later.
//!     SendStatus::Accepted => println!("run {} still running", answer.run_id.unwrap_or_default()),
//!     other => println!("{}: {:?}", other.as_str(), answer.error),
//! }
//! # Ok(()) }
//! ```

mod events;
mod validate;

use std::time::{Duration, Instant};

use a2a_core::capability::AuthRequirement;
use a2a_core::error::{ErrorCode, ErrorObject};
use a2a_core::execution_id::ExecutionId;
use reqwest::Method;
use serde_json::Value;

pub use a2a_core::sessions::{
    AnnounceOutcome, AnnounceStatus, Attachment, Cleanup, ContextMessage, ContextMode, Delivery, EndedBy, HandlerKind,
    History, HistoryMessage, Inbox, Provenance, Role, Run, RunReply, RunState, SendRequest, SendResponse, SendStatus,
    Session, SessionAddress, SessionKind, SessionList, SessionRegistration, SpawnRequest, SpawnResponse,
    Step as DeliveryStep, Turn, TurnRef, WaitChain,
};
pub use events::{Event, EventStream, EventsOptions};
pub use validate::{DEFAULT_MAX_ATTACHMENT_BYTES, attachment_from_bytes, attachment_from_file, check_send};

use crate::client::Client;
use crate::endpoint::Endpoint;
use crate::error::{ClientError, Step};
use crate::transport::Response;

/// A send to session `target` with `text` and every other member at its default (§17.3); set the others on the
/// returned request.
pub fn message(target: impl Into<String>, text: impl Into<String>) -> SendRequest {
    SendRequest { target: Some(target.into()), text: text.into(), ..SendRequest::default() }
}

/// The wait of a blocking ask (SND-3): `wait`, or 60 s by default, never more than 10 min.
pub fn ask_wait(wait: Option<Duration>) -> Duration {
    let max = Duration::from_millis(a2a_core::sessions::MAX_WAIT_MS);
    wait.unwrap_or(Duration::from_millis(a2a_core::sessions::DEFAULT_ASK_WAIT_MS)).min(max)
}

/// Filters of `GET /a2a/sessions` (SES-8): the one wire type of a2a-core, which the agent parses.
pub use a2a_core::sessions::ListQuery;

/// Bounds of `GET /a2a/sessions/{key}/history` (HIS-2, HIS-3).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistoryQuery {
    /// At most this many messages from the end (1–1000; default 50).
    pub limit: Option<u32>,
    /// At most this many bytes of messages (default and cap 80 KiB).
    pub max_bytes: Option<u64>,
    /// Include `tool` messages.
    pub include_tools: bool,
}

impl HistoryQuery {
    /// The query string, empty when nothing is set.
    pub fn to_query(&self) -> String {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        if let Some(l) = self.limit {
            q.append_pair("limit", &l.to_string());
        }
        if let Some(b) = self.max_bytes {
            q.append_pair("max_bytes", &b.to_string());
        }
        if self.include_tools {
            q.append_pair("include_tools", "true");
        }
        q.finish()
    }
}

/// What `GET /a2a/runs/{run_id}` waits for (SND-10).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Until {
    /// The round-one outcome (the agent's default).
    #[default]
    Reply,
    /// The whole run: ping-pong and announce done.
    Done,
}

impl Until {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Until::Reply => "reply",
            Until::Done => "done",
        }
    }

    /// Whether `run` has reached this point.
    pub fn reached(self, run: &Run) -> bool {
        match self {
            Until::Reply => run.status.is_final(),
            Until::Done => run.state == RunState::Done,
        }
    }
}

/// Where a send sits in a chain of deliveries (POL-4, POL-5): set it when sending from within a session handler,
/// so that the agents can refuse loops and wait cycles.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SendOptions {
    /// `A2A-Hop`: the hop count of the delivery being handled (a direct send carries none).
    pub hop: Option<u32>,
    /// `A2A-Wait-Chain`: the sessions already waiting on this chain, as given to the handler (`A2A_WAIT_CHAIN`).
    pub wait_chain: WaitChain,
}

/// The answer to a register (SES-4).
#[derive(Debug, Clone, PartialEq)]
pub struct Registered {
    /// The session.
    pub session: Session,
    /// `true` for a new registration (`201`), `false` for a refresh (`200`).
    pub created: bool,
}

/// The session endpoints of one agent, used with a [`Client`]'s identity. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Sessions {
    client: Client,
    endpoint: Endpoint,
    max_attachment_bytes: usize,
}

impl Client {
    /// The session endpoints (§17) of the agent at `url`.
    pub fn sessions(&self, url: &str) -> Result<Sessions, ClientError> {
        Ok(Sessions {
            client: self.clone(),
            endpoint: Endpoint::parse(url)?,
            max_attachment_bytes: DEFAULT_MAX_ATTACHMENT_BYTES,
        })
    }
}

/// A request to one session endpoint.
struct Call<'a> {
    step: Step,
    method: Method,
    tail: String,
    query: String,
    body: Option<&'a Value>,
    /// Added to the step timeout: the time the agent may hold the request (long-poll, `wait_ms`).
    held: Duration,
    headers: Vec<(&'static str, String)>,
}

impl<'a> Call<'a> {
    fn new(step: Step, method: Method, tail: impl Into<String>) -> Self {
        Call {
            step,
            method,
            tail: tail.into(),
            query: String::new(),
            body: None,
            held: Duration::ZERO,
            headers: vec![],
        }
    }
}

fn key_segment(key: &str) -> Result<&str, ClientError> {
    // A valid key has only unreserved characters, so it is its own path segment.
    a2a_core::sessions::validate_session_key(key).map_err(|e| ClientError::invalid(e.0))?;
    Ok(key)
}

fn run_segment(run_id: &str) -> Result<String, ClientError> {
    ExecutionId::parse(run_id)
        .map(|id| id.to_path_segment())
        .map_err(|e| ClientError::invalid(format!("{run_id:?} is not a run id: {e}")))
}

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, ClientError> {
    serde_json::to_value(v).map_err(|e| ClientError::invalid(e.to_string()))
}

impl Sessions {
    /// The agent's endpoint.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Checks attachments against this decoded size each instead of the default 256 KiB (the agent's
    /// `limits.max_attachment_bytes`, SND-2).
    #[must_use]
    pub fn max_attachment_bytes(mut self, bytes: usize) -> Self {
        self.max_attachment_bytes = bytes;
        self
    }

    /// The agent's DID (DISCOVER, cached): the audience of the signatures.
    pub async fn agent(&self) -> Result<String, ClientError> {
        Ok(self.client.discover_at(&self.endpoint, None, false).await?.agent.clone())
    }

    /// The requester's own address for session `key`: `{client DID}#{key}`.
    pub fn own_address(&self, key: &str) -> Result<SessionAddress, ClientError> {
        let did =
            a2a_core::did::Did::parse(self.client.identity().did()).map_err(|e| ClientError::invalid(e.to_string()))?;
        SessionAddress::new(&did, key).map_err(|e| ClientError::invalid(e.0))
    }

    async fn call(&self, c: Call<'_>) -> Result<Response, ClientError> {
        let agent = self.agent().await?;
        let mut req = self.client.request(c.step, &self.endpoint, c.method, c.tail);
        if let Some(b) = c.body {
            req = req.json(b);
        }
        if !c.query.is_empty() {
            req.query = Some(c.query);
        }
        req.agent = Some(agent);
        // SES-2: one requirement for every session endpoint, `did_auth` by default.
        req.sign = self.client.should_sign(Some(AuthRequirement::DidAuth));
        req.credentials = true;
        req.timeout += c.held;
        req.headers.extend(c.headers);
        self.client.send(req, None).await
    }

    // --- registry (§17.2) -------------------------------------------------------------------------------------

    /// Registers (or refreshes) an inbox session owned by this client (SES-4).
    pub async fn register(&self, registration: &SessionRegistration) -> Result<Registered, ClientError> {
        key_segment(&registration.session_key)?;
        let n = registration.summary.chars().count();
        if !(5..=2000).contains(&n) {
            return Err(ClientError::invalid(format!("a session summary is 5 to 2000 characters (got {n})")));
        }
        if let Some(l) = &registration.label
            && !(1..=512).contains(&l.chars().count())
        {
            return Err(ClientError::invalid("a session label is 1 to 512 characters"));
        }
        let body = to_value(registration)?;
        let mut c = Call::new(Step::SessionRegister, Method::POST, "/sessions");
        c.body = Some(&body);
        let resp = self.call(c).await?;
        Ok(Registered { session: resp.json(Step::SessionRegister)?, created: resp.status == 201 })
    }

    /// Lists the sessions visible to this client (SES-3, SES-8).
    pub async fn list(&self, query: &ListQuery) -> Result<SessionList, ClientError> {
        if let Some(l) = query.limit
            && !(1..=200).contains(&l)
        {
            return Err(ClientError::invalid(format!("the list limit is 1 to 200 (got {l})")));
        }
        let mut c = Call::new(Step::SessionList, Method::GET, "/sessions");
        c.query = query.to_query();
        self.call(c).await?.json(Step::SessionList)
    }

    /// Reads one session.
    pub async fn get(&self, key: &str) -> Result<Session, ClientError> {
        let c = Call::new(Step::SessionRead, Method::GET, format!("/sessions/{}", key_segment(key)?));
        self.call(c).await?.json(Step::SessionRead)
    }

    /// Ends a session this client owns (SES-7); the answer has `ended_at`.
    pub async fn end(&self, key: &str) -> Result<Session, ClientError> {
        let c = Call::new(Step::SessionEnd, Method::DELETE, format!("/sessions/{}", key_segment(key)?));
        self.call(c).await?.json(Step::SessionEnd)
    }

    // --- send (§17.3, §17.4) ----------------------------------------------------------------------------------

    /// Sends a message (§17.3). The request is checked first (text, target, attachments within their bounds,
    /// SND-1, SND-2) and `wait_ms` lowered to 10 minutes (SND-3); the answer is an outcome, `forbidden` included
    /// (SND-7): only a failure to deliver or a refusal of the request itself is an error.
    pub async fn send(&self, request: &SendRequest) -> Result<SendResponse, ClientError> {
        self.send_with(request, &SendOptions::default()).await
    }

    /// [`Sessions::send`] from within a session handler: with the delivery's hop count and wait chain (POL-4,
    /// POL-5). A send that waits for a reply adds the requester's own address (`from`) to the chain.
    pub async fn send_with(&self, request: &SendRequest, opts: &SendOptions) -> Result<SendResponse, ClientError> {
        let mut request = request.clone();
        request.wait_ms = request.wait_ms.map(|w| w.min(a2a_core::sessions::MAX_WAIT_MS));
        let body = to_value(&request)?;
        let len = body_len(&body);
        // Everything that needs no answer from the agent is checked first, so that a bad send costs no round trip.
        check_send(&request, self.max_attachment_bytes, usize::MAX, len)?;
        check_send(&request, self.max_attachment_bytes, self.max_body_bytes().await?, len)?;
        let waits = request.reply != Some(false) && request.wait_ms.unwrap_or(0) > 0;
        let mut c = Call::new(Step::SessionSend, Method::POST, "/sessions/send");
        c.body = Some(&body);
        if waits {
            c.held = Duration::from_millis(request.wait_ms.unwrap_or(0));
            let mut chain = opts.wait_chain.clone();
            if let Some(from) = &request.from {
                chain = chain.with(self.own_address(from)?).map_err(|e| ClientError::invalid(e.0))?;
            }
            if !chain.is_empty() {
                c.headers.push(("a2a-wait-chain", chain.header_value()));
            }
        }
        if let Some(h) = opts.hop {
            c.headers.push(("a2a-hop", h.to_string()));
        }
        match self.call(c).await {
            Ok(resp) => resp.json(Step::SessionSend),
            Err(e) => forbidden_outcome(e, &request),
        }
    }

    /// A blocking ask (SND-3): `request` with `reply: true`, waiting `wait` (default 60 s, at most 10 min) for the
    /// round-one reply. A wait that ends while the target still works answers `accepted` with the `run_id` to
    /// await later ([`Sessions::run`]); the reply is kept (SND-6).
    pub async fn ask(&self, mut request: SendRequest, wait: Option<Duration>) -> Result<SendResponse, ClientError> {
        request.reply = Some(true);
        request.wait_ms = Some(ask_wait(wait).as_millis() as u64);
        self.send(&request).await
    }

    async fn max_body_bytes(&self) -> Result<usize, ClientError> {
        let d = self.client.discover_at(&self.endpoint, None, false).await?;
        let caps = self.client.capabilities_at(&self.endpoint, &d, None, false).await?;
        Ok(caps.document.limits.as_ref().map_or(validate::DEFAULT_MAX_BODY_BYTES, |l| l.max_body_bytes as usize))
    }

    // --- runs (SND-10, SES-5) ---------------------------------------------------------------------------------

    /// Reads a run at once.
    pub async fn run_now(&self, run_id: &str) -> Result<Run, ClientError> {
        let c = Call::new(Step::RunRead, Method::GET, format!("/runs/{}", run_segment(run_id)?));
        self.call(c).await?.json(Step::RunRead)
    }

    /// Awaits a run (`GET /a2a/runs/{run_id}?wait_ms`, SND-10): long-polls until it reaches `until` or `wait` has
    /// passed, in holds of at most 10 minutes, and answers the run as it then is (check [`Until::reached`]).
    pub async fn run(&self, run_id: &str, wait: Duration, until: Until) -> Result<Run, ClientError> {
        let segment = run_segment(run_id)?;
        let started = Instant::now();
        loop {
            let left = wait.saturating_sub(started.elapsed());
            let hold = left.min(Duration::from_millis(a2a_core::sessions::MAX_WAIT_MS));
            let mut c = Call::new(Step::RunRead, Method::GET, format!("/runs/{segment}"));
            c.query = format!("wait_ms={}&until={}", hold.as_millis(), until.as_str());
            c.held = hold;
            let run: Run = self.call(c).await?.json(Step::RunRead)?;
            if until.reached(&run) || started.elapsed() >= wait {
                return Ok(run);
            }
            if hold.is_zero() {
                return Ok(run);
            }
        }
    }

    /// Answers a delivery of an inbox session this client owns (SES-5).
    pub async fn reply(&self, run_id: &str, reply: &RunReply) -> Result<Run, ClientError> {
        if reply.reply.is_some() == reply.error.is_some() {
            return Err(ClientError::invalid("a run reply has exactly one of `reply` and `error`"));
        }
        let body = to_value(reply)?;
        let mut c = Call::new(Step::RunReply, Method::POST, format!("/runs/{}/reply", run_segment(run_id)?));
        c.body = Some(&body);
        self.call(c).await?.json(Step::RunReply)
    }

    /// The deliveries waiting in an inbox session this client owns, oldest first (SES-5); long-polls up to `wait`
    /// (at most 10 minutes) when the inbox is empty.
    pub async fn inbox(&self, key: &str, wait: Duration) -> Result<Inbox, ClientError> {
        let hold = wait.min(Duration::from_millis(a2a_core::sessions::MAX_WAIT_MS));
        let mut c = Call::new(Step::SessionInbox, Method::GET, format!("/sessions/{}/inbox", key_segment(key)?));
        if !hold.is_zero() {
            c.query = format!("wait_ms={}", hold.as_millis());
            c.held = hold;
        }
        self.call(c).await?.json(Step::SessionInbox)
    }

    // --- history and spawn (§17.7, §17.8) ---------------------------------------------------------------------

    /// A session's transcript, bounded (HIS-1, HIS-2).
    pub async fn history(&self, key: &str, query: &HistoryQuery) -> Result<History, ClientError> {
        if let Some(l) = query.limit
            && !(1..=a2a_core::sessions::HISTORY_MAX_LIMIT as u32).contains(&l)
        {
            return Err(ClientError::invalid(format!("the history limit is 1 to 1000 (got {l})")));
        }
        let mut c = Call::new(Step::SessionHistory, Method::GET, format!("/sessions/{}/history", key_segment(key)?));
        c.query = query.to_query();
        self.call(c).await?.json(Step::SessionHistory)
    }

    /// Spawns a worker session for one task (SPN-1); answers at once with its run.
    pub async fn spawn(&self, request: &SpawnRequest) -> Result<SpawnResponse, ClientError> {
        key_segment(&request.parent)?;
        if request.task.trim().is_empty() {
            return Err(ClientError::invalid("a spawn needs a task"));
        }
        let body = to_value(request)?;
        let mut c = Call::new(Step::SessionSpawn, Method::POST, "/sessions/spawn");
        c.body = Some(&body);
        self.call(c).await?.json(Step::SessionSpawn)
    }

    // --- events (§17.6) ---------------------------------------------------------------------------------------

    /// Follows the agent's event channel (`GET /a2a/events`, ANN-3) as a stream of [`Event`]s; after a dropped
    /// connection it reconnects with `Last-Event-ID` and goes on from the last event received (ANN-4).
    pub async fn events(&self, opts: EventsOptions) -> Result<EventStream, ClientError> {
        EventStream::open(self.clone(), opts).await
    }
}

fn body_len(v: &Value) -> usize {
    a2a_core::canonical::to_canonical_vec(v).len()
}

/// `403 forbidden` to a send is an outcome (SND-7), not an error.
fn forbidden_outcome(e: ClientError, request: &SendRequest) -> Result<SendResponse, ClientError> {
    match e {
        ClientError::Agent { status: 403, error, .. } if error.code == ErrorCode::FORBIDDEN => Ok(SendResponse {
            run_id: None,
            status: SendStatus::Forbidden,
            reply: None,
            error: Some(ErrorObject { code: error.code, message: error.message, details: error.details }),
            target: request.target.clone(),
        }),
        other => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_queries_carry_their_bounds() {
        let q = HistoryQuery { limit: Some(5), max_bytes: Some(1024), include_tools: true };
        assert_eq!(q.to_query(), "limit=5&max_bytes=1024&include_tools=true");
        assert_eq!(HistoryQuery::default().to_query(), "");
    }

    #[test]
    fn the_ask_wait_defaults_to_a_minute_and_is_capped_at_ten() {
        assert_eq!(ask_wait(None), Duration::from_secs(60));
        assert_eq!(ask_wait(Some(Duration::from_secs(5))), Duration::from_secs(5));
        assert_eq!(ask_wait(Some(Duration::from_secs(3600))), Duration::from_secs(600));
    }

    #[test]
    fn a_forbidden_send_is_an_outcome_and_other_refusals_stay_errors() {
        let req = message("desk", "hi");
        let err = |status, code: ErrorCode| ClientError::Agent {
            step: Step::SessionSend,
            status,
            error: Box::new(a2a_core::error::A2aError::with_message(code, "the target does not match")),
        };
        let r = forbidden_outcome(err(403, ErrorCode::FORBIDDEN), &req).expect("an outcome");
        assert_eq!(r.status, SendStatus::Forbidden);
        assert_eq!(r.error.expect("why").message, "the target does not match");
        assert!(forbidden_outcome(err(404, ErrorCode::UNKNOWN_SESSION), &req).is_err());
    }

    #[test]
    fn send_answers_of_every_status_parse() {
        for (body, status) in [
            (r#"{"run_id":"r","status":"accepted","target":"did:web:a.example#b"}"#, SendStatus::Accepted),
            (r#"{"run_id":"r","status":"ok","reply":"5000"}"#, SendStatus::Ok),
            (r#"{"run_id":"r","status":"no_reply"}"#, SendStatus::NoReply),
            (
                r#"{"run_id":"r","status":"timeout","error":{"code":"timed_out","message":"no reply"}}"#,
                SendStatus::Timeout,
            ),
            (
                r#"{"run_id":"r","status":"error","error":{"code":"session_ended","message":"ended"},"x":1}"#,
                SendStatus::Error,
            ),
        ] {
            let r: SendResponse = serde_json::from_str(body).expect(body);
            assert_eq!(r.status, status);
        }
    }

    #[test]
    fn until_reply_is_reached_by_any_final_status_and_done_by_the_state() {
        let run: Run = serde_json::from_value(serde_json::json!({
            "run_id": "r", "target": "did:web:a.example#b", "from": "did:web:c.example", "status": "ok",
            "reply": "x", "state": "ping_pong", "turns": [], "announce": {"status": "pending"},
            "created_at": "t", "updated_at": "t", "deadline": "t"}))
        .expect("a run");
        assert!(Until::Reply.reached(&run));
        assert!(!Until::Done.reached(&run));
    }

    #[test]
    fn keys_and_run_ids_are_checked_before_anything_is_sent() {
        assert!(key_segment("bonus-desk").is_ok());
        assert!(key_segment("../etc").is_err());
        assert!(key_segment("").is_err());
        assert!(run_segment("not a run").is_err());
    }
}
