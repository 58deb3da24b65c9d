//! `a2a session ...`: sessions and agent-to-agent conversations (§17) from the command line.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::net::read_json_arg;
use super::output::{Output, Spinner};
use crate::sessions::{
    Cleanup, ContextMessage, ContextMode, EventsOptions, HistoryQuery, ListQuery, RunReply, SendOptions, SendRequest,
    SendResponse, SendStatus, Session, SessionKind, SessionRegistration, Sessions, SpawnRequest, Until, WaitChain,
    ask_wait, attachment_from_file,
};
use crate::{Client, ClientError};

/// Parses a wait: `0`, `500ms`, `10s`, `2m` (0 allowed: do not wait).
fn parse_wait(s: &str) -> Result<Duration, String> {
    if s.trim().trim_end_matches(['m', 's']) == "0" {
        return Ok(Duration::ZERO);
    }
    super::parse_duration(s)
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum KindArg {
    Main,
    Group,
    Cron,
    Hook,
    Node,
    Spawn,
    Other,
}

impl From<KindArg> for SessionKind {
    fn from(k: KindArg) -> Self {
        match k {
            KindArg::Main => SessionKind::Main,
            KindArg::Group => SessionKind::Group,
            KindArg::Cron => SessionKind::Cron,
            KindArg::Hook => SessionKind::Hook,
            KindArg::Node => SessionKind::Node,
            KindArg::Spawn => SessionKind::Spawn,
            KindArg::Other => SessionKind::Other,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ContextArg {
    None,
    Current,
    Full,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum UntilArg {
    /// The round-one reply.
    Reply,
    /// The whole run: ping-pong and announce.
    Done,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum CleanupArg {
    Delete,
    Keep,
}

/// The members of a send (§17.3).
#[derive(Debug, Args)]
pub(crate) struct SendArgs {
    /// The agent's URL.
    url: String,
    /// The target's session key (or give --label).
    #[arg(required_unless_present = "target_label")]
    target: Option<String>,
    /// The message; @FILE or @- reads it.
    #[arg(long, short = 'm', value_name = "TEXT|@FILE")]
    text: String,
    /// Send to the one visible session with this label instead of a key.
    #[arg(long = "label", conflicts_with = "target")]
    target_label: Option<String>,
    /// Your session key at your agent (the reply's and the turns' address).
    #[arg(long)]
    from: Option<String>,
    /// Where your agent serves §17, for ping-pong turns.
    #[arg(long)]
    from_endpoint: Option<String>,
    /// Ask for no reply (task dispatch or telemetry).
    #[arg(long)]
    no_reply: bool,
    /// Ask the target not to announce.
    #[arg(long)]
    no_announce: bool,
    /// How long the target has for its round-one reply.
    #[arg(long, value_parser = super::parse_duration, value_name = "DURATION")]
    run_timeout: Option<Duration>,
    /// Ping-pong turns after round one (0-20).
    #[arg(long)]
    max_turns: Option<u32>,
    /// Attach a file (image or other); repeatable, at most 8.
    #[arg(long = "attach", value_name = "FILE")]
    attachments: Vec<PathBuf>,
    /// The decoded size allowed for each attachment.
    #[arg(long, default_value_t = crate::sessions::DEFAULT_MAX_ATTACHMENT_BYTES, value_name = "BYTES")]
    max_attachment_bytes: usize,
    /// Metadata for the handler and the transcript: a JSON object, @FILE or @-.
    #[arg(long, value_name = "JSON|@FILE")]
    metadata: Option<String>,
    /// 0-9, higher is served first.
    #[arg(long)]
    priority: Option<u8>,
    /// What the target's handler is given besides the text.
    #[arg(long, value_enum)]
    context_mode: Option<ContextArg>,
    /// With --context-mode full: your recent transcript, a JSON array of {role, text}.
    #[arg(long, value_name = "JSON|@FILE")]
    context: Option<String>,
    /// The trace id carried on every hop.
    #[arg(long)]
    trace_id: Option<String>,
    /// A token budget the handler is told to respect.
    #[arg(long)]
    max_tokens: Option<u32>,
    /// The hop count of the delivery you are handling (A2A-Hop).
    #[arg(long)]
    hop: Option<u32>,
    /// The sessions already waiting on this chain (A2A-Wait-Chain), as given to a handler.
    #[arg(long, env = "A2A_WAIT_CHAIN", value_name = "ADDRESSES")]
    wait_chain: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum SessionCommand {
    /// Register (or refresh) an inbox session that you own.
    Register {
        /// The agent's URL.
        url: String,
        /// The session key (letters, digits, . _ ~ -).
        #[arg(id = "session_key", value_name = "KEY")]
        key: String,
        /// What it is about (5-2000 characters).
        #[arg(long)]
        summary: String,
        /// A label to find it by.
        #[arg(long)]
        label: Option<String>,
        /// Its kind.
        #[arg(long, value_enum)]
        kind: Option<KindArg>,
    },
    /// List the sessions visible to you, newest first.
    List {
        /// The agent's URL.
        url: String,
        /// Only these kinds (comma-separated).
        #[arg(long, value_enum, value_delimiter = ',')]
        kind: Vec<KindArg>,
        /// Only this label (exact).
        #[arg(long)]
        label: Option<String>,
        /// Only sessions of this agent (a DID).
        #[arg(long)]
        agent: Option<String>,
        /// Only sessions active in the last N minutes.
        #[arg(long, value_name = "N")]
        active_minutes: Option<u64>,
        /// Text to look for in label, summary or key.
        #[arg(long)]
        search: Option<String>,
        /// At most N (1-200).
        #[arg(long)]
        limit: Option<u32>,
        /// Skip N.
        #[arg(long)]
        offset: Option<u32>,
        /// Include your own sessions.
        #[arg(long)]
        include_self: bool,
        /// Include ended sessions.
        #[arg(long)]
        include_ended: bool,
    },
    /// Show one session.
    Show {
        /// The agent's URL.
        url: String,
        /// The session key (its id is not `key`: that is the global `--key`, and a clash panics at run time).
        #[arg(id = "session_key", value_name = "KEY")]
        key: String,
    },
    /// End a session that you own.
    End {
        /// The agent's URL.
        url: String,
        /// The session key (its id is not `key`: that is the global `--key`, and a clash panics at run time).
        #[arg(id = "session_key", value_name = "KEY")]
        key: String,
    },
    /// Send a message; by default does not wait (prints the run id).
    Send {
        #[command(flatten)]
        send: SendArgs,
        /// How long to wait for the round-one reply (0: answer at once).
        #[arg(long, default_value = "0", value_parser = parse_wait, value_name = "DURATION")]
        wait: Duration,
    },
    /// Ask and wait for the reply (default 60 s, at most 10 min).
    Ask {
        #[command(flatten)]
        send: SendArgs,
        /// How long to wait for the reply.
        #[arg(long, default_value = "60s", value_parser = parse_wait, value_name = "DURATION")]
        wait: Duration,
    },
    /// Read a run; with --wait, until its reply (or, with --until done, its end).
    Run {
        /// The agent's URL.
        url: String,
        /// The run id.
        run_id: String,
        /// How long to wait.
        #[arg(long, default_value = "0", value_parser = parse_wait, value_name = "DURATION")]
        wait: Duration,
        /// What to wait for.
        #[arg(long, value_enum, default_value = "reply")]
        until: UntilArg,
    },
    /// A session's transcript (newest last, bounded, secrets redacted).
    History {
        /// The agent's URL.
        url: String,
        /// The session key (its id is not `key`: that is the global `--key`, and a clash panics at run time).
        #[arg(id = "session_key", value_name = "KEY")]
        key: String,
        /// At most N messages from the end (1-1000).
        #[arg(long)]
        limit: Option<u32>,
        /// At most this many bytes of messages.
        #[arg(long)]
        max_bytes: Option<u64>,
        /// Include tool messages.
        #[arg(long)]
        include_tools: bool,
    },
    /// Spawn a worker session for one task.
    Spawn {
        /// The agent's URL.
        url: String,
        /// Your session that the worker reports back to.
        parent: String,
        /// The task; @FILE or @- reads it.
        #[arg(long, short = 't', value_name = "TEXT|@FILE")]
        task: String,
        /// A label for the worker.
        #[arg(long)]
        label: Option<String>,
        /// The agent's spawn template to use.
        #[arg(long)]
        template: Option<String>,
        /// How long the worker may take.
        #[arg(long, value_parser = super::parse_duration, value_name = "DURATION")]
        run_timeout: Option<Duration>,
        /// What to do with the worker afterwards.
        #[arg(long, value_enum, default_value = "keep")]
        cleanup: CleanupArg,
        /// Do not announce the outcome back.
        #[arg(long)]
        no_announce: bool,
    },
    /// The deliveries waiting in an inbox session that you own.
    Inbox {
        /// The agent's URL.
        url: String,
        /// The session key (its id is not `key`: that is the global `--key`, and a clash panics at run time).
        #[arg(id = "session_key", value_name = "KEY")]
        key: String,
        /// Wait this long for a delivery when the inbox is empty.
        #[arg(long, default_value = "0", value_parser = parse_wait, value_name = "DURATION")]
        wait: Duration,
    },
    /// Answer a delivery of your inbox session.
    Reply {
        /// The agent's URL.
        url: String,
        /// The run id of the delivery.
        run_id: String,
        /// The reply; @FILE or @- reads it.
        #[arg(required_unless_present = "error", conflicts_with = "error")]
        text: Option<String>,
        /// Fail the delivery with this message instead.
        #[arg(long)]
        error: Option<String>,
    },
    /// Follow the agent's event channel and print events as they arrive.
    Events {
        /// The agent's URL.
        url: String,
        /// Only this session's events.
        #[arg(long)]
        session: Option<String>,
        /// Start after this event id.
        #[arg(long, value_name = "ID")]
        after: Option<String>,
        /// Stop after N events.
        #[arg(long, value_name = "N")]
        count: Option<u64>,
        /// Give up after N failed reconnects in a row.
        #[arg(long, default_value_t = 10, value_name = "N")]
        max_reconnects: u32,
    },
}

impl SessionCommand {
    /// The agent's URL.
    pub(crate) fn url(&self) -> &str {
        match self {
            SessionCommand::Register { url, .. }
            | SessionCommand::List { url, .. }
            | SessionCommand::Show { url, .. }
            | SessionCommand::End { url, .. }
            | SessionCommand::Run { url, .. }
            | SessionCommand::History { url, .. }
            | SessionCommand::Spawn { url, .. }
            | SessionCommand::Inbox { url, .. }
            | SessionCommand::Reply { url, .. }
            | SessionCommand::Events { url, .. } => url,
            SessionCommand::Send { send, .. } | SessionCommand::Ask { send, .. } => &send.url,
        }
    }
}

/// Reads `TEXT`, `@FILE` or `@-`.
fn read_text(what: &str, arg: &str) -> Result<String, ClientError> {
    use std::io::Read;
    match arg.strip_prefix('@') {
        Some("-") => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| ClientError::invalid(format!("{what}: cannot read stdin: {e}")))?;
            Ok(s)
        }
        Some(path) => {
            std::fs::read_to_string(path).map_err(|e| ClientError::invalid(format!("{what}: cannot read {path}: {e}")))
        }
        None => Ok(arg.to_owned()),
    }
}

fn build_send(a: &SendArgs) -> Result<(SendRequest, SendOptions), ClientError> {
    let mut r = SendRequest {
        target: a.target.clone(),
        target_label: a.target_label.clone(),
        text: read_text("--text", &a.text)?,
        from: a.from.clone(),
        from_endpoint: a.from_endpoint.clone(),
        run_timeout_ms: a.run_timeout.map(|d| d.as_millis() as u64),
        max_turns: a.max_turns,
        priority: a.priority,
        trace_id: a.trace_id.clone(),
        max_tokens: a.max_tokens,
        ..SendRequest::default()
    };
    if a.no_reply {
        r.reply = Some(false);
    }
    if a.no_announce {
        r.announce = Some(false);
    }
    r.context_mode = a.context_mode.map(|c| match c {
        ContextArg::None => ContextMode::None,
        ContextArg::Current => ContextMode::Current,
        ContextArg::Full => ContextMode::Full,
    });
    if let Some(m) = &a.metadata {
        match read_json_arg("--metadata", m)? {
            Value::Object(map) => r.metadata = map.into_iter().collect(),
            _ => return Err(ClientError::invalid("--metadata must be a JSON object")),
        }
    }
    if let Some(c) = &a.context {
        r.context = serde_json::from_value::<Vec<ContextMessage>>(read_json_arg("--context", c)?).map_err(|e| {
            ClientError::invalid(format!("--context must be a JSON array of {{\"role\", \"text\"}}: {e}"))
        })?;
    }
    for f in &a.attachments {
        r.attachments.push(attachment_from_file(f, a.max_attachment_bytes)?);
    }
    let mut opts = SendOptions { hop: a.hop, ..SendOptions::default() };
    if let Some(c) = &a.wait_chain {
        opts.wait_chain = WaitChain::parse(c).map_err(|e| ClientError::invalid(format!("--wait-chain: {}", e.0)))?;
    }
    Ok((r, opts))
}

fn print_session(out: &Output, s: &Session) {
    out.line(format!("session   {}", s.address));
    if let Some(l) = &s.label {
        out.line(format!("label     {l}"));
    }
    out.line(format!("kind      {}", s.kind.as_str()));
    out.line(format!(
        "handler   {}",
        match s.handler {
            crate::sessions::HandlerKind::Hosted => "hosted",
            crate::sessions::HandlerKind::Inbox => "inbox",
        }
    ));
    out.line(format!("summary   {}", s.summary));
    out.line(format!("updated   {}", s.updated_at));
    if let Some(p) = &s.parent {
        out.line(format!("parent    {p} (depth {})", s.depth));
    }
    if let Some(e) = &s.ended_at {
        out.line(format!("ended     {e}"));
    }
}

fn value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or_default()
}

/// The exit code of a send's outcome: 0 when it did what was asked, 4 when the reply did not come in time, 1 when
/// the target failed or policy refused.
fn outcome_code(r: &SendResponse, wanted_reply: bool) -> i32 {
    match r.status {
        SendStatus::Ok | SendStatus::NoReply => 0,
        SendStatus::Accepted if wanted_reply => 4,
        SendStatus::Accepted => 0,
        SendStatus::Timeout => 4,
        SendStatus::Error | SendStatus::Forbidden => 1,
    }
}

fn print_outcome(out: &Output, url: &str, r: &SendResponse, wanted_reply: bool) {
    if out.json {
        out.json_doc(&value(r));
        return;
    }
    out.line(format!("status    {}", r.status.as_str()));
    if let Some(id) = &r.run_id {
        out.line(format!("run       {id}"));
    }
    if let Some(t) = &r.target {
        out.line(format!("target    {t}"));
    }
    if let Some(reply) = &r.reply {
        out.line(format!("reply     {reply}"));
    }
    if let Some(e) = &r.error {
        out.line(format!("error     {}: {}", e.code, e.message));
    }
    if r.status == SendStatus::Accepted
        && wanted_reply
        && let Some(id) = &r.run_id
    {
        out.note(format!("a2a: the target is still working; the reply is kept: a2a session run {url} {id} --wait 60s"));
    }
}

/// Runs `a2a session ...`.
pub(crate) async fn execute(out: &Output, client: &Client, command: SessionCommand) -> Result<i32, ClientError> {
    let sessions = client.sessions(command.url())?;
    match command {
        SessionCommand::Register { key, summary, label, kind, .. } => {
            let reg = SessionRegistration { session_key: key, label, kind: kind.map(Into::into), summary };
            let r = sessions.register(&reg).await?;
            if out.json {
                out.json_doc(&json!({"created": r.created, "session": value(&r.session)}));
            } else {
                print_session(out, &r.session);
                out.note(if r.created { "a2a: registered" } else { "a2a: refreshed" });
            }
            Ok(0)
        }
        SessionCommand::List {
            kind,
            label,
            agent,
            active_minutes,
            search,
            limit,
            offset,
            include_self,
            include_ended,
            ..
        } => {
            let q = ListQuery {
                kinds: kind.into_iter().map(Into::into).collect(),
                label,
                agent,
                active_minutes,
                search,
                limit,
                offset,
                include_self,
                include_ended,
            };
            let l = sessions.list(&q).await?;
            if out.json {
                out.json_doc(&value(&l));
                return Ok(0);
            }
            if l.sessions.is_empty() {
                out.line("no sessions");
            }
            for s in &l.sessions {
                out.line(format!(
                    "{}  [{}]  {}  {}",
                    s.address,
                    s.kind.as_str(),
                    s.label.as_deref().unwrap_or("-"),
                    s.summary.chars().take(80).collect::<String>()
                ));
            }
            out.note(format!(
                "a2a: {} of {} shown{}",
                l.sessions.len(),
                l.total,
                if l.truncated { " (truncated to fit the answer's size)" } else { "" }
            ));
            Ok(0)
        }
        SessionCommand::Show { key, .. } => {
            let s = sessions.get(&key).await?;
            if out.json {
                out.json_doc(&value(&s))
            } else {
                print_session(out, &s)
            }
            Ok(0)
        }
        SessionCommand::End { key, .. } => {
            let s = sessions.end(&key).await?;
            if out.json {
                out.json_doc(&value(&s))
            } else {
                print_session(out, &s)
            }
            Ok(0)
        }
        SessionCommand::Send { send, wait } => {
            let (mut r, opts) = build_send(&send)?;
            r.wait_ms = (!wait.is_zero()).then_some(wait.as_millis() as u64);
            let wanted = r.reply != Some(false) && !wait.is_zero();
            run_send(out, &sessions, &send.url, &r, &opts, wanted).await
        }
        SessionCommand::Ask { send, wait } => {
            let (mut r, opts) = build_send(&send)?;
            if r.reply == Some(false) {
                return Err(ClientError::invalid("ask waits for a reply: use `a2a session send --no-reply` instead"));
            }
            r.reply = Some(true);
            r.wait_ms = Some(ask_wait(Some(wait)).as_millis() as u64);
            run_send(out, &sessions, &send.url, &r, &opts, true).await
        }
        SessionCommand::Run { run_id, wait, until, url } => {
            let until = match until {
                UntilArg::Reply => Until::Reply,
                UntilArg::Done => Until::Done,
            };
            let spinner = Spinner::start(out);
            if !wait.is_zero() {
                spinner.set(format!("waiting for run {run_id}"));
            }
            let r =
                if wait.is_zero() { sessions.run_now(&run_id).await } else { sessions.run(&run_id, wait, until).await };
            spinner.finish().await;
            let run = r?;
            if out.json {
                out.json_doc(&value(&run));
            } else {
                out.line(format!("run       {}", run.run_id));
                out.line(format!("target    {}", run.target));
                out.line(format!("from      {}", run.from));
                out.line(format!("status    {}", run.status.as_str()));
                out.line(format!("state     {}", value(&run.state).as_str().unwrap_or_default()));
                if let Some(reply) = &run.reply {
                    out.line(format!("reply     {reply}"));
                }
                if let Some(e) = &run.error {
                    out.line(format!("error     {}: {}", e.code, e.message));
                }
                for t in &run.turns {
                    out.line(format!("turn {}/{}  {}: {}", t.n, t.of, t.session, t.text));
                }
                if let Some(e) = run.ended_by {
                    out.line(format!("ended by  {}", value(&e).as_str().unwrap_or_default()));
                }
                out.line(format!("announce  {}", value(&run.announce.status).as_str().unwrap_or_default()));
                if let Some(t) = &run.announce.text {
                    out.line(format!("          {t}"));
                }
            }
            if !wait.is_zero() && !until.reached(&run) {
                out.note(format!(
                    "a2a: the run is not there yet; wait longer: a2a session run {url} {run_id} --wait 60s"
                ));
                return Ok(4);
            }
            Ok(match run.status {
                SendStatus::Timeout => 4,
                SendStatus::Error | SendStatus::Forbidden => 1,
                _ => 0,
            })
        }
        SessionCommand::History { key, limit, max_bytes, include_tools, .. } => {
            let h = sessions.history(&key, &HistoryQuery { limit, max_bytes, include_tools }).await?;
            if out.json {
                out.json_doc(&value(&h));
                return Ok(0);
            }
            if h.truncated || h.bytes_capped {
                out.line(format!(
                    "(older messages left out{})",
                    if h.bytes_capped { " to keep within the byte cap" } else { "" }
                ));
            }
            for m in &h.messages {
                let from = m.provenance.as_ref().map(|p| p.source_session.clone().unwrap_or(p.source_agent.clone()));
                out.line(format!(
                    "#{} {} {}{}: {}{}",
                    m.seq,
                    m.at,
                    value(&m.role).as_str().unwrap_or_default(),
                    from.map(|f| format!(" from {f}")).unwrap_or_default(),
                    m.text,
                    if m.truncated {
                        format!(" [cut from {} chars]", m.original_chars.unwrap_or(0))
                    } else {
                        String::new()
                    }
                ));
            }
            if h.redacted > 0 {
                out.note(format!("a2a: {} secret(s) redacted", h.redacted));
            }
            Ok(0)
        }
        SessionCommand::Spawn { parent, task, label, template, run_timeout, cleanup, no_announce, .. } => {
            let req = SpawnRequest {
                parent,
                task: read_text("--task", &task)?,
                label,
                template,
                run_timeout_ms: run_timeout.map(|d| d.as_millis() as u64),
                cleanup: match cleanup {
                    CleanupArg::Delete => Cleanup::Delete,
                    CleanupArg::Keep => Cleanup::Keep,
                },
                announce: no_announce.then_some(false),
            };
            let r = sessions.spawn(&req).await?;
            if out.json {
                out.json_doc(&value(&r));
            } else {
                out.line(format!("status    {}", r.status.as_str()));
                out.line(format!("run       {}", r.run_id));
                out.line(format!("worker    {}", r.child_session_key));
            }
            Ok(0)
        }
        SessionCommand::Inbox { key, wait, .. } => {
            let spinner = Spinner::start(out);
            if !wait.is_zero() {
                spinner.set(format!("waiting for deliveries to {key}"));
            }
            let r = sessions.inbox(&key, wait).await;
            spinner.finish().await;
            let inbox = r?;
            if out.json {
                out.json_doc(&value(&inbox));
                return Ok(0);
            }
            if inbox.deliveries.is_empty() {
                out.line("no deliveries");
            }
            for d in &inbox.deliveries {
                out.line(format!("run {}  ({})", d.run_id, d.provenance.line()));
                if let Some(i) = &d.instruction {
                    out.line(format!("  {i}"));
                }
                out.line(format!("  {}", d.text));
            }
            Ok(0)
        }
        SessionCommand::Reply { run_id, text, error, .. } => {
            let reply = RunReply { reply: text.map(|t| read_text("reply", &t)).transpose()?, error };
            let run = sessions.reply(&run_id, &reply).await?;
            if out.json {
                out.json_doc(&value(&run));
            } else {
                out.line(format!("run       {}\nstatus    {}", run.run_id, run.status.as_str()));
            }
            Ok(0)
        }
        SessionCommand::Events { session, after, count, max_reconnects, .. } => {
            let opts = EventsOptions { session, last_event_id: after, max_reconnects, ..EventsOptions::default() };
            let mut stream = sessions.events(opts).await?;
            let mut seen = 0u64;
            while count.is_none_or(|c| seen < c) {
                let Some(item) = stream.next().await else { break };
                let ev = item?;
                seen += 1;
                if out.json {
                    // One line per event, so that a pipe sees each as it arrives.
                    let doc = json!({"id": ev.id, "event": ev.event, "data": ev.json().unwrap_or(Value::String(ev.data.clone()))});
                    out.line(doc.to_string());
                } else {
                    out.line(format!("[{}] {}  {}", ev.id.as_deref().unwrap_or("-"), ev.event, describe_event(&ev)));
                }
            }
            Ok(0)
        }
    }
}

/// A one-line description of an event for people.
fn describe_event(ev: &crate::sessions::Event) -> String {
    let Some(d) = ev.json() else { return ev.data.clone() };
    let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    match ev.event.as_str() {
        "announce" => format!("{}: {}", s("session"), s("text")),
        "run" => format!("run {} {} ({}): {}", s("run_id"), s("status"), s("target"), s("reply")),
        "spawn" => format!("{} -> {}: {} {}", s("child"), s("parent"), s("status"), s("reply")),
        _ => ev.data.clone(),
    }
}

async fn run_send(
    out: &Output,
    sessions: &Sessions,
    url: &str,
    r: &SendRequest,
    opts: &SendOptions,
    wanted_reply: bool,
) -> Result<i32, ClientError> {
    let spinner = Spinner::start(out);
    if r.wait_ms.unwrap_or(0) > 0 {
        spinner.set(format!("waiting for {}", r.target.as_deref().or(r.target_label.as_deref()).unwrap_or("")));
    }
    let resp = sessions.send_with(r, opts).await;
    spinner.finish().await;
    let resp = resp?;
    print_outcome(out, url, &resp, wanted_reply);
    Ok(outcome_code(&resp, wanted_reply))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_of_zero_are_allowed_and_others_parse_as_durations() {
        assert_eq!(parse_wait("0"), Ok(Duration::ZERO));
        assert_eq!(parse_wait("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_wait("0ms"), Ok(Duration::ZERO));
        assert_eq!(parse_wait("2s"), Ok(Duration::from_secs(2)));
        assert!(parse_wait("-1").is_err());
    }

    #[test]
    fn outcomes_map_to_exit_codes() {
        let r = |status| SendResponse { run_id: None, status, reply: None, error: None, target: None };
        assert_eq!(outcome_code(&r(SendStatus::Ok), true), 0);
        assert_eq!(outcome_code(&r(SendStatus::NoReply), true), 0);
        assert_eq!(outcome_code(&r(SendStatus::Accepted), false), 0);
        assert_eq!(outcome_code(&r(SendStatus::Accepted), true), 4);
        assert_eq!(outcome_code(&r(SendStatus::Timeout), true), 4);
        assert_eq!(outcome_code(&r(SendStatus::Error), true), 1);
        assert_eq!(outcome_code(&r(SendStatus::Forbidden), false), 1);
    }
}
