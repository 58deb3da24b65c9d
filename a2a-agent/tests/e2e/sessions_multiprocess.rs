//! Sessions across real `a2a-server` processes on one real Redis, the requester on one process and the
//! target on the other:
//!
//! - two agents, X on process one and Y on process two, sharing the registry: the four reply x announce modes with
//!   ping-pong turns that Y drives over HTTP to X's process, NO_REPLY ending the exchange (and round one), the
//!   announce channel, a wait cycle X#a -> Y#b then Y#b -> X#a refused with `wait_cycle` through the shared wait
//!   edges (POL-6), and policy denials on both sides and on a turn;
//! - the same two agents through every other termination rule of a ping-pong (an empty reply, a repeat, the last
//!   turn, a turn past the run's time, an unreachable requester), every round-one outcome (`timeout`, `error`,
//!   `accepted` with the late reply read on the requester's process) and the history bounds and redaction of
//!   transcripts written by both processes;
//! - one agent served by two processes: a run started on one awaited on the other, an inbox answered through one
//!   while the waiter was on the other (the late reply kept, SND-6/SND-8), spawn limits counted across processes,
//!   and an open event stream ended by the shutdown signal (ANN-4) and resumed on the other process.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common::TempDir;
use crate::redis_support::{RedisServer, unique_prefix};
use crate::server_process::ServerProcess as Server;
use crate::sessions::read_events_to_end as events;

const DID: &str = "did:web:localhost%3A8080";
const CALLER: &str = "did:web:caller.example.com";
const X: &str = "did:web:x.example.com";
const Y: &str = "did:web:y.example.com";

/// The session program of X's sessions: a reply step ends the exchange with NO_REPLY (seed 000).
const A_SH: &str = r#"d=$(cat)
case "$A2A_STEP" in
  reply) echo NO_REPLY ;;
  *) echo "a heard you" ;;
esac
"#;

/// The session program of Y's sessions: announces, skips its own turns, and is slow or quiet when asked.
const B_SH: &str = r#"d=$(cat)
case "$A2A_STEP" in
  announce) echo "Told the boss: the bonus is 5000." ;;
  reply) echo REPLY_SKIP ;;
  *)
    case "$d" in
      *slow-please*) sleep 3; echo "A slow answer." ;;
      *quiet-please*) echo NO_REPLY ;;
      *) echo "The bonus is 5000." ;;
    esac ;;
esac
"#;

/// One agent's configuration.
struct AgentSpec<'a> {
    /// The file's name (without `.toml`).
    name: &'a str,
    did: &'a str,
    /// `sessions.allow` (POL-1).
    allow: &'a [&'a str],
    /// The hosted sessions: key and the shell program that answers them.
    sessions: &'a [(&'a str, &'a str)],
    /// More of `[sessions]` (limits, spawn templates).
    extra: &'a str,
}

/// The configuration of `agent` on this Redis (`prefix` shared by every agent of a test).
fn agent_config(dir: &TempDir, redis: &str, prefix: &str, agent: &AgentSpec<'_>) -> std::path::PathBuf {
    let AgentSpec { name, did, allow, sessions, extra } = agent;
    let mut text = format!(
        r#"
[agent]
did = "{did}"

[limits]
shutdown_grace_ms = 30000

[store]
redis_url = "{redis}"
key_prefix = "{prefix}"

[sessions]
auth_requirement = "none"
visibility = "all"
allow = {allow:?}
{extra}
"#
    );
    for (key, program) in *sessions {
        let script = dir.write(&format!("{name}-{key}.sh"), program);
        text.push_str(&format!(
            "\n[[sessions.session]]\nsession_key = \"{key}\"\nlabel = \"{key}\"\nsummary = \"The {key} session of {did}.\"\n\
             handler = {{ type = \"command\", argv = [\"sh\", {:?}], timeout_ms = 10000 }}\n",
            script.display().to_string()
        ));
    }
    dir.write(&format!("{name}.toml"), &text)
}

/// A §17 request to `base` as `sender`: status and JSON body.
async fn call(rb: reqwest::RequestBuilder, sender: &str) -> (StatusCode, Value) {
    let resp = rb.header("A2A-Version", "0.3").header("A2A-Sender-ID", sender).send().await.expect("request");
    let status = resp.status();
    (status, resp.json::<Value>().await.unwrap_or(Value::Null))
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client")
}

async fn post(base: &str, path: &str, sender: &str, body: Value) -> (StatusCode, Value) {
    let h = http();
    call(h.post(format!("{base}{path}")).json(&body), sender).await
}

async fn get(base: &str, path: &str, sender: &str) -> (StatusCode, Value) {
    let h = http();
    call(h.get(format!("{base}{path}")), sender).await
}

fn seg(run_id: &Value) -> String {
    a2a_core::execution_id::ExecutionId::parse(run_id.as_str().expect("run_id")).expect("id").to_path_segment()
}

/// The run, once done, read on `base`.
async fn done(base: &str, sender: &str, run_id: &Value) -> Value {
    let (s, run) = get(base, &format!("/a2a/runs/{}?wait_ms=20000&until=done", seg(run_id)), sender).await;
    assert_eq!((s, run["state"].as_str()), (StatusCode::OK, Some("done")), "{run}");
    run
}

async fn open_events(base: &str, sender: &str, query: &str, last: &str) -> reqwest::Response {
    let resp = http()
        .get(format!("{base}/a2a/events{query}"))
        .header("A2A-Version", "0.3")
        .header("A2A-Sender-ID", sender)
        .header("Last-Event-ID", last)
        .send()
        .await
        .expect("events");
    assert_eq!(resp.status(), StatusCode::OK);
    resp
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_two_agents_on_two_processes_talk_across_them() {
    let redis = RedisServer::start();
    let dir = TempDir::new("sessions-xy");
    let prefix = unique_prefix("sessions-xy");
    // X admits Y's desk and its own `a`, not `guarded`; Y admits every X session and its own `b`, not `private`.
    let x_cfg = agent_config(
        &dir,
        &redis.url(),
        &prefix,
        &AgentSpec {
            name: "x",
            did: X,
            allow: &["did:web:caller.example.com#*", "did:web:x.example.com#a", "did:web:y.example.com#b"],
            sessions: &[("a", A_SH), ("guarded", A_SH)],
            extra: "",
        },
    );
    let y_cfg = agent_config(
        &dir,
        &redis.url(),
        &prefix,
        &AgentSpec {
            name: "y",
            did: Y,
            allow: &["did:web:caller.example.com#*", "did:web:x.example.com#*", "did:web:y.example.com#b"],
            sessions: &[("b", B_SH), ("private", B_SH)],
            extra: "",
        },
    );
    let (p1, p2) = (Server::start(&x_cfg), Server::start(&y_cfg));
    let (x, y) = (p1.base.as_str(), p2.base.as_str());

    // The shared registry: Y's process lists X's session with X's endpoint (where Y sends the ping-pong turns).
    let (_, list) = get(y, &format!("/a2a/sessions?agent={X}&include_self=true"), CALLER).await;
    let a = list["sessions"].as_array().expect("sessions").iter().find(|s| s["session_key"] == "a").cloned();
    assert_eq!(a.as_ref().and_then(|s| s["endpoint"].as_str()), Some(format!("{x}/a2a").as_str()), "{list}");

    // Collaboration (reply x announce): round one at Y, turn 1 sent by Y to X's process, whose `a` answers
    // NO_REPLY and ends the exchange (PP-4 a); Y announces.
    let (s, sent) =
        post(y, "/a2a/sessions/send", X, json!({"target": "b", "from": "a", "text": "Bonus?", "wait_ms": 10000})).await;
    assert_eq!(
        (s, sent["status"].as_str(), sent["reply"].as_str()),
        (StatusCode::OK, Some("ok"), Some("The bonus is 5000.")),
        "{sent}"
    );
    let run = done(y, X, &sent["run_id"]).await;
    assert_eq!(run["ended_by"], "skip_token", "{run}");
    assert_eq!(run["turns"].as_array().map(Vec::len), Some(1), "{run}");
    assert_eq!(
        (run["turns"][0]["session"].as_str(), run["turns"][0]["text"].as_str()),
        (Some("did:web:x.example.com#a"), Some("NO_REPLY")),
        "{run}"
    );
    assert_eq!(run["announce"]["status"], "published", "{run}");
    assert_eq!(run["announce"]["text"], "Told the boss: the bonus is 5000.");
    let collaboration = run["run_id"].clone();
    // The turn is in `a`'s transcript on X's process, with its provenance (PP-6, POL-3).
    let (_, h) = get(x, "/a2a/sessions/a/history", CALLER).await;
    let turn = h["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["provenance"]["source_tool"] == "ping_pong")
        .cloned();
    let turn = turn.unwrap_or_else(|| panic!("no ping-pong turn in a's history: {h}"));
    assert_eq!(
        (turn["role"].as_str(), turn["text"].as_str()),
        (Some("inter_session"), Some("The bonus is 5000.")),
        "{h}"
    );
    assert_eq!(turn["provenance"]["source_session"], "did:web:y.example.com#b", "{h}");

    // Task dispatch: accepted at once, no ping-pong, announced.
    let (s, sent) = post(
        y,
        "/a2a/sessions/send",
        X,
        json!({"target": "b", "from": "a", "text": "File it.", "reply": false, "wait_ms": 10000}),
    )
    .await;
    assert_eq!((s, sent["status"].as_str()), (StatusCode::ACCEPTED, Some("accepted")), "{sent}");
    let run = done(y, X, &sent["run_id"]).await;
    assert_eq!(
        (run["ended_by"].as_str(), run["announce"]["status"].as_str(), run["turns"].clone()),
        (Some("reply_not_wanted"), Some("published"), json!([])),
        "{run}"
    );
    let dispatch = run["run_id"].clone();
    // Silent verification: the turn across processes, nothing published.
    let (_, sent) = post(
        y,
        "/a2a/sessions/send",
        X,
        json!({"target": "b", "from": "a", "text": "Check?", "announce": false, "wait_ms": 10000}),
    )
    .await;
    assert_eq!(sent["status"], "ok", "{sent}");
    let run = done(y, X, &sent["run_id"]).await;
    assert_eq!(
        (run["ended_by"].as_str(), run["turns"][0]["text"].as_str(), run["announce"]["status"].as_str()),
        (Some("skip_token"), Some("NO_REPLY"), Some("not_requested")),
        "{run}"
    );
    // Telemetry: accepted, processed, nothing else.
    let (s, sent) = post(
        y,
        "/a2a/sessions/send",
        X,
        json!({"target": "b", "from": "a", "text": "FYI", "reply": false, "announce": false}),
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{sent}");
    let run = done(y, X, &sent["run_id"]).await;
    assert_eq!(
        (run["status"].as_str(), run["reply"].as_str(), run["announce"]["status"].as_str(), run["turns"].clone()),
        (Some("ok"), Some("The bonus is 5000."), Some("not_requested"), json!([])),
        "{run}"
    );
    // Seed 000: NO_REPLY in round one is `no_reply`; no turn goes to X, nothing is announced (PP-5).
    let (_, sent) =
        post(y, "/a2a/sessions/send", X, json!({"target": "b", "from": "a", "text": "quiet-please", "wait_ms": 10000}))
            .await;
    assert_eq!((sent["status"].as_str(), sent["reply"].as_str()), (Some("no_reply"), Some("NO_REPLY")), "{sent}");
    let run = done(y, X, &sent["run_id"]).await;
    assert_eq!((run["turns"].clone(), run["announce"]["status"].as_str()), (json!([]), Some("skipped")), "{run}");

    // Y's channel holds both announces and every run, in order.
    let mut stream = open_events(y, CALLER, "?session=b", "0").await;
    let (got, _) = events(&mut stream, 7).await;
    let kinds: Vec<&str> = got.iter().map(|e| e.1.as_str()).collect();
    assert_eq!(kinds, vec!["announce", "run", "announce", "run", "run", "run", "run"], "{got:?}");
    assert_eq!((got[0].2["run_id"].clone(), got[2].2["run_id"].clone()), (collaboration, dispatch));
    drop(stream);

    // A wait cycle across the processes: X#a waits on Y#b (a slow answer, through process two); Y#b's waiting
    // send to X#a through process one is refused at once from the shared wait edges (POL-6), before any delivery.
    let waiting = tokio::spawn({
        let y = y.to_owned();
        async move {
            post(
                &y,
                "/a2a/sessions/send",
                X,
                json!({"target": "b", "from": "a", "text": "slow-please", "wait_ms": 15000}),
            )
            .await
        }
    });
    // The wait edge X#a -> Y#b is in the shared store while the slow answer is being made.
    let key = format!("{{{prefix}:sessions}}:edges");
    let until = Instant::now() + Duration::from_secs(10);
    while redis.cli(&["HLEN", &key]).and_then(|n| n.trim().parse::<u64>().ok()).unwrap_or(0) == 0 {
        assert!(Instant::now() < until, "the waiting send recorded no wait edge");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let started = Instant::now();
    let (s, refused) =
        post(x, "/a2a/sessions/send", Y, json!({"target": "a", "from": "b", "text": "And you?", "wait_ms": 10000}))
            .await;
    assert_eq!((s, refused["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("wait_cycle")), "{refused}");
    // The send would wait 10 s: well under that is "at once", with room for a loaded CI machine.
    assert!(started.elapsed() < Duration::from_secs(5), "refused at once, not timed out");
    let cycle: Vec<&str> =
        refused["error"]["details"]["cycle"].as_array().expect("cycle").iter().filter_map(Value::as_str).collect();
    assert!(cycle.contains(&"did:web:x.example.com#a") && cycle.contains(&"did:web:y.example.com#b"), "{refused}");
    // The same send without waiting is delivered (only waits make cycles).
    let (s, _) = post(x, "/a2a/sessions/send", Y, json!({"target": "a", "from": "b", "text": "And you?"})).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    let (s, first) = waiting.await.expect("the waiting send");
    assert_eq!((s, first["reply"].as_str()), (StatusCode::OK, Some("A slow answer.")), "{first}");
    // With the wait over, the edge is gone: the same waiting send now goes through.
    let (_, after) =
        post(x, "/a2a/sessions/send", Y, json!({"target": "a", "from": "b", "text": "Now?", "wait_ms": 10000})).await;
    assert_eq!((after["status"].as_str(), after["reply"].as_str()), (Some("ok"), Some("a heard you")), "{after}");

    // Policy denials (POL-1) at Y: a target not on Y's allow list, a requester not on it.
    let (s, denied) = post(y, "/a2a/sessions/send", X, json!({"target": "private", "from": "a", "text": "Psst"})).await;
    assert_eq!(
        (s, denied["error"]["code"].as_str(), denied["error"]["details"]["side"].as_str()),
        (StatusCode::FORBIDDEN, Some("forbidden"), Some("target")),
        "{denied}"
    );
    let (s, denied) =
        post(y, "/a2a/sessions/send", "did:web:z.example.org", json!({"target": "b", "from": "m", "text": "Hi"})).await;
    assert_eq!(
        (s, denied["error"]["details"]["side"].as_str()),
        (StatusCode::FORBIDDEN, Some("requester")),
        "{denied}"
    );
    // ... and at X, on a turn: Y admits X#guarded, X does not admit Y#b to it, so round one stands and the
    // exchange ends with the refused turn.
    let (_, sent) =
        post(y, "/a2a/sessions/send", X, json!({"target": "b", "from": "guarded", "text": "Bonus?", "wait_ms": 10000}))
            .await;
    assert_eq!(sent["status"], "ok", "{sent}");
    let run = done(y, X, &sent["run_id"]).await;
    assert_eq!(
        (run["status"].as_str(), run["ended_by"].as_str(), run["turns"].clone()),
        (Some("ok"), Some("error"), json!([])),
        "{run}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_one_agent_on_two_processes_shares_runs_inboxes_spawn_limits_and_streams() {
    let redis = RedisServer::start();
    let dir = TempDir::new("sessions-mp");
    let desk = "cat >/dev/null; sleep 1; echo 'The bonus is 5000.'";
    let cfg = agent_config(
        &dir,
        &redis.url(),
        &unique_prefix("sessions-mp"),
        &AgentSpec {
            name: "agent",
            did: DID,
            allow: &["did:web:caller.example.com#*", "did:web:localhost*#*"],
            sessions: &[("desk", desk), ("desk2", desk)],
            extra: "[sessions.limits]\nmax_children = 2\nmax_spawn_depth = 1\nmax_spawn_concurrency = 3\n\n[[sessions.spawn_template]]\n\
                    name = \"slow\"\nhandler = { type = \"command\", argv = [\"sh\", \"-c\", \"cat >/dev/null; sleep 6; echo done\"] }\n",
        },
    );
    let (mut p1, p2) = (Server::start(&cfg), Server::start(&cfg));
    let (b1, b2) = (p1.base.clone(), p2.base.clone());

    // The features of both list sessions, with the one auth requirement (SES-2).
    let (_, caps) = get(&b2, "/a2a/capabilities", CALLER).await;
    assert!(caps["features"].as_array().expect("features").iter().any(|f| f == "sessions"), "{caps}");
    assert_eq!(caps["sessions"], json!({"auth_requirement": "none"}), "{caps}");

    // A run started on p1 without waiting is awaited on p2 and ends ok there: the reply written by p1 wakes p2.
    let (s, sent) =
        post(&b1, "/a2a/sessions/send", CALLER, json!({"target": "desk", "text": "Bonus?", "announce": false})).await;
    assert_eq!((s, sent["status"].as_str()), (StatusCode::ACCEPTED, Some("accepted")), "{sent}");
    let started = Instant::now();
    let (s, run) = get(&b2, &format!("/a2a/runs/{}?wait_ms=15000", seg(&sent["run_id"])), CALLER).await;
    assert_eq!(
        (s, run["status"].as_str(), run["reply"].as_str()),
        (StatusCode::OK, Some("ok"), Some("The bonus is 5000.")),
        "{run}"
    );
    assert!(started.elapsed() < Duration::from_secs(10), "woken, not timed out: {:?}", started.elapsed());
    let (_, h) = get(&b2, "/a2a/sessions/desk/history", CALLER).await;
    assert_eq!(h["messages"].as_array().map(Vec::len), Some(2), "{h}");

    // An inbox session registered through p2 is listed by p1; a send through p1 waits while its owner reads the
    // inbox and answers through p2.
    let owner = "did:web:plugin.example.com";
    let (s, reg) = post(
        &b2,
        "/a2a/sessions",
        owner,
        json!({"session_key": "phone", "summary": "the boss's phone, polling", "label": "phone"}),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{reg}");
    let (_, list) = get(&b1, "/a2a/sessions?search=phone", CALLER).await;
    assert_eq!(list["total"], 1, "{list}");
    let answer_next = |text: &'static str, delay: Duration| {
        let b2 = b2.clone();
        tokio::spawn(async move {
            let (_, inbox) = get(&b2, "/a2a/sessions/phone/inbox?wait_ms=15000", owner).await;
            let id = inbox["deliveries"][0]["run_id"].clone();
            assert!(id.is_string(), "a delivery: {inbox}");
            tokio::time::sleep(delay).await;
            let (s, _) = post(&b2, &format!("/a2a/runs/{}/reply", seg(&id)), owner, json!({"reply": text})).await;
            assert_eq!(s, StatusCode::OK);
        })
    };
    let answering = answer_next("Seen it.", Duration::ZERO);
    let (_, asked) = post(
        &b1,
        "/a2a/sessions/send",
        CALLER,
        json!({"target": "phone", "text": "Did you see the bonus?", "wait_ms": 15000, "announce": false}),
    )
    .await;
    assert_eq!((asked["status"].as_str(), asked["reply"].as_str()), (Some("ok"), Some("Seen it.")), "{asked}");
    answering.await.expect("answered");

    // The waiter on p1 stops waiting before the owner answers on p2: `accepted`, never `timeout` (SND-8); the
    // late reply is kept and read on p1 (SND-6).
    let answering = answer_next("Late, but here.", Duration::from_millis(1500));
    let (s, asked) = post(
        &b1,
        "/a2a/sessions/send",
        CALLER,
        json!({"target": "phone", "text": "Still there?", "wait_ms": 500, "announce": false}),
    )
    .await;
    assert_eq!((s, asked["status"].as_str()), (StatusCode::ACCEPTED, Some("accepted")), "{asked}");
    answering.await.expect("answered late");
    let (_, late) = get(&b1, &format!("/a2a/runs/{}?wait_ms=10000", seg(&asked["run_id"])), CALLER).await;
    assert_eq!((late["status"].as_str(), late["reply"].as_str()), (Some("ok"), Some("Late, but here.")), "{late}");

    // Spawn limits count across the processes (SPN-2): two live workers of `desk` through p1, the third through
    // p2 is refused; a worker of a worker is past the depth limit on either.
    let mut children = Vec::new();
    for i in 0..2 {
        let (s, sp) = post(
            &b1,
            "/a2a/sessions/spawn",
            DID,
            json!({"parent": "desk", "task": format!("task {i}"), "template": "slow"}),
        )
        .await;
        assert_eq!((s, sp["status"].as_str()), (StatusCode::ACCEPTED, Some("accepted")), "{sp}");
        children.push(sp["child_session_key"].as_str().expect("child").to_owned());
    }
    let (s, refused) =
        post(&b2, "/a2a/sessions/spawn", DID, json!({"parent": "desk", "task": "one more", "template": "slow"})).await;
    assert_eq!(
        (s, refused["error"]["code"].as_str(), refused["error"]["details"]["limit"].as_str()),
        (StatusCode::TOO_MANY_REQUESTS, Some("spawn_limit"), Some("children")),
        "{refused}"
    );
    let (s, refused) =
        post(&b2, "/a2a/sessions/spawn", DID, json!({"parent": children[0], "task": "deeper", "template": "slow"}))
            .await;
    assert_eq!(
        (s, refused["error"]["details"]["limit"].as_str()),
        (StatusCode::TOO_MANY_REQUESTS, Some("depth")),
        "{refused}"
    );
    // Workers in progress at the agent count on every process: the third runs (through p2), a fourth is refused on
    // p2 although p2 itself runs only one.
    let (s, third) =
        post(&b2, "/a2a/sessions/spawn", DID, json!({"parent": "desk2", "task": "three", "template": "slow"})).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{third}");
    let (s, refused) =
        post(&b2, "/a2a/sessions/spawn", DID, json!({"parent": "desk2", "task": "four", "template": "slow"})).await;
    assert_eq!(
        (s, refused["error"]["details"]["limit"].as_str(), refused["error"]["details"]["max"].as_u64()),
        (StatusCode::TOO_MANY_REQUESTS, Some("concurrency"), Some(3)),
        "{refused}"
    );
    // Someone else's session cannot be a parent (SPN-5).
    let (s, refused) =
        post(&b2, "/a2a/sessions/spawn", CALLER, json!({"parent": "desk", "task": "mine now", "template": "slow"}))
            .await;
    assert_eq!((s, refused["error"]["code"].as_str()), (StatusCode::NOT_FOUND, Some("unknown_session")), "{refused}");

    // An open event stream on p1 ends when p1 gets its shutdown signal (ANN-4): the events so far, then a last
    // `shutdown` event, then the end — long before the 30 s grace period. The process exits.
    let mut stream = open_events(&b1, CALLER, "?session=desk", "0").await;
    let (before, _) = events(&mut stream, 1).await;
    assert_eq!(before.first().map(|e| e.1.as_str()), Some("run"), "{before:?}");
    let stopping = Instant::now();
    p1.terminate();
    let (rest, ended) = events(&mut stream, 100).await;
    assert!(ended, "the stream ended: {rest:?}");
    assert_eq!(rest.last().map(|e| (e.0.as_str(), e.1.as_str())), Some(("", "shutdown")), "{rest:?}");
    assert!(
        stopping.elapsed() < Duration::from_secs(5),
        "ended at once, not after the grace: {:?}",
        stopping.elapsed()
    );
    let last_id = before.iter().chain(&rest).rev().find(|e| !e.0.is_empty()).map(|e| e.0.clone()).expect("an id");
    assert!(p1.wait_exit(Duration::from_secs(10)).is_some(), "the process exited");
    // The client resumes on p2 with its Last-Event-ID and misses nothing published since.
    let (_, sent) = post(
        &b2,
        "/a2a/sessions/send",
        CALLER,
        json!({"target": "desk", "text": "After the restart?", "wait_ms": 10000, "announce": false}),
    )
    .await;
    assert_eq!(sent["status"], "ok", "{sent}");
    done(&b2, CALLER, &sent["run_id"]).await;
    let mut resumed = open_events(&b2, CALLER, "?session=desk", &last_id).await;
    let (next, _) = events(&mut resumed, 1).await;
    assert_eq!(
        next.first().map(|e| (e.1.as_str(), e.2["run_id"].clone())),
        Some(("run", sent["run_id"].clone())),
        "{next:?}"
    );
    assert!(next[0].0.parse::<u64>().expect("id") > last_id.parse::<u64>().expect("id"));
}

/// X's `c`: its reply step goes by what Y said (empty, a repeat, too slow, or a fresh line each turn).
const C_SH: &str = r#"d=$(cat)
case "$A2A_STEP" in
  reply)
    case "$d" in
      *say-nothing*) echo "" ;;
      *Echo-me*) echo "Echo-me, please." ;;
      *dawdle*) sleep 5; echo "too late" ;;
      *) echo "x says $A2A_TURN" ;;
    esac ;;
  *) echo "c heard you" ;;
esac
"#;

/// Y's `chatty`: a fresh line on each of its turns; its round one goes by the message.
const CHATTY_SH: &str = r#"d=$(cat)
case "$A2A_STEP" in
  announce) echo ANNOUNCE_SKIP ;;
  reply) echo "y says $A2A_TURN" ;;
  *)
    case "$d" in
      *say-nothing*) echo "Over to you: say-nothing." ;;
      *echo-me*) echo "Echo-me, please." ;;
      *dawdle*) echo "Over to you: dawdle." ;;
      *fail-please*) echo "the ledger is broken" >&2; exit 3 ;;
      *slow-please*) sleep 3; echo "A slow answer." ;;
      *) echo "Over to you: chat." ;;
    esac ;;
esac
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_every_termination_rule_and_wait_outcome_across_two_processes() {
    let redis = RedisServer::start();
    let dir = TempDir::new("sessions-rules");
    let prefix = unique_prefix("sessions-rules");
    let allow = ["did:web:caller.example.com#*", "did:web:x.example.com#*", "did:web:y.example.com#*"];
    let x_cfg = agent_config(
        &dir,
        &redis.url(),
        &prefix,
        &AgentSpec { name: "x", did: X, allow: &allow, sessions: &[("c", C_SH)], extra: "" },
    );
    let y_cfg = agent_config(
        &dir,
        &redis.url(),
        &prefix,
        &AgentSpec { name: "y", did: Y, allow: &allow, sessions: &[("chatty", CHATTY_SH)], extra: "" },
    );
    let (p1, p2) = (Server::start(&x_cfg), Server::start(&y_cfg));
    let (x, y) = (p1.base.as_str(), p2.base.as_str());
    // Each exchange: X#c asks Y#chatty through process two; Y drives the turns to X's process one.
    let exchange = |text: &'static str, extra: Value| {
        let y = y.to_owned();
        async move {
            let mut body = json!({"target": "chatty", "from": "c", "text": text, "wait_ms": 10000});
            body.as_object_mut().expect("object").extend(extra.as_object().cloned().unwrap_or_default());
            let (s, sent) = post(&y, "/a2a/sessions/send", X, body).await;
            assert_eq!(s, StatusCode::OK, "{sent}");
            (sent.clone(), done(&y, X, &sent["run_id"]).await)
        }
    };
    let texts = |run: &Value| -> Vec<String> {
        run["turns"].as_array().expect("turns").iter().map(|t| t["text"].as_str().unwrap_or("").to_owned()).collect()
    };

    // (d) max_turns: four fresh turns, alternating X's process and Y's.
    let (sent, run) = exchange("chat", json!({"max_turns": 4})).await;
    assert_eq!(sent["status"], "ok");
    assert_eq!(run["ended_by"], "max_turns", "{run}");
    assert_eq!(texts(&run), vec!["x says 1/4", "y says 2/4", "x says 3/4", "y says 4/4"], "{run}");
    let sides: Vec<&str> =
        run["turns"].as_array().expect("turns").iter().filter_map(|t| t["session"].as_str()).collect();
    assert_eq!(sides, ["did:web:x.example.com#c", "did:web:y.example.com#chatty"].repeat(2));
    // (b) an empty reply from X ends it.
    let (_, run) = exchange("say-nothing", json!({})).await;
    assert_eq!((run["ended_by"].as_str(), texts(&run)), (Some("empty_reply"), vec![String::new()]), "{run}");
    // (c) a repeat of the message X was just given ends it.
    let (_, run) = exchange("echo-me", json!({})).await;
    assert_eq!((run["ended_by"].as_str(), texts(&run)), (Some("repeat"), vec!["Echo-me, please.".to_owned()]), "{run}");
    // (e) a turn X does not answer within the run's time ends it with `timeout`; round one stands.
    let started = Instant::now();
    let (sent, run) = exchange("dawdle", json!({"run_timeout_ms": 1500})).await;
    assert_eq!((sent["status"].as_str(), run["status"].as_str()), (Some("ok"), Some("ok")), "{run}");
    assert_eq!((run["ended_by"].as_str(), texts(&run).len()), (Some("timeout"), 0), "{run}");
    // Bounded by the run's 1.5 s, not by the send's 10 s wait.
    assert!(started.elapsed() < Duration::from_secs(8), "the turn's wait was bounded: {:?}", started.elapsed());
    // PP-1: a requester session no process serves (not in the registry, no from_endpoint) is not reachable.
    let (s, sent) = post(
        y,
        "/a2a/sessions/send",
        X,
        json!({"target": "chatty", "from": "ghost", "text": "chat", "wait_ms": 10000}),
    )
    .await;
    assert_eq!((s, sent["status"].as_str()), (StatusCode::OK, Some("ok")), "{sent}");
    let run = done(y, X, &sent["run_id"]).await;
    assert_eq!((run["ended_by"].as_str(), texts(&run).len()), (Some("not_reachable"), 0), "{run}");

    // Wait outcomes of round one: `timeout` when the run's time passes (200, not a transport error), `error`
    // with the end of stderr when the handler fails, `accepted` when the wait ends first.
    let (s, sent) = post(
        y,
        "/a2a/sessions/send",
        X,
        json!({"target": "chatty", "from": "c", "text": "slow-please", "wait_ms": 8000, "run_timeout_ms": 1000}),
    )
    .await;
    assert_eq!((s, sent["status"].as_str()), (StatusCode::OK, Some("timeout")), "{sent}");
    let (s, sent) = post(
        y,
        "/a2a/sessions/send",
        X,
        json!({"target": "chatty", "from": "c", "text": "fail-please", "wait_ms": 8000}),
    )
    .await;
    assert_eq!((s, sent["status"].as_str()), (StatusCode::OK, Some("error")), "{sent}");
    assert!(sent["error"]["message"].as_str().unwrap_or("").contains("the ledger is broken"), "{sent}");
    let (s, sent) = post(
        y,
        "/a2a/sessions/send",
        X,
        json!({"target": "chatty", "from": "c", "text": "slow-please", "wait_ms": 300}),
    )
    .await;
    assert_eq!((s, sent["status"].as_str()), (StatusCode::ACCEPTED, Some("accepted")), "{sent}");
    // The late reply is kept (SND-6) and read by the requester on the other process, from the shared store.
    let (_, late) = get(x, &format!("/a2a/runs/{}?wait_ms=10000", seg(&sent["run_id"])), X).await;
    assert_eq!((late["status"].as_str(), late["reply"].as_str()), (Some("ok"), Some("A slow answer.")), "{late}");
    let (s, other) = get(x, &format!("/a2a/runs/{}", seg(&sent["run_id"])), CALLER).await;
    assert_eq!(
        (s, other["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("unknown_run")),
        "only its requester or target reads a run: {other}"
    );
    let run = done(y, X, &sent["run_id"]).await;
    assert_eq!((run["status"].as_str(), run["reply"].as_str()), (Some("ok"), Some("A slow answer.")), "{run}");

    // History bounds on transcripts written by both processes: X#c's (turns from Y) read on X's process, Y's with
    // a secret redacted.
    let (_, h) = get(x, "/a2a/sessions/c/history?limit=3", CALLER).await;
    assert_eq!((h["messages"].as_array().map(Vec::len), h["truncated"].as_bool()), (Some(3), Some(true)), "{h}");
    let (_, h) = get(x, "/a2a/sessions/c/history?max_bytes=1024", CALLER).await;
    assert_eq!(h["bytes_capped"], true, "{h}");
    assert!(serde_json::to_vec(&h["messages"]).expect("json").len() <= 1024, "{h}");
    let (_, sent) = post(y, "/a2a/sessions/send", X, json!({"target": "chatty", "from": "c", "text": "chat: the password=hunter2 is old", "wait_ms": 10000, "max_turns": 0, "announce": false})).await;
    assert_eq!(sent["status"], "ok", "{sent}");
    done(y, X, &sent["run_id"]).await;
    let (_, h) = get(y, "/a2a/sessions/chatty/history?limit=2", CALLER).await;
    let texts: Vec<&str> =
        h["messages"].as_array().expect("messages").iter().filter_map(|m| m["text"].as_str()).collect();
    assert_eq!(texts, vec!["chat: the password=[REDACTED] is old", "Over to you: chat."], "{h}");
    assert_eq!(h["redacted"], 1, "{h}");
}
