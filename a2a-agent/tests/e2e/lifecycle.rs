//! The execution state machine (`spec/PROTOCOL.md` §8): CONFIRM exactly once, long-poll, deadlines, cancel,
//! confirm windows, failures and panics.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;

use crate::common::{TestAgent, decl, report_schema, standard, test_limits};

fn slow_schema() -> serde_json::Value {
    json!({"type": "object", "properties": {"ms": {"type": "number"}}, "required": ["ms"]})
}

#[tokio::test]
async fn work_does_not_start_before_confirm() {
    let runs = Arc::new(AtomicUsize::new(0));
    let t = TestAgent::start(standard(runs.clone())).await;
    let neg = t.negotiated("run_slow_task", slow_schema()).await;
    let exe = t.executed(&neg, json!({"ms": 1})).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let r = t.result(&exe, 0).await;
    assert_eq!(r.body["status"], json!("received"));
    assert!(r.body.get("result").is_none() && r.body.get("error").is_none());
}

#[tokio::test]
async fn twenty_concurrent_confirms_start_the_work_once() {
    let runs = Arc::new(AtomicUsize::new(0));
    let t = Arc::new(TestAgent::start(standard(runs.clone())).await);
    let neg = t.negotiated("run_slow_task", slow_schema()).await;
    let exe = t.executed(&neg, json!({"ms": 50})).await;
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let t = t.clone();
        let exe = exe.clone();
        tasks.push(tokio::spawn(async move { t.confirm(&exe).await }));
    }
    let mut accepted = 0;
    for task in tasks {
        let a = task.await.expect("task");
        match a.status {
            StatusCode::ACCEPTED => accepted += 1,
            StatusCode::OK => assert_eq!(a.body["already_confirmed"], json!(true), "{}", a.body),
            other => panic!("unexpected {other}: {}", a.body),
        }
    }
    assert_eq!(accepted, 1);
    let r = t.result(&exe, 10_000).await;
    assert_eq!(r.body["status"], json!("succeeded"));
    // Confirming again after the end still starts nothing.
    let again = t.confirm(&exe).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.body["status"], json!("succeeded"));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn confirm_answers_before_the_work_finishes() {
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0)))).await;
    let neg = t.negotiated("run_slow_task", slow_schema()).await;
    // The work takes 30 s: a CONFIRM that waited for it would answer after it, and the execution would be done.
    let exe = t.executed(&neg, json!({"ms": 30_000})).await;
    let started = Instant::now();
    let c = t.confirm(&exe).await;
    assert_eq!(c.status, StatusCode::ACCEPTED);
    assert!(started.elapsed() < Duration::from_secs(10), "CONFIRM waited for the work: {:?}", started.elapsed());
    let r = t.result(&exe, 0).await;
    assert!(matches!(r.body["status"].as_str(), Some("accepted" | "running")), "{}", r.body);
    t.post("/a2a/cancel", json!({"execution_id": exe})).await;
}

#[tokio::test]
async fn long_poll_returns_as_soon_as_the_execution_ends() {
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0)))).await;
    let neg = t.negotiated("run_slow_task", slow_schema()).await;
    let exe = t.executed(&neg, json!({"ms": 300})).await;
    t.confirm(&exe).await;
    let started = Instant::now();
    let r = t.result(&exe, 30_000).await;
    assert_eq!(r.body["status"], json!("succeeded"), "{}", r.body);
    // Woken by the end of the 300 ms of work, not at the 30 s asked for (10 s: ample on a loaded machine).
    assert!(started.elapsed() < Duration::from_secs(10), "long-poll slept past the end: {:?}", started.elapsed());
}

#[tokio::test]
async fn long_poll_gives_up_after_wait_ms_with_the_current_state() {
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0)))).await;
    let neg = t.negotiated("run_slow_task", slow_schema()).await;
    // The work outlasts the test: the answer after wait_ms must be the current state, `running`.
    let exe = t.executed(&neg, json!({"ms": 30_000})).await;
    t.confirm(&exe).await;
    let started = Instant::now();
    let r = t.result(&exe, 500).await;
    let took = started.elapsed();
    assert_eq!(r.body["status"], json!("running"), "{}", r.body);
    // At least the 500 ms (less the agent's millisecond clock), and an answer within ten times that.
    assert!(took >= Duration::from_millis(490) && took < Duration::from_secs(5), "{took:?}");
    t.post("/a2a/cancel", json!({"execution_id": exe})).await;
}

#[tokio::test]
async fn execution_past_its_timeout_is_timed_out_and_the_handler_is_stopped() {
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0)))).await;
    let a = t
        .post(
            "/a2a/negotiate",
            json!({"target_capability": "run_slow_task", "proposed_schema": slow_schema(), "timeout_ms": 200}),
        )
        .await;
    let neg = a.body["negotiation_id"].as_str().expect("id").to_owned();
    let exe = t.executed(&neg, json!({"ms": 10_000})).await;
    t.confirm(&exe).await;
    // The long-poll returns when the 200 ms timeout ends the execution; 20 s only bounds a loaded machine's wait.
    let r = t.result(&exe, 20_000).await;
    assert_eq!(r.body["status"], json!("timed_out"), "{}", r.body);
    assert_eq!(r.body["error"]["code"], json!("timed_out"));
    assert!(r.body.get("result").is_none());
}

#[tokio::test]
async fn cancel_stops_a_running_execution_and_a_second_cancel_is_invalid_state() {
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0)))).await;
    let neg = t.negotiated("run_slow_task", slow_schema()).await;
    let exe = t.executed(&neg, json!({"ms": 10_000})).await;
    t.confirm(&exe).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let c = t.post("/a2a/cancel", json!({"execution_id": exe})).await;
    assert_eq!(c.status, StatusCode::OK, "{}", c.body);
    assert_eq!(c.body["status"], json!("canceled"));
    assert_eq!(c.body["error"]["code"], json!("canceled"));
    let again = t.post("/a2a/cancel", json!({"execution_id": exe})).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert_eq!(again.code(), "invalid_state");
    // The handler's late end does not overwrite the first terminal state.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(t.result(&exe, 0).await.body["status"], json!("canceled"));
}

#[tokio::test]
async fn unconfirmed_execution_expires_and_cannot_be_confirmed() {
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0))).limits({
        let mut l = test_limits();
        l.confirm_window_ms = 300;
        l
    }))
    .await;
    let neg = t.negotiated("submit_report", report_schema()).await;
    let exe = t.executed(&neg, json!({"title": "t", "timestamp": "2026-11-29T21:00:00Z"})).await;
    // A long-poll on a received execution wakes up when its confirm window elapses.
    let r = t.result(&exe, 20_000).await;
    assert_eq!(r.body["status"], json!("canceled"), "{}", r.body);
    assert_eq!(r.body["error"]["code"], json!("confirm_window_elapsed"));
    let c = t.confirm(&exe).await;
    assert_eq!(c.status, StatusCode::CONFLICT);
    assert_eq!(c.code(), "invalid_state");
    assert_eq!(c.body["error"]["details"]["status"], json!("canceled"));
}

#[tokio::test]
async fn handler_failure_and_panic_become_failed_executions_with_handler_failed() {
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0)))).await;
    let failed = t.run("fail_on_purpose", json!({"type": "object"}), json!({})).await;
    assert_eq!(failed["status"], json!("failed"));
    assert_eq!(failed["error"]["code"], json!("handler_failed"));
    assert_eq!(failed["error"]["message"], json!("it failed on purpose"));
    assert_eq!(failed["error"]["details"], json!({"why": "test"}));
    let crashed = t.run("crash_on_purpose", json!({"type": "object"}), json!({})).await;
    assert_eq!(crashed["status"], json!("failed"));
    assert_eq!(crashed["error"]["code"], json!("handler_failed"));
    // The agent keeps serving after a handler panicked.
    let ok = t.run("submit_report", report_schema(), json!({"title": "t", "timestamp": "2026-11-29T21:00:00Z"})).await;
    assert_eq!(ok["status"], json!("succeeded"));
}

#[tokio::test]
async fn result_that_breaks_the_output_schema_is_output_invalid() {
    let mut d = decl("add_numbers", json!({"type": "object"}));
    d.output_schema = Some(json!({"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}));
    let t =
        TestAgent::start(a2a_server::AgentBuilder::new("did:web:agent.example.com").capability(
            d,
            |_c: a2a_server::handler::ExecutionContext, _p: serde_json::Value| async move {
                Ok(json!({"sum": "not a number"}))
            },
        ))
        .await;
    let r = t.run("add_numbers", json!({"type": "object"}), json!({})).await;
    assert_eq!(r["status"], json!("failed"));
    assert_eq!(r["error"]["code"], json!("output_invalid"));
}

#[tokio::test]
async fn idempotent_execute_returns_the_same_execution_and_refuses_a_different_payload() {
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0)))).await;
    let neg = t.negotiated("submit_report", report_schema()).await;
    let payload = json!({"title": "t", "timestamp": "2026-11-29T21:00:00Z"});
    let send = |p: serde_json::Value| {
        t.send(
            t.req(reqwest::Method::POST, "/a2a/execute")
                .header("A2A-Negotiation-ID", &neg)
                .header("Idempotency-Key", "k-1")
                .json(&p),
        )
    };
    let first = send(payload.clone()).await;
    assert_eq!(first.status, StatusCode::CREATED);
    // The same value serialised differently is the same request (canonical JSON).
    let reordered = json!({"timestamp": "2026-11-29T21:00:00Z", "title": "t"});
    let second = send(reordered).await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.body);
    assert_eq!(second.body["execution_id"], first.body["execution_id"]);
    let other = send(json!({"title": "other", "timestamp": "2026-11-29T21:00:00Z"})).await;
    assert_eq!(other.status, StatusCode::CONFLICT);
    assert_eq!(other.code(), "idempotency_conflict");
}

#[tokio::test]
async fn another_sender_cannot_see_use_or_drive_my_negotiation_and_execution() {
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0)))).await;
    let neg = t.negotiated("submit_report", report_schema()).await;
    let exe = t.executed(&neg, json!({"title": "t", "timestamp": "2026-11-29T21:00:00Z"})).await;
    let other = "did:web:mallory.example.com";
    let e = t
        .send(
            t.http
                .post(t.url("/a2a/execute"))
                .header("A2A-Version", "0.3")
                .header("A2A-Sender-ID", other)
                .header("A2A-Negotiation-ID", &neg)
                .json(&json!({"title": "t", "timestamp": "2026-11-29T21:00:00Z"})),
        )
        .await;
    assert_eq!(e.code(), "unknown_negotiation");
    for (path, body) in [("/a2a/confirm", json!({"execution_id": exe})), ("/a2a/cancel", json!({"execution_id": exe}))]
    {
        let a = t
            .send(t.http.post(t.url(path)).header("A2A-Version", "0.3").header("A2A-Sender-ID", other).json(&body))
            .await;
        assert_eq!(a.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(a.code(), "unknown_execution", "{path}");
    }
    let seg = a2a_core::execution_id::ExecutionId::parse(&exe).expect("id").to_path_segment();
    let r = t
        .send(
            t.http
                .get(t.url(&format!("/a2a/result/{seg}")))
                .header("A2A-Version", "0.3")
                .header("A2A-Sender-ID", other),
        )
        .await;
    assert_eq!(r.code(), "unknown_execution");
    // Still intact for its owner.
    assert_eq!(t.result(&exe, 0).await.body["status"], json!("received"));
}

#[tokio::test]
async fn over_the_concurrency_limit_confirm_is_503_with_retry_after_and_the_execution_stays_received() {
    let runs = Arc::new(AtomicUsize::new(0));
    let t = TestAgent::start(standard(runs).limits({
        let mut l = test_limits();
        l.max_concurrent_executions = 1;
        // Room for the steps below on a loaded machine: the second must still be confirmable at the end.
        l.confirm_window_ms = 30_000;
        l
    }))
    .await;
    let neg = t.negotiated("run_slow_task", slow_schema()).await;
    // The first outlasts the test (it is canceled below): its slot is taken until then, however slow the machine.
    let first = t.executed(&neg, json!({"ms": 30_000})).await;
    let second = t.executed(&neg, json!({"ms": 1})).await;
    assert_eq!(t.confirm(&first).await.status, StatusCode::ACCEPTED);
    let refused = t.confirm(&second).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.code(), "overloaded");
    assert!(refused.header("retry-after").is_some());
    assert_eq!(t.result(&second, 0).await.body["status"], json!("received"));
    t.post("/a2a/cancel", json!({"execution_id": first})).await;
    // Once capacity frees up, CONFIRM works (while the second is still within its confirm window).
    let mut ok = false;
    while !ok && t.result(&second, 0).await.body["status"] == json!("received") {
        ok = t.confirm(&second).await.status == StatusCode::ACCEPTED;
        if !ok {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert!(ok, "capacity was not released within the confirm window: {}", t.result(&second, 0).await.body);
}

#[tokio::test]
async fn drain_waits_for_executions_in_flight_and_refuses_new_confirms() {
    let t = TestAgent::start(standard(Arc::new(AtomicUsize::new(0)))).await;
    let neg = t.negotiated("run_slow_task", slow_schema()).await;
    let exe = t.executed(&neg, json!({"ms": 300})).await;
    let later = t.executed(&neg, json!({"ms": 1})).await;
    t.confirm(&exe).await;
    let agent = t.agent.clone();
    let drain = agent.drain(Duration::from_secs(30));
    tokio::pin!(drain);
    // Polled once, the drain has begun (it refuses new work from its first step): no sleep to hope for it.
    tokio::select! {
        biased;
        done = &mut drain => panic!("the drain ended before the work in flight did: {done}"),
        () = std::future::ready(()) => {}
    }
    let refused = t.confirm(&later).await;
    assert_eq!(refused.code(), "overloaded");
    assert!(drain.await, "in-flight work did not finish within the grace period");
    assert_eq!(t.result(&exe, 0).await.body["status"], json!("succeeded"));
}

/// An agent on a real Redis (`prefix` shared: the agents behave as processes of one agent), waits capped at
/// `max_wait_ms`.
fn on_redis(prefix: &str, max_wait_ms: u64) -> a2a_server::AgentBuilder {
    use a2a_server::store::RedisStore;
    use a2a_server::store::redis::{AgentScope, RedisConfig};
    let store = RedisStore::connect(
        RedisConfig::new(crate::redis_support::shared_server().url()).with_key_prefix(prefix),
        AgentScope {
            did: "did:web:agent.example.com".into(),
            retention: Duration::from_secs(3600),
            max_received: 1000,
        },
    )
    .expect("connect");
    let mut limits = test_limits();
    limits.max_wait_ms = max_wait_ms;
    standard(Arc::new(AtomicUsize::new(0))).limits(limits).store(store)
}

/// RESULT's long-poll on the Redis store starts from the record this process last wrote, without reading it
/// (`Store::get_execution_for_wait`). When another process changed the execution since, the answer must still be the
/// stored state: with a wait (woken by the other process's terminal signal), and on an agent that caps every wait to
/// zero (no wait happens, so the stale record is read again before answering).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_on_redis_answers_what_another_process_wrote_since_this_one_did() {
    let prefix = crate::redis_support::unique_prefix("stale-wait");
    let waits = TestAgent::start(on_redis(&prefix, 60_000)).await;
    let no_waits = TestAgent::start(on_redis(&prefix, 0)).await;
    let other = TestAgent::start(on_redis(&prefix, 60_000)).await;
    for t in [&waits, &no_waits] {
        let neg = t.negotiated("run_slow_task", slow_schema()).await;
        // Runs here (CONFIRM claims it) until canceled: this process last wrote `accepted` or `running`.
        let exe = t.executed(&neg, json!({"ms": 60_000})).await;
        assert_eq!(t.confirm(&exe).await.status, StatusCode::ACCEPTED);
        let seen = t.result(&exe, 0).await;
        assert!(matches!(seen.body["status"].as_str(), Some("accepted" | "running")), "{}", seen.body);
        let c = other.post("/a2a/cancel", json!({"execution_id": exe})).await;
        assert_eq!(c.status, StatusCode::OK, "{}", c.body);
        let started = Instant::now();
        let r = t.result(&exe, 30_000).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(r.body["status"], json!("canceled"), "{}", r.body);
        // Not the 30 s asked for (nor the 60 s of work): 10 s is ample on a loaded machine.
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the long-poll missed the cancel: {:?}",
            started.elapsed()
        );
    }
}

/// The Redis store answers CONFIRM and a long-poll from the record this process created, without reading it
/// (`Store::get_execution_for_update`, `Store::get_execution_for_wait`). When another process confirmed the execution
/// meanwhile and its confirm window has since elapsed, that record must not make this process close the execution for
/// its confirm window (CONF-2: a repeated CONFIRM starts and changes nothing; a RESULT changes nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_created_here_and_confirmed_elsewhere_is_not_canceled_for_its_confirm_window() {
    let prefix = crate::redis_support::unique_prefix("stale-window");
    let here = TestAgent::start(on_redis(&prefix, 60_000)).await;
    let other = TestAgent::start(on_redis(&prefix, 60_000)).await;
    let neg = here.negotiated("run_slow_task", slow_schema()).await;
    let mut ids = Vec::new();
    for _ in 0..2 {
        // Created here (this process knows the `received` record), confirmed and run by the other process.
        let exe = here.executed(&neg, json!({"ms": 20_000})).await;
        assert_eq!(other.confirm(&exe).await.status, StatusCode::ACCEPTED);
        ids.push(exe);
    }
    // Past the confirm window (2 s in the test limits), well within the 20 s of work.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let r = here.result(&ids[0], 100).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(matches!(r.body["status"].as_str(), Some("accepted" | "running")), "a RESULT canceled it: {}", r.body);
    let c = here.confirm(&ids[1]).await;
    assert_eq!(c.status, StatusCode::OK, "{}", c.body);
    assert_eq!(c.body["already_confirmed"], json!(true), "{}", c.body);
    for exe in &ids {
        let r = other.result(exe, 0).await;
        assert!(matches!(r.body["status"].as_str(), Some("accepted" | "running")), "canceled: {}", r.body);
        let c = other.post("/a2a/cancel", json!({"execution_id": exe})).await;
        assert_eq!(c.status, StatusCode::OK, "{}", c.body);
    }
}
