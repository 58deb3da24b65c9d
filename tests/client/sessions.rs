//! Sessions (§17) from the SDK and the `a2a session` commands, run as a subprocess: what is refused before anything
//! is sent, and how a failure reads.

use std::time::Duration;

use a2a_client::ClientError;
use a2a_client::sessions::{SendStatus, attachment_from_bytes, message};

use crate::common::{TempDir, TestAgent, client, dead_url, runs, standard};

const AGENT: &str = "did:web:agent.example.com";

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

async fn a2a(args: &[&str]) -> Out {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(a2a_test_support::bin("a2a"))
            .args(args)
            .env_remove("A2A_DID")
            .env_remove("A2A_KEY_FILE")
            .env_remove("A2A_WAIT_CHAIN")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("a2a finished in time")
    .expect("a2a ran");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[tokio::test]
async fn an_attachment_over_the_limit_is_refused_before_anything_is_sent() {
    // Nothing listens at the URL: exit 2 (refused input), not 3 (unreachable), shows no connection was tried.
    let dir = TempDir::new("attach");
    let big = dir.path("payslip.png");
    std::fs::write(&big, vec![0u8; 256 * 1024 + 1]).expect("write");
    let url = dead_url();
    let r = a2a(&[
        "session",
        "ask",
        &url,
        "bonus-desk",
        "-m",
        "see attached",
        "--attach",
        big.to_str().expect("a UTF-8 path"),
    ])
    .await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("attachment \"payslip.png\" is 262145 bytes, over the limit of 262144 bytes"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("hint: make it smaller"), "{}", r.stderr);

    let r = a2a(&[
        "session",
        "send",
        &url,
        "bonus-desk",
        "-m",
        "x",
        "--attach",
        big.to_str().expect("a UTF-8 path"),
        "--json",
    ])
    .await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    let e: serde_json::Value = serde_json::from_str(&r.stderr).expect("a JSON error");
    assert_eq!(e["error"]["code"], "payload_too_large");

    // At the limit it goes out, and then the missing agent is the failure.
    std::fs::write(&big, vec![0u8; 256 * 1024]).expect("write");
    let r =
        a2a(&["session", "send", &url, "bonus-desk", "-m", "x", "--attach", big.to_str().expect("a UTF-8 path")]).await;
    assert_eq!(r.code, 3, "{}", r.stderr);
}

#[tokio::test]
async fn bad_sends_are_named_member_by_member_without_a_round_trip() {
    let url = dead_url();
    for (args, want) in [
        (vec!["bonus-desk", "-m", ""], "`text` is 1 to 20000 characters"),
        (vec!["bad key", "-m", "hi"], "`target`"),
        (vec!["desk", "-m", "hi", "--priority", "12"], "`priority` is 0 to 9"),
        (vec!["desk", "-m", "hi", "--max-turns", "21"], "`max_turns` is 0 to 20"),
        (vec!["desk", "-m", "hi", "--from", "a/b"], "`from`"),
        (vec!["desk", "-m", "hi", "--context", "[{\"role\":\"user\",\"text\":\"x\"}]"], "`context` is only sent"),
        (vec!["desk", "-m", "hi", "--metadata", "[1]"], "--metadata must be a JSON object"),
        (vec!["desk", "-m", "hi", "--wait-chain", "not-an-address"], "--wait-chain"),
    ] {
        let mut full = vec!["session", "send", url.as_str()];
        full.extend(args.iter().copied());
        let r = a2a(&full).await;
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(want), "{args:?}: {}", r.stderr);
    }
    let r = a2a(&["session", "ask", &url, "desk", "-m", "hi", "--no-reply"]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("use `a2a session send --no-reply`"), "{}", r.stderr);
    // Usage errors: a target and a label, no text.
    assert_eq!(a2a(&["session", "send", &url, "desk", "--label", "x", "-m", "hi"]).await.code, 2);
    assert_eq!(a2a(&["session", "send", &url, "desk"]).await.code, 2);
}

#[tokio::test]
async fn the_sdk_checks_attachments_and_members_before_sending() {
    let c = client();
    let s = c.sessions(&dead_url()).expect("url");
    let mut m = message("desk", "see attached");
    m.attachments = vec![attachment_from_bytes("a.bin", "application/octet-stream", &[1; 10], 10).expect("fits"); 9];
    let e = s.send(&m).await.expect_err("nine attachments");
    assert!(matches!(e, ClientError::InvalidInput { .. }), "{e}");
    let s = s.max_attachment_bytes(5);
    m.attachments.truncate(1);
    let e = s.send(&m).await.expect_err("over the configured limit");
    assert!(matches!(e, ClientError::TooLarge { limit: 5, actual: 10, .. }), "{e}");
    // Within bounds, the send goes out: here nothing listens.
    let e = s.max_attachment_bytes(10).send(&m).await.expect_err("nothing listens");
    assert_eq!(e.code(), "unreachable", "{e}");
}

#[tokio::test]
async fn an_agent_without_sessions_is_a_readable_error_not_a_panic() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let s = client().sessions(&t.endpoint).expect("url");
    let e = s.list(&Default::default()).await.expect_err("no sessions here");
    assert!(!e.to_string().is_empty() && !e.hint().is_empty(), "{e}");
    let r = s.send(&message("desk", "hi")).await;
    assert!(r.as_ref().is_err_and(|e| e.code() != "forbidden") || r.is_ok_and(|r| r.status != SendStatus::Ok));
    let out = a2a(&["session", "list", &t.endpoint]).await;
    assert!(matches!(out.code, 1 | 3), "{} {}", out.stdout, out.stderr);
    assert!(out.stderr.starts_with("a2a: error: SESSION LIST"), "{}", out.stderr);
    assert!(out.stderr.contains("hint: "), "{}", out.stderr);
}

// --- against a real agent serving sessions ----------------------------------------------------------------------

use a2a_client::sessions::{
    EventsOptions, HistoryQuery, ListQuery, RunReply, RunState, SessionKind, SessionRegistration, SpawnRequest, Until,
};
use a2a_core::sessions::Delivery;
use a2a_server::AgentBuilder;
use a2a_server::sessions::{HandlerFailure, HostedSession, SessionSettings, SessionsBuilder, Visibility};
use futures_util::StreamExt;

fn echo() -> impl Fn(Delivery) -> std::future::Ready<Result<String, HandlerFailure>> + Send + Sync {
    |d: Delivery| std::future::ready(Ok(format!("echo: {}", d.text)))
}

/// An agent with a hosted `bonus-desk` session that echoes, and a spawn template `w`; no signatures required, and
/// the test caller allowed (POL-1).
async fn session_agent() -> TestAgent {
    let mut s = SessionSettings::default();
    s.auth_requirement = a2a_core::capability::AuthRequirement::None;
    s.visibility = Visibility::All;
    s.allow_list = a2a_core::sessions::AllowList(vec![format!("{AGENT}#*"), format!("{}#*", crate::common::CALLER)]);
    let sb = SessionsBuilder::new()
        .settings(s)
        .session(
            HostedSession::new("bonus-desk", "Knows the boss's payroll and bonuses.")
                .label("work assistant")
                .kind(SessionKind::Main),
            echo(),
        )
        .spawn_template("w", |d: Delivery| std::future::ready(Ok(format!("price of {}: 12", d.text))));
    TestAgent::start(AgentBuilder::new(AGENT).sessions(sb)).await
}

#[tokio::test]
async fn sessions_sdk_registers_lists_sends_awaits_reads_history_and_ends() {
    let t = session_agent().await;
    let s = client().sessions(&t.endpoint).expect("url");

    let reg = SessionRegistration {
        session_key: "my-inbox".into(),
        label: Some("caller inbox".into()),
        kind: Some(SessionKind::Group),
        summary: "the caller's inbox".into(),
    };
    assert!(s.register(&reg).await.expect("register").created);
    assert!(!s.register(&reg).await.expect("refresh").created);

    let keys = |l: &a2a_client::sessions::SessionList| -> Vec<String> {
        l.sessions.iter().map(|x| x.session_key.clone()).collect()
    };
    let all = s.list(&ListQuery { include_self: true, ..Default::default() }).await.expect("list");
    let mut listed = keys(&all);
    listed.sort();
    assert_eq!(listed, ["bonus-desk", "my-inbox"]);
    // Newest first. Which one is newest depends on when the agent's heartbeat last refreshed its hosted session
    // (at start, in a task of its own that a loaded machine may run after the registration above): the order is
    // checked against the times listed.
    let times: Vec<std::time::SystemTime> = all
        .sessions
        .iter()
        .map(|x| a2a_core::wire::parse_timestamp(&x.updated_at).expect("an RFC 3339 updated_at"))
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "not newest first: {:?}", keys(&all).iter().zip(&times));
    assert_eq!(keys(&s.list(&ListQuery::default()).await.expect("list")), ["bonus-desk"], "own sessions left out");
    let q = ListQuery { kinds: vec![SessionKind::Group], include_self: true, ..Default::default() };
    assert_eq!(keys(&s.list(&q).await.expect("list")), ["my-inbox"]);
    let q = ListQuery { search: Some("PAYROLL".into()), ..Default::default() };
    assert_eq!(keys(&s.list(&q).await.expect("list")), ["bonus-desk"]);
    let q = ListQuery { label: Some("work assistant".into()), limit: Some(1), offset: Some(0), ..Default::default() };
    assert_eq!(s.list(&q).await.expect("list").total, 1);
    assert_eq!(s.get("bonus-desk").await.expect("get").label.as_deref(), Some("work assistant"));

    // Ask: the reply comes back in the answer.
    let a = s.ask(message("bonus-desk", "What is the bonus?"), Some(Duration::from_secs(10))).await.expect("ask");
    assert_eq!((a.status, a.reply.as_deref()), (SendStatus::Ok, Some("echo: What is the bonus?")), "{a:?}");

    // Send without waiting, then await the run to its end.
    let mut m = message("bonus-desk", "Paid in May?");
    m.metadata.insert("ticket".into(), serde_json::json!("FIN-1042"));
    m.priority = Some(7);
    m.trace_id = Some("4bf92f3577b34da6a3ce929d0e0e4736".into());
    m.max_tokens = Some(100);
    m.attachments = vec![attachment_from_bytes("note.txt", "text/plain", b"hello", 1024).expect("fits")];
    let sent = s.send(&m).await.expect("send");
    assert_eq!(sent.status, SendStatus::Accepted, "{sent:?}");
    let run_id = sent.run_id.expect("a run id");
    let run = s.run(&run_id, Duration::from_secs(10), Until::Done).await.expect("run");
    assert_eq!(
        (run.state, run.status, run.reply.as_deref()),
        (RunState::Done, SendStatus::Ok, Some("echo: Paid in May?"))
    );

    // Unknown targets are errors with the protocol's code.
    let e = s.send(&message("nobody-here", "hi")).await.expect_err("unknown");
    assert_eq!(e.code(), "unknown_session", "{e}");
    assert!(e.hint().contains("a2a session list"), "{}", e.hint());

    // A sender outside the allow list gets `forbidden` as an outcome.
    let stranger =
        a2a_client::Client::builder(a2a_client::Identity::unsigned("did:web:stranger.example.com").expect("did"))
            .build()
            .expect("client");
    let mut m = message("bonus-desk", "let me in");
    m.from = Some("main".into());
    let f = stranger.sessions(&t.endpoint).expect("url").send(&m).await.expect("an outcome");
    assert_eq!(f.status, SendStatus::Forbidden, "{f:?}");

    // History, bounded.
    let h = s.history("bonus-desk", &HistoryQuery { limit: Some(2), ..Default::default() }).await.expect("history");
    assert_eq!(h.messages.len(), 2, "{h:?}");
    assert!(h.truncated);

    // Inbox: a delivery waits for its owner, who answers it.
    let to_inbox = s.send(&message("my-inbox", "ping")).await.expect("send to the inbox");
    let inbox_run = to_inbox.run_id.expect("run id");
    let inbox = s.inbox("my-inbox", Duration::from_secs(5)).await.expect("inbox");
    let d = inbox.deliveries.iter().find(|d| d.run_id == inbox_run).expect("the delivery");
    assert_eq!(d.text, "ping");
    s.reply(&inbox_run, &RunReply { reply: Some("pong".into()), error: None }).await.expect("reply");
    let r = s.run(&inbox_run, Duration::from_secs(5), Until::Reply).await.expect("run");
    assert_eq!((r.status, r.reply.as_deref()), (SendStatus::Ok, Some("pong")));

    // Spawn a worker from the caller's session; its run ends with the template's answer.
    let sp = s
        .spawn(&SpawnRequest {
            parent: "my-inbox".into(),
            task: "lamp".into(),
            label: Some("price check".into()),
            template: Some("w".into()),
            run_timeout_ms: Some(10_000),
            cleanup: a2a_client::sessions::Cleanup::Keep,
            announce: Some(true),
        })
        .await
        .expect("spawn");
    assert_eq!(sp.status, SendStatus::Accepted);
    let wr = s.run(&sp.run_id, Duration::from_secs(10), Until::Reply).await.expect("worker run");
    assert_eq!(wr.reply.as_deref(), Some("price of lamp: 12"), "{wr:?}");

    let ended = s.end("my-inbox").await.expect("end");
    assert!(ended.ended_at.is_some());
    assert_eq!(s.get("my-inbox").await.expect_err("gone").code(), "unknown_session");
}

#[tokio::test]
async fn sessions_events_arrive_as_a_stream_and_resume_after_the_last_id() {
    let t = session_agent().await;
    let s = client().sessions(&t.endpoint).expect("url");
    let mut events = s.events(EventsOptions::default().session("bonus-desk")).await.expect("the channel");
    let sent = s.send(&message("bonus-desk", "Tell the boss: bonus 5000")).await.expect("send");
    let run_id = sent.run_id.expect("run id");
    let first = tokio::time::timeout(Duration::from_secs(10), events.next()).await.expect("an event").expect("open");
    let first = first.expect("an event, not an error");
    assert_eq!(first.event, "announce", "{first:?}");
    assert_eq!(first.json().expect("json")["run_id"], run_id.as_str());
    assert_eq!(events.last_event_id(), first.id);

    // A new follower that starts after the announce sees what came next (the run's `run` event), not it again.
    let after = first.id.clone().expect("an id");
    let mut resumed =
        s.events(EventsOptions::default().session("bonus-desk").after(after.clone())).await.expect("resume");
    let next = tokio::time::timeout(Duration::from_secs(10), resumed.next()).await.expect("an event").expect("open");
    let next = next.expect("an event");
    assert_ne!(next.id.as_deref(), Some(after.as_str()));
    assert_eq!(next.event, "run", "{next:?}");
    assert_eq!(next.run().expect("a run").run_id, run_id);
}

#[tokio::test]
async fn session_commands_ask_list_and_follow_events_against_a_real_agent() {
    let t = session_agent().await;
    let did = crate::common::CALLER;
    let r =
        a2a(&["session", "ask", &t.endpoint, "bonus-desk", "-m", "What is the bonus?", "--wait", "10s", "--did", did])
            .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("status    ok"), "{}", r.stdout);
    assert!(r.stdout.contains("reply     echo: What is the bonus?"), "{}", r.stdout);

    let r = a2a(&["session", "list", &t.endpoint, "--did", did, "--json"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let l: serde_json::Value = serde_json::from_str(&r.stdout).expect("json");
    assert_eq!(l["sessions"][0]["session_key"], "bonus-desk");

    let r = a2a(&["session", "send", &t.endpoint, "bonus-desk", "-m", "later", "--did", did, "--json"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let sent: serde_json::Value = serde_json::from_str(&r.stdout).expect("json");
    assert_eq!(sent["status"], "accepted");
    let run_id = sent["run_id"].as_str().expect("run id").to_owned();
    let r = a2a(&["session", "run", &t.endpoint, &run_id, "--wait", "10s", "--until", "done", "--did", did]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("reply     echo: later") && r.stdout.contains("state     done"), "{}", r.stdout);

    // From the start of the buffer (after id 0): the events of the two runs above, as they were published.
    let r = a2a(&[
        "session",
        "events",
        &t.endpoint,
        "--session",
        "bonus-desk",
        "--after",
        "0",
        "--count",
        "3",
        "--json",
        "--did",
        did,
    ])
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<serde_json::Value> =
        r.stdout.lines().map(|l| serde_json::from_str(l).expect("one JSON event a line")).collect();
    assert_eq!(lines.len(), 3, "{}", r.stdout);
    assert!(lines.iter().any(|e| e["event"] == "announce"), "{}", r.stdout);

    let r = a2a(&["session", "ask", &t.endpoint, "nobody", "-m", "hi", "--did", did]).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("unknown_session") && r.stderr.contains("hint: "), "{}", r.stderr);
}
