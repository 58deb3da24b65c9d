//! Calling an Agent2Agent (A2A) 1.x agent as if it were one of ours (`spec/PROTOCOL.md` §20.8, BR-19): fetch and
//! verify its Agent Card (BR-6), map its skills to capability declarations, and run a skill with `SendMessage` (or
//! `SendStreamingMessage`), `GetTask` and `CancelTask` over its JSON-RPC interface (HTTP+JSON when it has none).
//!
//! ```no_run
//! # async fn run() -> Result<(), a2a_client::a2a1x::A2a1xError> {
//! use a2a_client::a2a1x::A2a1xClient;
//! let client = A2a1xClient::new(Default::default())?;
//! let agent = client.discover("http://127.0.0.1:9999").await?;
//! let task = client.call(&agent, "echo", serde_json::json!({"text": "hi"}), None).await?;
//! println!("{}", a2a_client::a2a1x::result_of(&task)?);
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_core::a2a1x::{
    self, AGENT_CARD_PATH, BINDING_HTTP_JSON, BINDING_JSONRPC, Message, Part, Role, SendMessageConfiguration,
    SendMessageRequest, StreamResponse, Task, TaskState,
};
use a2a_core::capability::{AuthRequirement, CapabilityDeclaration};
use a2a_core::did::Did;
use a2a_core::resolver::DidResolver;
use a2a_core::sse;
use serde_json::{Map, Value, json};

/// Largest card or answer read, in bytes.
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

/// What went wrong calling a 1.x agent.
#[derive(Debug, Clone, thiserror::Error)]
pub enum A2a1xError {
    /// An argument is invalid.
    #[error("{0}")]
    Invalid(String),
    /// The agent could not be reached.
    #[error("cannot reach {url}: {reason}")]
    Unreachable {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The agent did not answer in time.
    #[error("{url} did not answer within {after:?}")]
    Timeout {
        /// The URL.
        url: String,
        /// The timeout.
        after: Duration,
    },
    /// The answer is not what A2A 1.0 says (not JSON, not a card, not a task).
    #[error("{url} did not answer as an A2A 1.0 agent: {reason}")]
    Protocol {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The card's signature is not acceptable (BR-6).
    #[error("the Agent Card of {url} is not acceptable: {reason}")]
    Card {
        /// The card's URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The agent answered with an A2A error.
    #[error("the agent refused: {reason} ({code}): {message}")]
    Refused {
        /// The JSON-RPC code (or HTTP status on HTTP+JSON).
        code: i64,
        /// The A2A reason (`TASK_NOT_FOUND`, `INVALID_PARAMS`, ...), when the error carried one.
        reason: String,
        /// The agent's message.
        message: String,
    },
    /// The task ended without a result.
    #[error("task {task_id} ended {}: {message}", state.as_str())]
    TaskFailed {
        /// The task.
        task_id: String,
        /// Its terminal state.
        state: TaskState,
        /// What the agent said.
        message: String,
    },
    /// The task needs something the bridge does not carry (`TASK_STATE_INPUT_REQUIRED`, `TASK_STATE_AUTH_REQUIRED`).
    #[error("task {task_id} is {}: the bridge cannot continue a task that asks for more input or authentication", state.as_str())]
    Unsupported {
        /// The task.
        task_id: String,
        /// Its state.
        state: TaskState,
    },
}

impl A2a1xError {
    /// The command line's exit code (README): 1 refused or failed, 2 usage, 3 unreachable, 4 timeout.
    pub fn exit_code(&self) -> i32 {
        match self {
            A2a1xError::Invalid(_) => 2,
            A2a1xError::Unreachable { .. } | A2a1xError::Protocol { .. } => 3,
            A2a1xError::Timeout { .. } => 4,
            _ => 1,
        }
    }
}

/// How the client trusts cards and reaches agents.
#[derive(Clone)]
pub struct A2a1xOptions {
    /// Refuse unsigned cards (signed ones are always verified, BR-6).
    pub require_signature: bool,
    /// Resolves the DID of a signature's `kid` (default: did:web over HTTPS, loopback allowed when
    /// `allow_http_loopback_dids`).
    pub resolver: Option<Arc<dyn DidResolver>>,
    /// Resolve `did:web:localhost...` over plain HTTP (tests, local development).
    pub allow_http_loopback_dids: bool,
    /// Timeout of each HTTP request.
    pub request_timeout: Duration,
    /// Extra headers for every request to the agent (`A2A-Api-Key`, `Authorization`).
    pub headers: Vec<(String, String)>,
}

impl Default for A2a1xOptions {
    fn default() -> Self {
        A2a1xOptions {
            require_signature: false,
            resolver: None,
            allow_http_loopback_dids: false,
            request_timeout: Duration::from_secs(30),
            headers: Vec::new(),
        }
    }
}

/// How a card was accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CardTrust {
    /// A signature verified with the key its `kid` names.
    Verified {
        /// The key (`did:web:...#key-1`).
        kid: String,
    },
    /// The card is unsigned (allowed by the options).
    Unsigned,
}

/// A 1.x agent, from its card.
#[derive(Debug, Clone)]
pub struct A2a1xAgent {
    /// Where the card was read.
    pub card_url: String,
    /// The card as served.
    pub card: Value,
    /// How it was trusted.
    pub trust: CardTrust,
    /// The skills, as capability declarations (BR-19).
    pub capabilities: Vec<CapabilityDeclaration>,
    /// Whether the agent streams.
    pub streaming: bool,
    binding: Binding,
}

#[derive(Debug, Clone)]
enum Binding {
    JsonRpc(String),
    HttpJson(String),
}

/// A client of 1.x agents.
#[derive(Clone)]
pub struct A2a1xClient {
    http: reqwest::Client,
    opts: A2a1xOptions,
    resolver: Arc<dyn DidResolver>,
}

fn now_id() -> String {
    let mut b = [0u8; 16];
    let _ = getrandom::fill(&mut b);
    data_encoding::HEXLOWER.encode(&b)
}

impl A2a1xClient {
    /// A client with these options.
    pub fn new(opts: A2a1xOptions) -> Result<Self, A2a1xError> {
        let http = reqwest::Client::builder()
            .timeout(opts.request_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| A2a1xError::Invalid(format!("cannot build the HTTP client: {e}")))?;
        let resolver: Arc<dyn DidResolver> = match &opts.resolver {
            Some(r) => r.clone(),
            None => {
                let o = if opts.allow_http_loopback_dids {
                    a2a_core::resolver::ResolverOptions::loopback()
                } else {
                    a2a_core::resolver::ResolverOptions::default()
                };
                Arc::new(
                    a2a_core::resolver::HttpResolver::new(o)
                        .map_err(|e| A2a1xError::Invalid(format!("cannot build the DID resolver: {e}")))?,
                )
            }
        };
        Ok(A2a1xClient { http, opts, resolver })
    }

    fn request(&self, rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let mut rb = rb.header("A2A-Version", a2a1x::PROTOCOL_VERSION);
        for (k, v) in &self.opts.headers {
            rb = rb.header(k.as_str(), v.as_str());
        }
        rb
    }

    fn transport(&self, url: &str, e: &reqwest::Error) -> A2a1xError {
        if e.is_timeout() {
            A2a1xError::Timeout { url: url.to_owned(), after: self.opts.request_timeout }
        } else {
            A2a1xError::Unreachable { url: url.to_owned(), reason: e.to_string() }
        }
    }

    async fn read_json(&self, url: &str, mut resp: reqwest::Response) -> Result<(u16, Value), A2a1xError> {
        let status = resp.status().as_u16();
        let mut bytes = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| self.transport(url, &e))? {
            bytes.extend_from_slice(&chunk);
            if bytes.len() > MAX_ANSWER_BYTES {
                return Err(A2a1xError::Protocol {
                    url: url.to_owned(),
                    reason: format!("the answer is larger than {MAX_ANSWER_BYTES} bytes"),
                });
            }
        }
        let v = serde_json::from_slice(&bytes).map_err(|e| A2a1xError::Protocol {
            url: url.to_owned(),
            reason: format!("HTTP {status}, not JSON: {e}"),
        })?;
        Ok((status, v))
    }

    /// Fetches the card of the agent at `url` (its origin's `/.well-known/agent-card.json`, or `url` itself when it
    /// names a `.json` file), verifies it (BR-6) and maps its skills (BR-19).
    pub async fn discover(&self, url: &str) -> Result<A2a1xAgent, A2a1xError> {
        let parsed = url::Url::parse(url).map_err(|e| A2a1xError::Invalid(format!("{url:?} is not a URL: {e}")))?;
        let card_url = if parsed.path().ends_with(".json") {
            parsed.to_string()
        } else {
            format!("{}{AGENT_CARD_PATH}", parsed.origin().ascii_serialization())
        };
        let resp = self.http.get(&card_url).send().await.map_err(|e| self.transport(&card_url, &e))?;
        let (status, card) = self.read_json(&card_url, resp).await?;
        if status != 200 || !card.is_object() {
            return Err(A2a1xError::Protocol { url: card_url, reason: format!("HTTP {status}: not an Agent Card") });
        }
        let trust = self.verify_card(&card_url, &card).await?;
        let binding = binding_of(&card).ok_or_else(|| A2a1xError::Protocol {
            url: card_url.clone(),
            reason: "the card has no JSONRPC or HTTP+JSON interface in supportedInterfaces (or url)".into(),
        })?;
        let capabilities = capabilities_of(&card);
        let streaming = card["capabilities"]["streaming"].as_bool().unwrap_or(false);
        Ok(A2a1xAgent { card_url, card, trust, capabilities, streaming, binding })
    }

    /// BR-6: one ES256 signature verifies with the key its `kid` names (a DID URL); all failing is a refusal.
    async fn verify_card(&self, url: &str, card: &Value) -> Result<CardTrust, A2a1xError> {
        let sigs = match a2a1x::card_signatures(card) {
            Ok(s) => s,
            Err(a2a1x::CardSignatureError::Unsigned) if !self.opts.require_signature => return Ok(CardTrust::Unsigned),
            Err(e) => return Err(A2a1xError::Card { url: url.to_owned(), reason: e.to_string() }),
        };
        let mut reasons = Vec::new();
        for s in &sigs {
            let Some(kid) = &s.kid else {
                reasons.push(format!("signature {}: no kid", s.index));
                continue;
            };
            let Some((did, key_id)) = kid.split_once('#').filter(|(d, _)| Did::parse(d).is_ok()) else {
                reasons.push(format!("signature {}: kid {kid:?} is not a did:web DID URL", s.index));
                continue;
            };
            match self.resolver.resolve_key(did, key_id).await {
                Ok(key) => match s.verify(card, &key) {
                    Ok(()) => return Ok(CardTrust::Verified { kid: kid.clone() }),
                    Err(e) => reasons.push(e),
                },
                Err(e) => reasons.push(format!("signature {}: {}: {}", s.index, e.code, e.message)),
            }
        }
        Err(A2a1xError::Card { url: url.to_owned(), reason: format!("no signature verifies: {}", reasons.join("; ")) })
    }

    fn message(skill: &str, payload: Value) -> SendMessageRequest {
        let mut meta = Map::new();
        meta.insert("skill".into(), json!(skill));
        SendMessageRequest {
            message: Message {
                message_id: now_id(),
                context_id: None,
                task_id: None,
                role: Role::User,
                parts: vec![Part::data(payload)],
                metadata: Some(meta.clone()),
            },
            configuration: None,
            metadata: Some(meta),
        }
    }

    /// One JSON-RPC call (or its HTTP+JSON equivalent), answering `result`.
    async fn rpc(&self, agent: &A2a1xAgent, method: &str, params: Value) -> Result<Value, A2a1xError> {
        let (url, rb) = match &agent.binding {
            Binding::JsonRpc(url) => {
                let body = json!({"jsonrpc": "2.0", "id": now_id(), "method": method, "params": params});
                (url.clone(), self.http.post(url).json(&body))
            }
            Binding::HttpJson(base) => {
                let id = params["id"].as_str().unwrap_or("").to_owned();
                let (m, path) = match method {
                    a2a1x::method::SEND_MESSAGE => (reqwest::Method::POST, "/message:send".to_owned()),
                    a2a1x::method::GET_TASK => (reqwest::Method::GET, format!("/tasks/{id}")),
                    a2a1x::method::CANCEL_TASK => (reqwest::Method::POST, format!("/tasks/{id}:cancel")),
                    other => return Err(A2a1xError::Invalid(format!("{other} is not carried over HTTP+JSON here"))),
                };
                let url = format!("{base}{path}");
                let rb = self.http.request(m.clone(), &url);
                (url, if m == reqwest::Method::POST { rb.json(&params) } else { rb })
            }
        };
        let resp = self.request(rb).send().await.map_err(|e| self.transport(&url, &e))?;
        let (status, v) = self.read_json(&url, resp).await?;
        match &agent.binding {
            Binding::JsonRpc(_) => {
                if let Some(err) = v.get("error").filter(|e| e.is_object()) {
                    return Err(refused(err, err["code"].as_i64().unwrap_or(0)));
                }
                v.get("result").cloned().ok_or_else(|| A2a1xError::Protocol {
                    url,
                    reason: format!("HTTP {status}: a JSON-RPC answer without result or error"),
                })
            }
            Binding::HttpJson(_) if status >= 400 => Err(refused(&v["error"], i64::from(status))),
            Binding::HttpJson(_) => Ok(v),
        }
    }

    fn task_from(url: &str, v: Value) -> Result<Task, A2a1xError> {
        serde_json::from_value(v)
            .map_err(|e| A2a1xError::Protocol { url: url.to_owned(), reason: format!("not a Task: {e}") })
    }

    /// `SendMessage` with one data part (the payload) naming `skill`; answers the task (or, for an agent that
    /// answers with a message, a completed task holding it).
    pub async fn send(
        &self,
        agent: &A2a1xAgent,
        skill: &str,
        payload: Value,
        return_immediately: bool,
    ) -> Result<Task, A2a1xError> {
        if !payload.is_object() {
            return Err(A2a1xError::Invalid("the payload must be a JSON object".into()));
        }
        let mut req = Self::message(skill, payload);
        if return_immediately {
            req.configuration = Some(SendMessageConfiguration { return_immediately: true, ..Default::default() });
        }
        let params = serde_json::to_value(&req).map_err(|e| A2a1xError::Invalid(e.to_string()))?;
        let v = self.rpc(agent, a2a1x::method::SEND_MESSAGE, params).await?;
        match serde_json::from_value::<a2a1x::SendMessageResponse>(v.clone()) {
            Ok(a2a1x::SendMessageResponse::Task(t)) => Ok(t),
            Ok(a2a1x::SendMessageResponse::Message(m)) => Ok(message_task(m)),
            Err(e) => Err(A2a1xError::Protocol {
                url: agent.card_url.clone(),
                reason: format!("not a SendMessageResponse: {e}: {v}"),
            }),
        }
    }

    /// `GetTask`.
    pub async fn get(&self, agent: &A2a1xAgent, id: &str) -> Result<Task, A2a1xError> {
        let v = self.rpc(agent, a2a1x::method::GET_TASK, json!({"id": id})).await?;
        Self::task_from(&agent.card_url, v)
    }

    /// `CancelTask`.
    pub async fn cancel(&self, agent: &A2a1xAgent, id: &str) -> Result<Task, A2a1xError> {
        let v = self.rpc(agent, a2a1x::method::CANCEL_TASK, json!({"id": id})).await?;
        Self::task_from(&agent.card_url, v)
    }

    /// Runs `skill` to its end: `SendMessage`, then `GetTask` every 100 ms .. 1.6 s until the task is terminal or
    /// `deadline` passes (then the task as last seen is answered).
    pub async fn call(
        &self,
        agent: &A2a1xAgent,
        skill: &str,
        payload: Value,
        deadline: Option<Duration>,
    ) -> Result<Task, A2a1xError> {
        let started = Instant::now();
        let deadline = deadline.unwrap_or(Duration::from_secs(60));
        let mut task = self.send(agent, skill, payload, false).await?;
        let mut pause = Duration::from_millis(100);
        while !task.status.state.is_terminal() && !interrupted(task.status.state) && started.elapsed() < deadline {
            tokio::time::sleep(pause.min(deadline.saturating_sub(started.elapsed()))).await;
            pause = (pause * 2).min(Duration::from_millis(1600));
            task = self.get(agent, &task.id).await?;
        }
        Ok(task)
    }

    /// `SendStreamingMessage`: `on_event` sees every event; answers the task as the events leave it. Falls back to
    /// [`A2a1xClient::call`] when the agent does not stream or has no JSON-RPC interface.
    pub async fn stream(
        &self,
        agent: &A2a1xAgent,
        skill: &str,
        payload: Value,
        mut on_event: impl FnMut(&StreamResponse),
    ) -> Result<Task, A2a1xError> {
        let Binding::JsonRpc(url) = &agent.binding else { return self.call(agent, skill, payload, None).await };
        if !agent.streaming {
            return self.call(agent, skill, payload, None).await;
        }
        let req = Self::message(skill, payload);
        let body = json!({"jsonrpc": "2.0", "id": now_id(), "method": a2a1x::method::SEND_STREAMING_MESSAGE,
                          "params": req});
        let rb = self.http.post(url).header("Accept", "text/event-stream").json(&body);
        let mut resp = self.request(rb).send().await.map_err(|e| self.transport(url, &e))?;
        let is_stream = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("text/event-stream"));
        if !is_stream {
            let (_, v) = self.read_json(url, resp).await?;
            let err = v.get("error").cloned().unwrap_or(Value::Null);
            return Err(refused(&err, err["code"].as_i64().unwrap_or(0)));
        }
        let mut decoder = sse::Decoder::new(MAX_ANSWER_BYTES);
        let mut task: Option<Task> = None;
        while let Some(chunk) = resp.chunk().await.map_err(|e| self.transport(url, &e))? {
            if decoder.feed(&chunk).is_err() {
                return Err(A2a1xError::Protocol { url: url.clone(), reason: "an SSE event is too large".into() });
            }
            while let Some(event) = decoder.next_event() {
                let data = event.data;
                if data.is_empty() {
                    continue;
                }
                let v: Value = serde_json::from_str(&data).map_err(|e| A2a1xError::Protocol {
                    url: url.clone(),
                    reason: format!("an SSE event is not JSON: {e}"),
                })?;
                if let Some(err) = v.get("error").filter(|e| e.is_object()) {
                    return Err(refused(err, err["code"].as_i64().unwrap_or(0)));
                }
                let ev: StreamResponse = serde_json::from_value(v["result"].clone()).map_err(|e| {
                    A2a1xError::Protocol { url: url.clone(), reason: format!("not a StreamResponse: {e}") }
                })?;
                on_event(&ev);
                apply(&mut task, ev);
            }
        }
        let task =
            task.ok_or_else(|| A2a1xError::Protocol { url: url.clone(), reason: "the stream had no task".into() })?;
        if task.status.state.is_terminal() || interrupted(task.status.state) {
            Ok(task)
        } else {
            // The stream ended early: read the task to its end (streams are views, BR-16).
            let mut t = task;
            let started = Instant::now();
            while !t.status.state.is_terminal() && started.elapsed() < Duration::from_secs(60) {
                tokio::time::sleep(Duration::from_millis(200)).await;
                t = self.get(agent, &t.id).await?;
            }
            Ok(t)
        }
    }
}

fn interrupted(s: TaskState) -> bool {
    matches!(s, TaskState::InputRequired | TaskState::AuthRequired)
}

/// Folds a stream event into the task it is about.
fn apply(task: &mut Option<Task>, ev: StreamResponse) {
    match ev {
        StreamResponse::Task(t) => *task = Some(t),
        StreamResponse::Message(m) => *task = Some(message_task(m)),
        StreamResponse::StatusUpdate(u) => {
            if let Some(t) = task {
                t.status = u.status;
            }
        }
        StreamResponse::ArtifactUpdate(u) => {
            if let Some(t) = task {
                match t.artifacts.iter_mut().find(|a| a.artifact_id == u.artifact.artifact_id) {
                    Some(a) if u.append => a.parts.extend(u.artifact.parts),
                    Some(a) => *a = u.artifact,
                    None => t.artifacts.push(u.artifact),
                }
            }
        }
    }
}

/// A direct message answer, as a completed task whose artifact holds its parts.
fn message_task(m: Message) -> Task {
    Task {
        id: m.task_id.clone().unwrap_or_else(|| m.message_id.clone()),
        context_id: m.context_id.clone().unwrap_or_default(),
        status: a2a1x::TaskStatus { state: TaskState::Completed, message: None, timestamp: None },
        artifacts: vec![a2a1x::Artifact { artifact_id: m.message_id, name: None, parts: m.parts }],
        history: Vec::new(),
        metadata: None,
    }
}

fn refused(err: &Value, code: i64) -> A2a1xError {
    let details = err.get("data").or_else(|| err.get("details"));
    let reason = details
        .and_then(Value::as_array)
        .and_then(|l| l.iter().find(|d| d["@type"] == a2a1x::ERROR_INFO_TYPE))
        .and_then(|d| d["reason"].as_str())
        .unwrap_or("")
        .to_owned();
    A2a1xError::Refused { code, reason, message: err["message"].as_str().unwrap_or("(no message)").to_owned() }
}

fn binding_of(card: &Value) -> Option<Binding> {
    let ifaces = card["supportedInterfaces"].as_array().cloned().unwrap_or_default();
    let find =
        |b: &str| ifaces.iter().find(|i| i["protocolBinding"] == b).and_then(|i| i["url"].as_str()).map(str::to_owned);
    if let Some(u) = find(BINDING_JSONRPC) {
        return Some(Binding::JsonRpc(u));
    }
    if let Some(u) = find(BINDING_HTTP_JSON) {
        return Some(Binding::HttpJson(u.trim_end_matches('/').to_owned()));
    }
    // A2A 0.3 cards name the preferred transport's URL in `url`.
    let url = card["url"].as_str()?;
    match card["preferredTransport"].as_str().unwrap_or(BINDING_JSONRPC) {
        BINDING_HTTP_JSON => Some(Binding::HttpJson(url.trim_end_matches('/').to_owned())),
        _ => Some(Binding::JsonRpc(url.to_owned())),
    }
}

/// BR-19: the skills of a card as capability declarations (open input schema; `api_key` / `oauth2` when the card's
/// security schemes say so).
pub fn capabilities_of(card: &Value) -> Vec<CapabilityDeclaration> {
    let schemes = card["securitySchemes"].as_object().cloned().unwrap_or_default();
    let auth = if schemes.values().any(|s| s.get("apiKeySecurityScheme").is_some()) {
        AuthRequirement::ApiKey
    } else if schemes
        .values()
        .any(|s| s.get("httpAuthSecurityScheme").is_some() || s.get("oauth2SecurityScheme").is_some())
    {
        AuthRequirement::Oauth2
    } else {
        AuthRequirement::None
    };
    card["skills"]
        .as_array()
        .map(|skills| {
            skills
                .iter()
                .filter_map(|s| {
                    let id = s["id"].as_str()?;
                    let tagged = s["tags"]
                        .as_array()
                        .and_then(|t| t.iter().filter_map(Value::as_str).find_map(|t| t.strip_prefix("auth:")));
                    Some(CapabilityDeclaration {
                        name: id.to_owned(),
                        description: s["description"].as_str().unwrap_or_default().to_owned(),
                        auth_requirement: match tagged {
                            Some("none") => AuthRequirement::None,
                            Some("api_key") => AuthRequirement::ApiKey,
                            Some("oauth2") => AuthRequirement::Oauth2,
                            _ => auth,
                        },
                        sub_capabilities: vec![],
                        region_restriction: vec![],
                        input_schema: json!({"type": "object"}),
                        output_schema: None,
                        estimated_cost: None,
                        estimated_latency_ms: None,
                        fallback_for: vec![],
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The result of a finished task (BR-19): its last artifact's data part, or its text parts as `{"text": ...}`; a
/// task that did not complete is an error.
pub fn result_of(task: &Task) -> Result<Value, A2a1xError> {
    match task.status.state {
        TaskState::Completed => {}
        s if interrupted(s) => return Err(A2a1xError::Unsupported { task_id: task.id.clone(), state: s }),
        s => {
            let message = task
                .status
                .message
                .as_ref()
                .and_then(|m| m.parts.iter().find_map(|p| p.text.clone()))
                .unwrap_or_else(|| "(no message)".to_owned());
            return Err(A2a1xError::TaskFailed { task_id: task.id.clone(), state: s, message });
        }
    }
    let Some(artifact) = task.artifacts.last() else { return Ok(json!({})) };
    if let Some(d) = artifact.parts.iter().rev().find_map(|p| p.data.clone()) {
        return Ok(d);
    }
    let text: Vec<String> = artifact.parts.iter().filter_map(|p| p.text.clone()).collect();
    Ok(json!({"text": text.join("")}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skills_become_open_capabilities_and_results_are_read_from_artifacts() {
        let card = json!({"skills": [{"id": "echo", "description": "Echoes.", "tags": ["auth:none"]}, {"id": "x"}],
                          "securitySchemes": {"k": {"apiKeySecurityScheme": {"location": "header", "name": "X"}}}});
        let caps = capabilities_of(&card);
        assert_eq!(caps.len(), 2);
        assert_eq!((caps[0].name.as_str(), caps[0].auth_requirement), ("echo", AuthRequirement::None));
        assert_eq!(caps[1].auth_requirement, AuthRequirement::ApiKey);
        let mut t = message_task(Message {
            message_id: "m".into(),
            context_id: None,
            task_id: None,
            role: Role::Agent,
            parts: vec![Part::text("he"), Part::text("llo")],
            metadata: None,
        });
        assert_eq!(result_of(&t).expect("test value"), json!({"text": "hello"}));
        t.status.state = TaskState::InputRequired;
        assert!(matches!(result_of(&t), Err(A2a1xError::Unsupported { .. })));
    }
}
