//! `a2a-server --sessions-demo`: a three-agent story (§17) played by three real agents on loopback, each
//! with its own listener, DID (`did:web:localhost%3A<port>`), signing key, DID document and memory store.
//!
//! The user asks the main assistant whether the bonus pays for a MacBook. The main assistant lists the work
//! assistant's sessions, asks it for the bonus (`sessions_send`, §17.3) with a short ping-pong (§17.5) and an announce
//! (§17.6), reads the finance assistant's transcript for the month's spending (`sessions_history`, §17.7), spawns a
//! price-check worker (`sessions_spawn`, §17.8) that announces back and is deleted, and answers its user. Every
//! session handler is scripted Rust (no LLM): the story is deterministic. The conversation is printed as it happens,
//! with the turn numbers and the provenance each handler is given, and the announce and spawn events are read from
//! the agents' real `GET /a2a/events` streams.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_core::capability::AuthRequirement;
use a2a_core::did::{Did, DidDocument};
use a2a_core::keys::SigningKey;
use a2a_core::resolver::{HttpResolver, ResolverOptions};
use a2a_core::sessions::{AllowList, Delivery, Role, Step};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::sessions::store::StoredMessage;
use crate::sessions::{HandlerFailure, HostedSession, SessionSettings, SessionsBuilder, Visibility};
use crate::{Agent, AgentBuilder};

/// What the user asks the main assistant.
pub const USER_QUESTION: &str = "I want to buy a MacBook. Is my bonus enough to pay for it?";

/// The ping-pong turns the main assistant allows its send (PP-3).
pub const MAX_TURNS: u32 = 4;

/// How long the story waits for any one answer or event.
const STEP_TIMEOUT: Duration = Duration::from_secs(15);

/// Where the demo's lines go: printed as they happen (the binary) or only kept (tests), and always recorded.
#[derive(Clone, Default)]
pub struct Log {
    echo: bool,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Log {
    /// A log that prints every line as it is said.
    pub fn printing() -> Log {
        Log { echo: true, lines: Arc::default() }
    }

    /// A log that only records.
    pub fn quiet() -> Log {
        Log::default()
    }

    /// Says one line.
    pub fn say(&self, line: impl Into<String>) {
        let line = line.into();
        if self.echo {
            println!("{line}");
        }
        self.lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(line);
    }

    /// Every line said so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

/// One agent of the demo, serving on its own loopback listener until stopped or dropped.
pub struct DemoAgent {
    /// Who it is in the story.
    pub name: &'static str,
    /// Its DID.
    pub did: String,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// The agent.
    pub agent: Agent,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl DemoAgent {
    /// Ends its hosted sessions (SES-7) and stops its listener.
    pub async fn stop(mut self) {
        if let Some(s) = self.agent.sessions() {
            s.shutdown().await;
        }
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.server.take() {
            let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
        }
    }
}

impl Drop for DemoAgent {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// The three agents of the story.
pub struct Cast {
    /// The main assistant (the user talks to its `main` session; it hosts the `price-check` spawn template).
    pub main: DemoAgent,
    /// The work assistant (`work` session: knows the bonus).
    pub work: DemoAgent,
    /// The finance assistant (`finance` session: keeps the month's ledger).
    pub finance: DemoAgent,
}

impl Cast {
    /// Stops every agent.
    pub async fn stop(self) {
        self.main.stop().await;
        self.work.stop().await;
        self.finance.stop().await;
    }
}

/// An event read from an agent's `GET /a2a/events` stream.
#[derive(Debug, Clone)]
pub struct SeenEvent {
    /// The agent whose stream it came from.
    pub agent: &'static str,
    /// The SSE `id`.
    pub id: String,
    /// The SSE `event` (`announce`, `run`, `spawn`, ...).
    pub kind: String,
    /// The event's data.
    pub data: Value,
}

/// What the story ended with.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The main assistant's answer to its user.
    pub answer: String,
    /// The bonus the work assistant gave.
    pub bonus: u64,
    /// The month's spending read from the finance assistant's history.
    pub spent: u64,
    /// The price the worker found.
    pub price: u64,
    /// How the send's ping-pong ended (`ended_by` of the run).
    pub ended_by: String,
    /// The ping-pong turns taken.
    pub turns: usize,
    /// The announce status of the send (`published`, `skipped`, ...).
    pub announce: String,
    /// The worker session's address.
    pub worker: String,
    /// The worker's session is gone (`unknown_session`) and its transcript deleted.
    pub worker_cleaned_up: bool,
    /// The events read from the streams during the story.
    pub events: Vec<SeenEvent>,
}

/// The sessions settings of every demo agent: loopback agents may message each other (POL-1), every session is
/// visible (POL-2), and the session endpoints take unsigned requests so that the printed `curl` lines work; the
/// agents still sign their ping-pong turns with their own keys (§9.5).
fn settings() -> SessionSettings {
    let mut s = SessionSettings::default();
    s.auth_requirement = AuthRequirement::None;
    s.visibility = Visibility::All;
    s.allow_list = AllowList(vec!["did:web:localhost*".into()]);
    s
}

fn provenance_line(d: &Delivery) -> String {
    let p = &d.provenance;
    format!(
        "provenance: {} via {} from {}, is_user={}, hop {}",
        p.kind,
        p.source_tool.as_str(),
        p.source_session.as_deref().unwrap_or(&p.source_agent),
        p.is_user,
        p.hop
    )
}

fn step_line(who: &str, d: &Delivery) -> String {
    let step = match (d.step, &d.turn) {
        (Step::Reply, Some(t)) => format!("ping-pong turn {} of {}", t.n, t.of),
        (Step::Message, _) => "message (round one)".to_owned(),
        (Step::Announce, _) => "asked whether to announce".to_owned(),
        (Step::Spawn, _) => "spawned with a task".to_owned(),
        (Step::Reply, None) => "reply".to_owned(),
    };
    format!("  [{who}] {step} ({}): {:?}", provenance_line(d), d.text)
}

/// A scripted session handler: logs what it is given and what it answers.
fn scripted(
    who: &'static str,
    log: Log,
    answer: fn(&Delivery) -> String,
) -> impl Fn(Delivery) -> std::future::Ready<Result<String, HandlerFailure>> + Send + Sync + 'static {
    move |d: Delivery| {
        log.say(step_line(who, &d));
        let reply = answer(&d);
        log.say(format!("  [{who}] answers: {reply:?}"));
        std::future::ready(Ok(reply))
    }
}

/// The main assistant in its ping-pong with the work assistant: asks one follow-up, then stops.
fn main_answer(d: &Delivery) -> String {
    if d.step == Step::Reply && d.text.contains("bonus") && !d.text.contains("tax") {
        "Thanks. Is that before or after tax?".to_owned()
    } else {
        "REPLY_SKIP".to_owned()
    }
}

/// The work assistant: knows the bonus; announces on its Slack channel.
fn work_answer(d: &Delivery) -> String {
    match d.step {
        Step::Message => "The boss's performance bonus this month is 5000 yuan.".to_owned(),
        Step::Reply if d.text.contains("tax") => "Before tax. It is paid with the salary on the 25th.".to_owned(),
        Step::Announce => format!(
            "Posted in #work on Slack: told the main assistant \"{}\"",
            d.round_one.as_deref().unwrap_or_default()
        ),
        _ => "REPLY_SKIP".to_owned(),
    }
}

/// The finance assistant: keeps the ledger (its transcript); it has nothing to add to other sessions.
fn finance_answer(_d: &Delivery) -> String {
    "REPLY_SKIP".to_owned()
}

/// The price-check worker: a scripted price list.
fn price_check_answer(d: &Delivery) -> String {
    if d.text.to_lowercase().contains("macbook") {
        "MacBook Pro 14 (16 GB): 8000 yuan, the lowest of three shops checked.".to_owned()
    } else {
        format!("No price found for {:?}.", d.text)
    }
}

async fn start_agent(
    name: &'static str,
    addr: std::net::SocketAddr,
    add: impl FnOnce(SessionsBuilder) -> SessionsBuilder,
) -> Result<DemoAgent, String> {
    let listener = TcpListener::bind(addr).await.map_err(|e| format!("cannot bind {addr} for the {name}: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let base = format!("http://127.0.0.1:{port}");
    let did = Did::for_host_port("localhost", Some(port), &[]).map_err(|e| e.to_string())?;
    let key = SigningKey::generate().map_err(|e| e.to_string())?;
    let doc = DidDocument::generate(&did, &[("key-1".to_owned(), key.verifying_key().to_jwk())]);
    let resolver = HttpResolver::new(ResolverOptions::loopback()).map_err(|e| e.to_string())?;
    let sessions =
        add(SessionsBuilder::new().settings(settings()).signing_key("key-1", key).endpoint(format!("{base}/a2a")));
    let agent = AgentBuilder::new(did.to_string())
        .remote_agents_from(crate::app::remote_agents())
        .name(name)
        .resolver(Arc::new(resolver))
        .sessions(sessions)
        .build()
        .map_err(|e| e.to_string())?;
    let doc_json = serde_json::to_value(&doc).map_err(|e| e.to_string())?;
    let mut app = crate::app::app_router(&agent, Some((crate::app::document_path(&did), doc_json)));
    // `--console`: each agent's operator console beside it, with its Sessions view (OPS-1: loopback listeners only).
    if crate::console::enabled_by_command_line() && addr.ip().is_loopback() {
        app = app.merge(crate::console::router(&agent, None));
    }
    let limits = agent.engine().limits().clone();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let stop = async {
            let _ = rx.await;
        };
        if let Err(e) = crate::serve::serve(listener, app, &limits, stop, Duration::from_secs(1)).await {
            tracing::warn!(error = %e, "a demo agent stopped serving");
        }
    });
    Ok(DemoAgent { name, did: did.to_string(), base, agent, shutdown: Some(tx), server: Some(server) })
}

/// Starts the three agents on free loopback ports; their handlers say what they are given and answer on `log`. The
/// finance assistant's ledger holds what its user told it earlier in the month (over its own channel, outside the
/// demo).
pub async fn start_cast(log: &Log) -> Result<Cast, String> {
    start_cast_at(log, None).await
}

/// [`start_cast`], with the main assistant on `listen` (`HOST:PORT`), the work assistant on the next port and the
/// finance assistant on the one after (`a2a-server --sessions-demo --listen 127.0.0.1:8080`: 8080, 8081, 8082), so
/// that commands written down beforehand reach them; `None`: free ports.
pub async fn start_cast_at(log: &Log, listen: Option<&str>) -> Result<Cast, String> {
    let base: std::net::SocketAddr = match listen {
        Some(l) => l.parse().map_err(|e| format!("--listen {l:?} is not HOST:PORT ({e})"))?,
        None => std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    let at = |n: u16| -> Result<std::net::SocketAddr, String> {
        if base.port() == 0 {
            return Ok(base);
        }
        let port = base
            .port()
            .checked_add(n)
            .ok_or_else(|| format!("--listen {base}: port {} + {n} is past 65535", base.port()))?;
        Ok(std::net::SocketAddr::new(base.ip(), port))
    };
    let (l1, l2, l3, l4) = (log.clone(), log.clone(), log.clone(), log.clone());
    let main = start_agent("main assistant", at(0)?, move |b| {
        b.session(
            HostedSession::new("main", "The boss's main assistant (Telegram): talks to the boss.").label("main"),
            scripted("main assistant", l1, main_answer),
        )
        .spawn_template("price-check", scripted("price-check worker", l2, price_check_answer))
    })
    .await?;
    let work = start_agent("work assistant", at(1)?, move |b| {
        b.session(
            HostedSession::new("work", "The work assistant (Slack): payroll, bonuses and performance reviews.")
                .label("work"),
            scripted("work assistant", l3, work_answer),
        )
    })
    .await?;
    let finance = start_agent("finance assistant", at(2)?, move |b| {
        b.session(
            HostedSession::new("finance", "The finance assistant (WhatsApp): the boss's spending this month.")
                .label("finance"),
            scripted("finance assistant", l4, finance_answer),
        )
    })
    .await?;
    let sessions = finance.agent.sessions().ok_or("the finance assistant has no sessions")?;
    let ledger = format!("{}#finance", finance.did);
    let keep = sessions.settings().limits.max_transcript_messages;
    for (role, text) in [
        (Role::User, "Yesterday I spent 2000 yuan on clothes."),
        (Role::Assistant, "Noted: clothes, 2000 yuan. Spent this month so far: 2000 yuan."),
    ] {
        let msg = StoredMessage { role, text: text.to_owned(), run_id: None, provenance: None };
        sessions.store().append_message(&ledger, &msg, keep).await.map_err(|e| e.to_string())?;
    }
    Ok(cast_ready(main, work, finance).await)
}

async fn cast_ready(main: DemoAgent, work: DemoAgent, finance: DemoAgent) -> Cast {
    for a in [&main, &work, &finance] {
        if let Some(s) = a.agent.sessions() {
            s.refresh_hosted().await;
        }
    }
    Cast { main, work, finance }
}

/// The lines a user can paste into another shell to follow the story while it runs (with `--linger`, after it).
pub fn follow_commands(cast: &Cast) -> String {
    let h = |did: &str| format!("-H 'A2A-Version: 0.3' -H 'A2A-Sender-ID: {did}'");
    let m = &cast.main.did;
    format!(
        "# the work assistant's announce channel (SSE):\n\
         curl -N {h} '{work}/a2a/events?session=work'\n\
         # the main assistant's events (the worker's announce-back):\n\
         curl -N {h} '{main}/a2a/events?session=main'\n\
         # the finance assistant's ledger (history):\n\
         curl -s {h} '{fin}/a2a/sessions/finance/history'\n\
         # the work assistant's sessions, and its transcript:\n\
         curl -s {h} '{work}/a2a/sessions'\n\
         curl -s {h} '{work}/a2a/sessions/work/history'",
        h = h(m),
        work = cast.work.base,
        main = cast.main.base,
        fin = cast.finance.base,
    )
}

/// A request as the main assistant (its DID as the sender).
fn as_main(http: &reqwest::Client, cast: &Cast, method: reqwest::Method, url: String) -> reqwest::RequestBuilder {
    http.request(method, url).header("A2A-Version", "0.3").header("A2A-Sender-ID", &cast.main.did)
}

async fn json_of(rb: reqwest::RequestBuilder, what: &str) -> Result<(reqwest::StatusCode, Value), String> {
    let resp = rb.timeout(STEP_TIMEOUT).send().await.map_err(|e| format!("{what}: {e}"))?;
    let status = resp.status();
    let body = resp.json::<Value>().await.map_err(|e| format!("{what}: the answer is not JSON: {e}"))?;
    Ok((status, body))
}

/// `GET /a2a/runs/{id}` until the run is done.
async fn run_done(http: &reqwest::Client, cast: &Cast, base: &str, run_id: &str) -> Result<Value, String> {
    let seg = a2a_core::execution_id::ExecutionId::parse(run_id).map_err(|e| format!("run id {run_id}: {e}"))?;
    let url = format!("{base}/a2a/runs/{}?wait_ms=10000&until=done", seg.to_path_segment());
    let (status, body) = json_of(as_main(http, cast, reqwest::Method::GET, url), "reading the run").await?;
    if !status.is_success() || body["state"] != "done" {
        return Err(format!("the run {run_id} is not done ({status}): {body}"));
    }
    Ok(body)
}

/// Follows `GET {base}/a2a/events?session=...` as the main assistant, sending each event to `tx` and saying it.
async fn follow(
    http: &reqwest::Client,
    cast: &Cast,
    agent: &'static str,
    url: String,
    log: Log,
    tx: tokio::sync::mpsc::UnboundedSender<SeenEvent>,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let mut resp = as_main(http, cast, reqwest::Method::GET, url.clone())
        .send()
        .await
        .map_err(|e| format!("cannot follow {url}: {e}"))?;
    if !resp.status().is_success() {
        return Err(format!("cannot follow {url}: {}", resp.status()));
    }
    // The stream's first chunk (a comment) says it is live: what happens from now on follows.
    let first = tokio::time::timeout(STEP_TIMEOUT, resp.chunk()).await;
    let mut buf = match first {
        Ok(Ok(Some(c))) => String::from_utf8_lossy(&c).into_owned(),
        _ => return Err(format!("{url} sent nothing")),
    };
    Ok(tokio::spawn(async move {
        loop {
            while let Some(i) = buf.find("\n\n") {
                let block: String = buf.drain(..i + 2).collect();
                let (mut id, mut kind, mut data) = (String::new(), String::new(), Value::Null);
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        id = v.to_owned();
                    } else if let Some(v) = line.strip_prefix("event: ") {
                        kind = v.to_owned();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data = serde_json::from_str(v).unwrap_or(Value::Null);
                    }
                }
                if kind.is_empty() {
                    continue;
                }
                let what = match kind.as_str() {
                    "announce" => format!("{:?}", data["text"].as_str().unwrap_or_default()),
                    "spawn" => format!("worker {} reports {:?}", data["child"], data["reply"].as_str().unwrap_or("")),
                    _ => format!("run {} {}", data["run_id"].as_str().unwrap_or(""), data["status"]),
                };
                log.say(format!("  >> event from the {agent}'s /a2a/events: {kind} (id {id}): {what}"));
                if tx.send(SeenEvent { agent, id, kind, data }).is_err() {
                    return;
                }
            }
            match resp.chunk().await {
                Ok(Some(c)) => buf.push_str(&String::from_utf8_lossy(&c)),
                _ => return,
            }
        }
    }))
}

/// The first number followed by ` yuan` in `text`.
fn yuan(text: &str) -> Option<u64> {
    let at = text.find(" yuan")?;
    let digits: String =
        text[..at].chars().rev().take_while(char::is_ascii_digit).collect::<Vec<_>>().into_iter().rev().collect();
    digits.parse().ok()
}

/// Plays the story against a running cast and returns its outcome; every step is said on `log`.
pub async fn run_story(cast: &Cast, log: &Log) -> Result<Outcome, String> {
    let http = reqwest::Client::new();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let work_events = format!("{}/a2a/events?session=work", cast.work.base);
    let main_events = format!("{}/a2a/events?session=main", cast.main.base);
    let readers = [
        follow(&http, cast, "work assistant", work_events, log.clone(), tx.clone()).await?,
        follow(&http, cast, "main assistant", main_events, log.clone(), tx).await?,
    ];
    let outcome = story(&http, cast, log, &mut rx).await;
    for r in readers {
        r.abort();
    }
    outcome
}

async fn story(
    http: &reqwest::Client,
    cast: &Cast,
    log: &Log,
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<SeenEvent>,
) -> Result<Outcome, String> {
    use reqwest::Method;
    let mut events = Vec::new();
    log.say(format!("boss -> main assistant: {USER_QUESTION:?}"));

    // 1. sessions_list: who can help?
    log.say("\n== 1. sessions_list: the main assistant looks for colleagues");
    for a in [&cast.work, &cast.finance] {
        let (_, body) =
            json_of(as_main(http, cast, Method::GET, format!("{}/a2a/sessions", a.base)), "listing sessions").await?;
        for s in body["sessions"].as_array().into_iter().flatten() {
            log.say(format!("  found {} ({}): {}", s["address"].as_str().unwrap_or(""), a.name, s["summary"]));
        }
    }

    // 2. sessions_send: ask the work assistant, with ping-pong and announce.
    log.say(format!(
        "\n== 2. sessions_send: main assistant -> work assistant (reply, announce, up to {MAX_TURNS} turns)"
    ));
    let body = json!({"target": "work", "from": "main", "from_endpoint": format!("{}/a2a", cast.main.base),
                      "text": "What is the boss's performance bonus this month?", "wait_ms": 10000,
                      "max_turns": MAX_TURNS});
    let url = format!("{}/a2a/sessions/send", cast.work.base);
    let (status, sent) = json_of(as_main(http, cast, Method::POST, url).json(&body), "the send").await?;
    if sent["status"] != "ok" {
        return Err(format!("the work assistant did not answer ({status}): {sent}"));
    }
    let reply = sent["reply"].as_str().unwrap_or_default().to_owned();
    log.say(format!("  main assistant got the reply: {reply:?}"));
    let bonus = yuan(&reply).ok_or_else(|| format!("no bonus in {reply:?}"))?;
    let run_id = sent["run_id"].as_str().ok_or("the send answered no run_id")?;
    let run = run_done(http, cast, &cast.work.base, run_id).await?;
    let turns = run["turns"].as_array().map_or(0, Vec::len);
    let ended_by = run["ended_by"].as_str().unwrap_or_default().to_owned();
    let announce = run["announce"]["status"].as_str().unwrap_or_default().to_owned();
    log.say(format!("  run {run_id}: {turns} ping-pong turn(s), ended by {ended_by}, announce {announce}"));
    let mut seen = Vec::new();
    let announced = wait_for(rx, &mut seen, "work assistant", "announce").await?;
    events.append(&mut seen);
    events.push(announced);

    // 3. sessions_history: the finance assistant's ledger.
    log.say("\n== 3. sessions_history: the main assistant reads the finance assistant's ledger");
    let url = format!("{}/a2a/sessions/finance/history?limit=20", cast.finance.base);
    let (status, hist) = json_of(as_main(http, cast, Method::GET, url), "reading the history").await?;
    let msgs = hist["messages"].as_array().ok_or_else(|| format!("no history ({status}): {hist}"))?;
    for m in msgs {
        log.say(format!(
            "  #{} {}: {:?}",
            m["seq"],
            m["role"].as_str().unwrap_or(""),
            m["text"].as_str().unwrap_or("")
        ));
    }
    let spent = msgs
        .iter()
        .rev()
        .filter(|m| m["role"] == "assistant")
        .find_map(|m| m["text"].as_str().and_then(|t| t.split("so far: ").nth(1)).and_then(yuan))
        .ok_or("the ledger says nothing about this month's spending")?;
    log.say(format!("  spent this month: {spent} yuan"));

    // 4. sessions_spawn: a price-check worker that announces back and is deleted.
    log.say("\n== 4. sessions_spawn: the main assistant spawns a price-check worker (cleanup: delete)");
    let body = json!({"parent": "main", "task": "Find the current price of a MacBook Pro 14.", "label": "price-check",
                      "template": "price-check", "cleanup": "delete"});
    let url = format!("{}/a2a/sessions/spawn", cast.main.base);
    let (status, sp) = json_of(as_main(http, cast, Method::POST, url).json(&body), "the spawn").await?;
    let (Some(run_id), Some(child)) = (sp["run_id"].as_str(), sp["child_session_key"].as_str()) else {
        return Err(format!("the spawn was refused ({status}): {sp}"));
    };
    let worker = format!("{}#{child}", cast.main.did);
    log.say(format!("  spawned worker {worker}"));
    let run = run_done(http, cast, &cast.main.base, run_id).await?;
    let found = run["reply"].as_str().unwrap_or_default().to_owned();
    let price = yuan(&found).ok_or_else(|| format!("no price in {found:?}"))?;
    let spawn_event = wait_for(rx, &mut seen, "main assistant", "spawn").await?;
    events.append(&mut seen);
    events.push(spawn_event);
    let worker_cleaned_up = cleaned_up(http, cast, child).await?;
    log.say(format!("  worker cleaned up: {worker_cleaned_up}"));

    // 5. The answer.
    let left = bonus.saturating_sub(spent);
    let verdict = if left >= price {
        format!("That covers it, with {} yuan to spare.", left - price)
    } else {
        format!("That leaves {left} yuan, {} yuan short: the bonus alone does not pay for it.", price - left)
    };
    let answer = format!(
        "Boss, I asked the work assistant: your bonus this month is {bonus} yuan. I read the finance assistant's \
         ledger: you have spent {spent} yuan this month. A worker I spawned checked the price: the MacBook is \
         {price} yuan. {verdict}"
    );
    log.say(format!("\n== main assistant -> boss:\n  {answer}"));
    Ok(Outcome { answer, bonus, spent, price, ended_by, turns, announce, worker, worker_cleaned_up, events })
}

/// Waits for a `kind` event from `agent`'s stream; the other events read meanwhile go to `seen`.
async fn wait_for(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<SeenEvent>,
    seen: &mut Vec<SeenEvent>,
    agent: &str,
    kind: &str,
) -> Result<SeenEvent, String> {
    let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(e)) if e.agent == agent && e.kind == kind => return Ok(e),
            Ok(Some(e)) => seen.push(e),
            Ok(None) => return Err(format!("the {agent}'s event stream ended before a {kind} event")),
            Err(_) => return Err(format!("no {kind} event from the {agent} within {STEP_TIMEOUT:?}")),
        }
    }
}

/// The worker's session is gone and, with `cleanup: delete`, its transcript too.
async fn cleaned_up(http: &reqwest::Client, cast: &Cast, child: &str) -> Result<bool, String> {
    // The worker ends right after its announce-back; give the end a moment to land.
    let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
    loop {
        let url = format!("{}/a2a/sessions/{child}", cast.main.base);
        let (status, body) = json_of(as_main(http, cast, reqwest::Method::GET, url), "reading the worker").await?;
        let gone = status == reqwest::StatusCode::NOT_FOUND && body["error"]["code"] == "unknown_session";
        if gone {
            let url = format!("{}/a2a/sessions/{child}/history", cast.main.base);
            let (_, h) =
                json_of(as_main(http, cast, reqwest::Method::GET, url), "reading the worker's history").await?;
            return Ok(h["messages"].as_array().is_some_and(Vec::is_empty));
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `a2a-server --sessions-demo [--linger] [--listen HOST:PORT]`: starts the cast (on `listen` and the two ports after
/// it, see [`start_cast_at`]; free ports without it), prints who is where and how to follow along, plays the story,
/// and with `linger` keeps the agents up until Ctrl-C.
pub async fn run(linger: bool, listen: Option<&str>) -> Result<(), String> {
    // OPS-4: SIGHUP does not end the demo's agents (they have no file to re-read); listened to before they serve.
    crate::reload::log_and_carry_on(crate::reload::Signals::new(), "the sessions demo");
    let log = Log::printing();
    let cast = start_cast_at(&log, listen).await?;
    log.say("A2A sessions demo: seed 001's story, three agents on loopback (scripted handlers, memory stores)");
    for a in [&cast.main, &cast.work, &cast.finance] {
        log.say(format!("  {:<18} {}  {}/a2a", a.name, a.did, a.base));
    }
    if crate::console::enabled_by_command_line() {
        for a in [&cast.main, &cast.work, &cast.finance] {
            log.say(format!("  {:<18} console: {}/console", a.name, a.base));
        }
    }
    log.say(format!("\nFollow along from another shell:\n{}\n", follow_commands(&cast)));
    let result = run_story(&cast, &log).await;
    if result.is_ok() && linger {
        log.say("\nThe agents stay up (--linger): paste the curl lines above; Ctrl-C stops them.");
        let _ = tokio::signal::ctrl_c().await;
    }
    cast.stop().await;
    result.map(|_| ())
}
