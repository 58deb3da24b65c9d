//! Every step of the SDK and the whole `call`, against a real agent: successes and failures.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use a2a_client::fallback::FallbackPolicy;
use a2a_client::{CallOptions, ClientConfig, ClientError, ExecuteOptions, Step, Wait};
use a2a_core::capability::AuthRequirement;
use a2a_core::wire::ExecutionStatus;
use a2a_server::ApiKey;
use serde_json::json;

use crate::common::{TestAgent, client, client_with, dead_url, decl, report_schema, runs, standard};

const AGENT: &str = "did:web:agent.example.com";

fn report() -> serde_json::Value {
    json!({"title": "Lift 3 out of service", "timestamp": "2026-11-29T21:00:00Z"})
}

#[tokio::test]
async fn discover_names_the_agent_and_its_capabilities() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let d = client().discover(&t.endpoint).await.expect("discover");
    assert_eq!(d.agent, AGENT);
    assert_eq!(d.version, "0.3");
    assert_eq!(d.capabilities, ["submit_report", "run_slow_task", "fail_on_purpose"]);
    assert!(d.offers("submit_report") && !d.offers("generate_summary"));
}

#[tokio::test]
async fn discover_accepts_a_url_without_the_a2a_suffix() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let base = t.endpoint.trim_end_matches("/a2a");
    assert_eq!(client().discover(base).await.expect("discover").endpoint.as_str(), t.endpoint);
}

#[tokio::test]
async fn capabilities_returns_declarations_features_and_limits() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let c = client().capabilities(&t.endpoint).await.expect("capabilities");
    assert_eq!(c.document.agent.id, AGENT);
    assert_eq!(c.declaration("submit_report").expect("declared").input_schema, report_schema());
    for f in ["long_poll", "cancel", "idempotency"] {
        assert!(c.has_feature(f), "{f}");
    }
    assert_eq!(c.max_wait(), Duration::from_millis(30_000));
}

#[tokio::test]
async fn negotiate_returns_the_tightened_seed_schema() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let proposal = json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]});
    let n = client().negotiate(&t.endpoint, "submit_report", Some(proposal)).await.expect("negotiate");
    assert!(n.response.tightened);
    assert_eq!(n.agreed_schema()["required"], json!(["title", "timestamp"]));
    assert!(n.is_fresh());
    assert_eq!(n.agent, AGENT);
}

#[tokio::test]
async fn negotiate_of_a_schema_breaking_the_rules_is_a_typed_agent_error() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let bad = json!({"type": "object", "properties": {"title": {"type": "string", "nullable": true}}});
    let e = client().negotiate(&t.endpoint, "submit_report", Some(bad)).await.expect_err("refused");
    assert_eq!(e.code(), "schema_rule_violation");
    assert_eq!(e.step(), Some(Step::Negotiate));
    let details = e.agent_error().and_then(|a| a.details.clone()).expect("details");
    assert_eq!(details["violations"][0]["rule"], "nullable_not_supported");
    assert!(e.hint().contains("a2a schema fix"), "{}", e.hint());
}

#[tokio::test]
async fn each_step_runs_on_its_own_and_confirm_twice_starts_nothing() {
    let count = runs();
    let t = TestAgent::start(standard(AGENT, count.clone())).await;
    let c = client();
    let n = c.negotiate(&t.endpoint, "run_slow_task", None).await.expect("negotiate");
    let e = c.execute(&n, &json!({"ms": 10}), &ExecuteOptions::default()).await.expect("execute");
    assert_eq!(e.response.status, ExecutionStatus::Received);
    assert!(e.id().starts_with("did:web:caller.example.com_"), "{}", e.id());
    let first = c.confirm(&e).await.expect("confirm");
    assert_eq!((first.status, first.already_confirmed), (ExecutionStatus::Accepted, false));
    let again = c.confirm(&e).await.expect("confirm again");
    assert!(again.already_confirmed);
    let r = c.result(&t.endpoint, e.id(), Wait::For(Duration::from_secs(20))).await.expect("result");
    assert_eq!(r.status, ExecutionStatus::Succeeded, "{r:?}");
    assert_eq!(r.result, Some(json!({"slept_ms": 10})));
    assert_eq!(count.load(Ordering::SeqCst), 1);
    let now = c.result(&t.endpoint, e.id(), Wait::No).await.expect("result again");
    assert_eq!(now.status, ExecutionStatus::Succeeded);
}

#[tokio::test]
async fn execute_with_the_same_idempotency_key_returns_the_same_execution() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let c = client();
    let n = c.negotiate(&t.endpoint, "submit_report", None).await.expect("negotiate");
    let opts = ExecuteOptions::default().idempotency_key("report-0001");
    let a = c.execute(&n, &report(), &opts).await.expect("first");
    let b = c.execute(&n, &report(), &opts).await.expect("second");
    assert_eq!(a.id(), b.id());
    assert!(!a.replayed && b.replayed);
    let conflict = c.execute(&n, &json!({"title": "other", "timestamp": "2026-11-29T21:00:00Z"}), &opts).await;
    assert_eq!(conflict.expect_err("conflict").code(), "idempotency_conflict");
}

#[tokio::test]
async fn call_runs_the_whole_handshake_and_the_second_call_skips_discover_and_negotiate() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let c = client();
    let first = c.call(&t.endpoint, "submit_report", report()).await.expect("call");
    assert_eq!(first.result, json!({"filed": report()}));
    assert_eq!((first.capability.as_str(), first.degraded, first.agent.as_str()), ("submit_report", false, AGENT));
    assert!(!first.trace.discover_cached && !first.trace.negotiation_cached);
    let second = c.call(&t.endpoint, "submit_report", report()).await.expect("call");
    assert!(second.trace.discover_cached && second.trace.negotiation_cached, "{:?}", second.trace);
    assert_eq!(second.negotiation_id, first.negotiation_id);
    assert_ne!(second.execution_id, first.execution_id);
    let s = c.cache_stats();
    assert_eq!((s.discover_hits, s.negotiation_hits, s.negotiation_misses), (1, 1, 1), "{s:?}");
}

#[tokio::test]
async fn call_with_a_payload_the_schema_rejects_is_payload_invalid_at_execute() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let e = client().call(&t.endpoint, "submit_report", json!({"title": 5})).await.expect_err("rejected");
    assert_eq!((e.code(), e.step()), ("payload_invalid", Some(Step::Execute)));
    let errors = e.agent_error().and_then(|a| a.details.clone()).expect("details")["errors"].clone();
    assert!(errors.as_array().is_some_and(|a| a.len() == 2), "{errors}");
    let e = client().call(&t.endpoint, "submit_report", json!([1])).await.expect_err("not an object");
    assert_eq!(e.code(), "invalid_input");
}

#[tokio::test]
async fn a_failed_execution_is_execution_failed_with_the_handlers_message() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let e = client().call(&t.endpoint, "fail_on_purpose", json!({})).await.expect_err("fails");
    match &e {
        ClientError::ExecutionFailed { status, error, .. } => {
            assert_eq!(*status, ExecutionStatus::Failed);
            assert_eq!(error.code.as_str(), "handler_failed");
            assert!(error.message.contains("it failed on purpose"), "{}", error.message);
        }
        other => panic!("expected ExecutionFailed, got {other:?}"),
    }
    assert!(e.to_string().contains("failed on purpose"), "{e}");
}

#[tokio::test]
async fn an_execution_past_its_negotiated_timeout_is_timed_out() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let opts = CallOptions::default().timeout_ms(200);
    let e =
        client().call_with(&t.endpoint, "run_slow_task", json!({"ms": 20_000}), &opts).await.expect_err("times out");
    assert_eq!(e.code(), "timed_out");
    assert!(matches!(e, ClientError::ExecutionFailed { status: ExecutionStatus::TimedOut, .. }), "{e:?}");
    assert!(e.hint().contains("timeout_ms"), "{}", e.hint());
}

#[tokio::test]
async fn against_a_slow_execution_the_call_ends_at_its_deadline_naming_the_execution() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let started = Instant::now();
    let opts = CallOptions::default().deadline(Duration::from_secs(2));
    let e = client().call_with(&t.endpoint, "run_slow_task", json!({"ms": 60_000}), &opts).await.expect_err("deadline");
    let took = started.elapsed();
    match &e {
        ClientError::DeadlineExceeded { step, execution_id, .. } => {
            assert_eq!(*step, Step::Result);
            assert!(execution_id.as_deref().is_some_and(|i| i.starts_with("did:web:caller")), "{e:?}");
        }
        other => panic!("expected DeadlineExceeded, got {other:?}"),
    }
    // Bounded by the deadline (2 s), with a wide margin for a loaded machine; the task itself runs 60 s.
    assert!(took < Duration::from_secs(15), "took {took:?}");
    assert!(e.hint().contains("a2a result"), "{}", e.hint());
}

#[tokio::test]
async fn against_an_agent_that_never_answers_the_call_ends_at_its_deadline() {
    // A socket that accepts connections and never answers: the slowest possible agent.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/a2a", listener.local_addr().expect("addr"));
    let held = Arc::new(tokio::sync::Mutex::new(Vec::new()));
    let h = held.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            h.lock().await.push(s);
        }
    });
    let started = Instant::now();
    let opts = CallOptions::default().deadline(Duration::from_millis(1500));
    let e = client().call_with(&url, "submit_report", report(), &opts).await.expect_err("no answer");
    assert!(matches!(e, ClientError::DeadlineExceeded { step: Step::Discover, .. }), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(15), "took {:?}", started.elapsed());
    // The step timeout alone bounds a single step too.
    let c = client_with(ClientConfig::default().with_step_timeout(Duration::from_millis(300)).with_max_retries(0));
    let e = c.discover(&url).await.expect_err("no answer");
    assert!(matches!(e, ClientError::Timeout { step: Step::Discover, .. }), "{e:?}");
}

#[tokio::test]
async fn against_a_dead_agent_the_call_fails_fast_with_a_clear_error() {
    let url = dead_url();
    let started = Instant::now();
    let e = client().call(&url, "submit_report", report()).await.expect_err("dead");
    let took = started.elapsed();
    match &e {
        ClientError::Unreachable { step, url: u, reason } => {
            assert_eq!(*step, Step::Discover);
            assert_eq!(u, &url);
            assert!(reason.to_lowercase().contains("refused"), "{reason}");
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    // Two quick retries (100 ms, 200 ms) and then the error: far below any deadline.
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(e.hint().contains("check that the agent is running"), "{}", e.hint());
    assert_eq!(e.code(), "unreachable");
}

#[tokio::test]
async fn an_agent_of_another_protocol_version_is_refused() {
    let agent = standard(AGENT, runs()).build().expect("builds");
    let app = agent.router().layer(axum::middleware::map_response(|mut r: axum::response::Response| async move {
        r.headers_mut().insert("a2a-version", axum::http::HeaderValue::from_static("0.4"));
        r
    }));
    let t = TestAgent::serve(agent, app).await;
    let e = client().call(&t.endpoint, "submit_report", report()).await.expect_err("0.4");
    assert!(matches!(&e, ClientError::UnsupportedVersion { version, .. } if version == "0.4"), "{e:?}");
    assert!(e.hint().contains("gateway"), "{}", e.hint());
}

#[tokio::test]
async fn a_server_that_is_not_an_agent_is_a_protocol_error() {
    let app = axum::Router::new().route("/a2a", axum::routing::any(|| async { "hello" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/a2a", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    let e = client().discover(&url).await.expect_err("not an agent");
    assert_eq!(e.code(), "protocol_error");
    assert!(e.to_string().contains("A2A-Version"), "{e}");
}

#[tokio::test]
async fn a_capability_the_agent_does_not_offer_is_no_matching_capability_with_its_options() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let e = client().call(&t.endpoint, "generate_summary", json!({"text": "x"})).await.expect_err("not offered");
    assert_eq!(e.code(), "no_matching_capability");
    assert!(
        matches!(&e, ClientError::NoMatchingCapability { cause, .. }
        if matches!(**cause, ClientError::CapabilityNotOffered { .. })),
        "{e:?}"
    );
}

#[tokio::test]
async fn result_of_an_unknown_execution_is_unknown_execution() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let id = "did:web:caller.example.com_1719000000000000001_h6fgdqwzjyd3liod5hyci3mlc4";
    let e = client().result(&t.endpoint, id, Wait::No).await.expect_err("unknown");
    assert_eq!((e.code(), e.step()), ("unknown_execution", Some(Step::Result)));
    let e = client().result(&t.endpoint, "not-an-id", Wait::No).await.expect_err("invalid");
    assert_eq!(e.code(), "invalid_input");
}

#[tokio::test]
async fn cancel_stops_a_running_execution() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let c = client();
    let n = c.negotiate(&t.endpoint, "run_slow_task", None).await.expect("negotiate");
    let e = c.execute(&n, &json!({"ms": 60_000}), &ExecuteOptions::default()).await.expect("execute");
    c.confirm(&e).await.expect("confirm");
    let r = c.cancel(&t.endpoint, e.id()).await.expect("cancel");
    assert_eq!(r.status, ExecutionStatus::Canceled);
    let again = c.cancel(&t.endpoint, e.id()).await.expect_err("terminal");
    assert_eq!(again.code(), "invalid_state");
}

#[tokio::test]
async fn without_long_poll_the_client_polls_with_backoff_until_the_result() {
    // The agent's router, with `long_poll` removed from its features and `wait_ms` stripped from RESULT: an agent
    // that answers RESULT at once. Every RESULT request is counted.
    let agent = standard(AGENT, runs()).build().expect("builds");
    let polls = Arc::new(AtomicUsize::new(0));
    let waited = Arc::new(AtomicUsize::new(0));
    let (p, w) = (polls.clone(), waited.clone());
    let app = agent
        .router()
        .layer(axum::middleware::map_request(move |mut req: axum::extract::Request| {
            let (p, w) = (p.clone(), w.clone());
            async move {
                if req.uri().path().contains("/a2a/result/") {
                    p.fetch_add(1, Ordering::SeqCst);
                    if req.uri().query().is_some() {
                        w.fetch_add(1, Ordering::SeqCst);
                    }
                    let path = req.uri().path().to_owned();
                    *req.uri_mut() = path.parse().expect("uri");
                }
                req
            }
        }))
        .layer(axum::middleware::map_response(|r: axum::response::Response| async move {
            let (parts, body) = r.into_parts();
            let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap_or_default();
            let bytes = match serde_json::from_slice::<serde_json::Value>(&bytes) {
                Ok(mut v) if v.get("features").is_some() => {
                    v["features"] = json!(["cancel", "idempotency"]);
                    serde_json::to_vec(&v).unwrap_or_default().into()
                }
                _ => bytes,
            };
            let mut r = axum::response::Response::from_parts(parts, axum::body::Body::from(bytes));
            r.headers_mut().remove(axum::http::header::CONTENT_LENGTH);
            r
        }));
    let t = TestAgent::serve(agent, app).await;
    let c = client();
    let outcome = c.call(&t.endpoint, "run_slow_task", json!({"ms": 1200})).await.expect("call");
    assert_eq!(outcome.result, json!({"slept_ms": 1200}));
    assert_eq!(waited.load(Ordering::SeqCst), 0, "wait_ms sent to an agent without long_poll");
    // 100 + 200 + 400 + 800 ms of pauses reach 1.5 s: about 5 polls for a 1.2 s task (more on a loaded machine, but
    // far fewer than polling without backoff would make).
    let n = polls.load(Ordering::SeqCst);
    assert!((3..=12).contains(&n), "{n} RESULT polls");
    assert_eq!(outcome.trace.result_polls as usize, n);
}

#[tokio::test]
async fn with_long_poll_one_result_request_waits_for_the_result() {
    let t = TestAgent::start(standard(AGENT, runs())).await;
    let outcome = client().call(&t.endpoint, "run_slow_task", json!({"ms": 700})).await.expect("call");
    assert_eq!(outcome.trace.result_polls, 1, "{:?}", outcome.trace);
}

#[tokio::test]
async fn api_key_and_region_are_sent_only_when_configured() {
    let mut pay = decl("process_payment", json!({"type": "object", "properties": {"amount": {"type": "number"}}}));
    pay.auth_requirement = AuthRequirement::ApiKey;
    pay.region_restriction = vec!["eu-west-1".into()];
    let builder = a2a_server::AgentBuilder::new(AGENT)
        .capability(pay, a2a_server::handler::builtin::echo())
        .api_key(ApiKey::new("k-good"));
    let t = TestAgent::start(builder).await;
    let e = client().call(&t.endpoint, "process_payment", json!({"amount": 5})).await.expect_err("no key");
    assert_eq!(e.code(), "auth_required");
    assert!(e.hint().contains("--api-key"), "{}", e.hint());
    let keyed = a2a_client::Client::builder(a2a_client::Identity::unsigned(crate::common::CALLER).expect("did"))
        .api_key(&t.endpoint, "k-good")
        .expect("url")
        .build()
        .expect("client");
    let opts = CallOptions::default().fallback(FallbackPolicy::refuse());
    let e = keyed.call_with(&t.endpoint, "process_payment", json!({"amount": 5}), &opts).await.expect_err("no region");
    assert_eq!(e.code(), "no_matching_capability");
    assert_eq!(e.agent_error().map(|a| a.code.as_str()), Some("region_restricted"));
    let regional = a2a_client::Client::builder(a2a_client::Identity::unsigned(crate::common::CALLER).expect("did"))
        .config(ClientConfig::default().with_region("eu-west-1"))
        .api_key(&t.endpoint, "k-good")
        .expect("url")
        .build()
        .expect("client");
    let ok = regional.call(&t.endpoint, "process_payment", json!({"amount": 5})).await.expect("paid");
    assert_eq!(ok.result, json!({"echo": {"amount": 5}}));
}

#[tokio::test]
async fn a_cached_negotiation_the_agent_forgot_is_negotiated_again() {
    // Two agents in turn on the same port: the second has never seen the first one's negotiations.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let a = standard(AGENT, runs()).build().expect("builds");
    let app = a.router();
    let first = TestAgent::serve_on(listener, a, app).await;
    let c = client();
    let one = c.call(&first.endpoint, "submit_report", report()).await.expect("first");
    drop(first);
    let listener = loop {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => break l,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    let b = standard(AGENT, runs()).build().expect("builds");
    let app = b.router();
    let second = TestAgent::serve_on(listener, b, app).await;
    let two = c.call(&second.endpoint, "submit_report", report()).await.expect("second");
    assert_ne!(one.negotiation_id, two.negotiation_id);
    assert!(!two.trace.negotiation_cached);
}

#[tokio::test]
async fn prewarm_negotiates_with_known_peers_so_that_the_first_call_skips_negotiate() {
    let a = TestAgent::start(standard(AGENT, runs())).await;
    let c = client();
    let peers = [
        a2a_client::Peer::new(&a.endpoint, "submit_report"),
        a2a_client::Peer::new(&a.endpoint, "no_such_thing"),
        a2a_client::Peer::new(dead_url(), "submit_report"),
    ];
    let report_ = c.prewarm(&peers).await;
    assert!(report_[0].is_ok(), "{:?}", report_[0]);
    assert_eq!(report_[1].as_ref().expect_err("not offered").code(), "no_matching_capability");
    assert_eq!(report_[2].as_ref().expect_err("dead").code(), "unreachable");
    let outcome = c.call(&a.endpoint, "submit_report", report()).await.expect("call");
    assert!(outcome.trace.discover_cached && outcome.trace.negotiation_cached, "{:?}", outcome.trace);
    assert_eq!(&outcome.negotiation_id, report_[0].as_ref().expect("ok").id());
}

/// The agent's router, whose first `n` EXECUTE requests are answered `503 overloaded` (as a busy agent would) and
/// counted; optionally without `idempotency` in its features.
async fn flaky_execute(n: usize, idempotency: bool) -> (TestAgent, Arc<AtomicUsize>) {
    let agent = standard(AGENT, runs()).build().expect("builds");
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    let app = agent
        .router()
        .layer(axum::middleware::from_fn(move |req: axum::extract::Request, next: axum::middleware::Next| {
            let s = s.clone();
            async move {
                if req.uri().path().ends_with("/a2a/execute") && s.fetch_add(1, Ordering::SeqCst) < n {
                    let body = json!({"error": {"code": "overloaded", "message": "busy"}}).to_string();
                    return axum::response::Response::builder()
                        .status(503)
                        .header("content-type", "application/json")
                        .header("a2a-version", "0.3")
                        .header("retry-after", "0")
                        .body(axum::body::Body::from(body))
                        .unwrap_or_default();
                }
                next.run(req).await
            }
        }))
        .layer(axum::middleware::map_response(move |r: axum::response::Response| async move {
            if idempotency {
                return r;
            }
            let (parts, body) = r.into_parts();
            let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap_or_default();
            let bytes = match serde_json::from_slice::<serde_json::Value>(&bytes) {
                Ok(mut v) if v.get("features").is_some() => {
                    v["features"] = json!(["long_poll", "cancel"]);
                    serde_json::to_vec(&v).unwrap_or_default().into()
                }
                _ => bytes,
            };
            let mut r = axum::response::Response::from_parts(parts, axum::body::Body::from(bytes));
            r.headers_mut().remove(axum::http::header::CONTENT_LENGTH);
            r
        }));
    (TestAgent::serve(agent, app).await, seen)
}

#[tokio::test]
async fn execute_is_retried_after_overloaded_only_at_an_agent_that_lists_idempotency() {
    let (t, seen) = flaky_execute(1, true).await;
    let o = client().call(&t.endpoint, "submit_report", report()).await.expect("retried once");
    assert_eq!(seen.load(Ordering::SeqCst), 2);
    assert_eq!(o.result["filed"]["title"], "Lift 3 out of service");
    let (t, seen) = flaky_execute(1, false).await;
    let e = client().call(&t.endpoint, "submit_report", report()).await.expect_err("not retried");
    assert_eq!((e.code(), e.step()), ("overloaded", Some(Step::Execute)));
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    assert!(e.hint().contains("Retry-After"), "{}", e.hint());
}

#[tokio::test]
async fn retries_of_a_safe_step_are_bounded() {
    let (t, seen) = flaky_execute(100, true).await;
    let e = client().call(&t.endpoint, "submit_report", report()).await.expect_err("always busy");
    assert_eq!(e.code(), "overloaded");
    assert_eq!(seen.load(Ordering::SeqCst), 3, "one request and two retries (ClientConfig::max_retries)");
}

#[tokio::test]
async fn cached_answers_expire_discover_after_its_ttl_and_schemas_with_their_negotiation() {
    let mut limits = a2a_server::Limits::default();
    // A lifetime long enough that the second call, 400 ms and a few requests later, still finds the schema fresh
    // on a loaded machine.
    limits.negotiation_ttl_ms = 5_000;
    let t = TestAgent::start(standard(AGENT, runs()).limits(limits)).await;
    let c = client_with(ClientConfig::default().with_discover_ttl(Duration::from_millis(300)));
    let first = c.call(&t.endpoint, "submit_report", report()).await.expect("first");
    let n = c.negotiate(&t.endpoint, "submit_report", None).await.expect("negotiate");
    // valid_for is expires_at less a tenth of the lifetime: at most 5 s, at least 4.5 s minus the time taken.
    assert!(
        n.valid_for <= Duration::from_millis(5_000) && n.valid_for > Duration::from_millis(2_000),
        "{:?}",
        n.valid_for
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let second = c.call(&t.endpoint, "submit_report", report()).await.expect("second");
    assert!(!second.trace.discover_cached, "DISCOVER served after its TTL");
    assert!(second.trace.negotiation_cached, "the agreed schema is still fresh");
    tokio::time::sleep(Duration::from_millis(5_000)).await;
    let third = c.call(&t.endpoint, "submit_report", report()).await.expect("third");
    assert!(!third.trace.negotiation_cached, "an expired negotiation was used");
    assert_ne!(third.negotiation_id, first.negotiation_id);
}
