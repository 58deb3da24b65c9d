//! Composite capabilities (`spec/PROTOCOL.md` §19) over real loopback HTTP, with a second real agent for remote
//! steps.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use a2a_core::capability::CapabilityDeclaration;
use a2a_server::AgentBuilder;
use a2a_server::compose::Pipeline;
use a2a_server::handler::{ExecutionContext, HandlerError};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common::{TestAgent, decl, report_schema};

#[derive(Default)]
struct Counters {
    summary: AtomicUsize,
    count: AtomicUsize,
    line: AtomicUsize,
    slow_started: AtomicUsize,
    slow_canceled: AtomicBool,
}

/// Sets `slow_canceled` when dropped while still holding the counters (the handler did not finish its sleep).
struct Stopped(Option<Arc<Counters>>);

impl Drop for Stopped {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            c.slow_canceled.store(true, Ordering::SeqCst);
        }
    }
}

fn with_output(d: CapabilityDeclaration, output: Value) -> CapabilityDeclaration {
    CapabilityDeclaration { output_schema: Some(output), ..d }
}

fn pipeline(v: Value) -> Pipeline {
    serde_json::from_value(v).expect("pipeline")
}

fn text_schema() -> Value {
    json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
}

/// The atomic capabilities both agents have: `make_summary` (first three words), `count_words`, `format_line`,
/// `wait_a_while` (sleeps `ms`, noting when it is canceled), `fail_on_purpose`.
fn atomic(did: &str, c: &Arc<Counters>) -> AgentBuilder {
    let (c1, c2, c3, c4) = (c.clone(), c.clone(), c.clone(), c.clone());
    // Composites reach the second agent as the binary's do (CMP-10): through the client library.
    AgentBuilder::new(did)
        .remote_agents_from(a2a_agent::app::remote_agents())
        .capability(
            with_output(
                decl("make_summary", text_schema()),
                json!({"type": "object", "properties": {"summary": {"type": "string"}, "words": {"type": "integer"}},
                       "required": ["summary", "words"]}),
            ),
            move |_ctx: ExecutionContext, p: Value| {
                let c = c1.clone();
                async move {
                    c.summary.fetch_add(1, Ordering::SeqCst);
                    let words: Vec<&str> = p["text"].as_str().unwrap_or_default().split_whitespace().collect();
                    Ok(json!({"summary": words.iter().take(3).copied().collect::<Vec<_>>().join(" "), "words": words.len()}))
                }
            },
        )
        .capability(
            with_output(
                decl("count_words", text_schema()),
                json!({"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}),
            ),
            move |_ctx: ExecutionContext, p: Value| {
                let c = c2.clone();
                async move {
                    c.count.fetch_add(1, Ordering::SeqCst);
                    Ok(json!({"count": p["text"].as_str().unwrap_or_default().split_whitespace().count()}))
                }
            },
        )
        .capability(
            decl(
                "format_line",
                json!({"type": "object", "properties": {"summary": {"type": "string"}, "count": {"type": "number"}},
                       "required": ["summary", "count"], "additionalProperties": false}),
            ),
            move |_ctx: ExecutionContext, p: Value| {
                let c = c3.clone();
                async move {
                    c.line.fetch_add(1, Ordering::SeqCst);
                    Ok(json!({"line": format!("{} ({} words)", p["summary"].as_str().unwrap_or_default(), p["count"])}))
                }
            },
        )
        .capability(
            decl("wait_a_while", json!({"type": "object", "properties": {"ms": {"type": "number"}}, "required": ["ms"]})),
            move |ctx: ExecutionContext, p: Value| {
                let c = c4.clone();
                async move {
                    c.slow_started.fetch_add(1, Ordering::SeqCst);
                    // Notes a stop however it comes: the cancellation token, or the future dropped by the engine.
                    let mut stopped = Stopped(Some(c.clone()));
                    let ms = p["ms"].as_f64().unwrap_or(0.0) as u64;
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(ms)) => {
                            stopped.0 = None;
                            Ok(json!({"slept_ms": ms}))
                        }
                        () = ctx.cancel.cancelled() => Err(HandlerError::new("stopped")),
                    }
                }
            },
        )
        .capability(decl("fail_on_purpose", json!({"type": "object"})), |_c: ExecutionContext, _p: Value| async move {
            Err(HandlerError::new("it failed on purpose").with_details(json!({"why": "test"})))
        })
        .capability(decl("submit_report", report_schema()), |_c: ExecutionContext, p: Value| async move {
            Ok(json!({"filed": p}))
        })
}

/// The second agent ("the desk"), serving the atomic capabilities only.
async fn desk() -> (TestAgent, Arc<Counters>) {
    let c = Arc::new(Counters::default());
    (TestAgent::start(atomic("did:web:desk.example.com", &c)).await, c)
}

fn composite(name: &str, input_schema: Value, steps: Value) -> (CapabilityDeclaration, Pipeline) {
    (decl(name, input_schema), pipeline(steps))
}

fn report_input() -> Value {
    json!({"type": "object", "properties": {"text": {"type": "string"}, "timestamp": {"type": "string", "format": "date-time"}},
           "required": ["text", "timestamp"]})
}

/// The agent with composites; `desk` is the endpoint of the second agent.
async fn hub(desk: &str) -> (TestAgent, Arc<Counters>) {
    let c = Arc::new(Counters::default());
    let mut b = atomic("did:web:hub.example.com", &c);
    let composites = [
        composite(
            "summarize_count_format",
            text_schema(),
            json!({"steps": [
                {"id": "sum", "capability": "make_summary", "input": {"text": "/input/text"}},
                {"id": "count", "capability": "count_words", "input": {"text": "/input/text"}},
                {"id": "line", "capability": "format_line",
                 "input": {"summary": "/steps/sum/summary", "count": "/steps/count/count"}}]}),
        ),
        composite(
            "summarize_and_file",
            report_input(),
            json!({"steps": [
                {"id": "sum", "capability": "make_summary", "input": {"text": "/input/text"}},
                {"id": "file", "capability": "submit_report", "agent": desk,
                 "input": {"title": "/steps/sum/summary", "timestamp": "/input/timestamp"}}],
                "output": {"report": "/steps/file", "summary": "/steps/sum/summary"}}),
        ),
        composite(
            "summarize_and_file_badly",
            report_input(),
            json!({"steps": [
                {"id": "sum", "capability": "make_summary", "input": {"text": "/input/text"}},
                {"id": "file", "capability": "submit_report", "agent": desk, "input": {"title": "/steps/sum/summary"}}]}),
        ),
        composite(
            "summarize_and_vanish",
            text_schema(),
            json!({"steps": [
                {"id": "sum", "capability": "make_summary"},
                {"id": "gone", "capability": "vanish_without_trace", "agent": desk}]}),
        ),
        composite(
            "summarize_then_fail",
            text_schema(),
            json!({"steps": [
                {"id": "sum", "capability": "make_summary", "input": {"text": "/input/text"}},
                {"id": "boom", "capability": "fail_on_purpose", "agent": desk, "input": {"summary": "/steps/sum/summary"}},
                {"id": "count", "capability": "count_words", "input": {"text": "/input/text"}}]}),
        ),
        composite(
            "summarize_then_wait",
            text_schema(),
            json!({"steps": [
                {"id": "sum", "capability": "make_summary"},
                {"id": "wait", "capability": "wait_a_while", "timeout_ms": 300, "input": {"ms": {"const": 60000}}},
                {"id": "count", "capability": "count_words", "input": {"text": "/input/text"}}]}),
        ),
        composite(
            "summarize_then_wait_remotely",
            text_schema(),
            json!({"steps": [
                {"id": "sum", "capability": "make_summary"},
                {"id": "wait", "capability": "wait_a_while", "agent": desk, "input": {"ms": {"const": 20000}}},
                {"id": "count", "capability": "count_words", "input": {"text": "/input/text"}}]}),
        ),
        composite(
            "fail_then_recover",
            text_schema(),
            json!({"steps": [
                {"id": "sum", "capability": "fail_on_purpose",
                 "fallback": {"capability": "make_summary", "agent": desk, "input": {"text": "/input/text"}}},
                {"id": "count", "capability": "count_words", "input": {"text": "/steps/sum/summary"}}]}),
        ),
    ];
    for (d, p) in composites {
        b = b.composite(d, p);
    }
    (TestAgent::start(b).await, c)
}

/// The whole handshake for a composite; returns the RESULT body.
async fn run(agent: &TestAgent, capability: &str, schema: Value, payload: Value) -> Value {
    agent.run(capability, schema, payload).await
}

const TEXT: &str = "the lift on floor three is out of service again";

#[tokio::test]
async fn a_three_step_local_pipeline_runs_as_one_execution_and_equals_the_steps_by_hand() {
    let (desk, _) = desk().await;
    let (hub, counters) = hub(&desk.url("/a2a")).await;
    let r = run(&hub, "summarize_count_format", text_schema(), json!({"text": TEXT})).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    let steps = r["result"]["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 3);
    assert!(steps.iter().all(|s| s["status"] == "succeeded"), "{r}");
    assert_eq!(steps.iter().map(|s| s["id"].as_str().expect("present")).collect::<Vec<_>>(), ["sum", "count", "line"]);
    // CMP-5: without `output`, the last step's output.
    assert_eq!(r["result"]["output"], steps[2]["output"]);
    assert_eq!(r["result"]["output"], json!({"line": "the lift on (10 words)"}));

    // The same steps run by hand, each with its own handshake, give the same outputs.
    let sum = hub.run("make_summary", text_schema(), json!({"text": TEXT})).await;
    let count = hub.run("count_words", text_schema(), json!({"text": TEXT})).await;
    let line = hub
        .run(
            "format_line",
            json!({"type": "object", "properties": {"summary": {"type": "string"}, "count": {"type": "number"}},
                   "required": ["summary", "count"], "additionalProperties": false}),
            json!({"summary": sum["result"]["summary"], "count": count["result"]["count"]}),
        )
        .await;
    assert_eq!(steps[0]["output"], sum["result"]);
    assert_eq!(steps[1]["output"], count["result"]);
    assert_eq!(r["result"]["output"], line["result"]);
    assert_eq!(counters.line.load(Ordering::SeqCst), 2);

    // DISCOVER (CMP-1): the feature, the name, and the pipeline in the declaration.
    let caps = hub.get("/a2a/capabilities").await;
    assert!(caps.body["features"].as_array().expect("present").contains(&json!("composite")), "{}", caps.body);
    let d = caps.body["capabilities"]
        .as_array()
        .expect("present")
        .iter()
        .find(|d| d["name"] == "summarize_count_format")
        .expect("present");
    assert_eq!(d["composite"]["steps"][2]["input"]["count"], "/steps/count/count");
    let opts = hub.send(hub.req(reqwest::Method::OPTIONS, "/a2a")).await;
    assert!(opts.header("a2a-capabilities").expect("present").contains("\"summarize_count_format\""));
    // The desk has no composites: it does not list the feature.
    let caps = desk.get("/a2a/capabilities").await;
    assert!(!caps.body["features"].as_array().expect("present").contains(&json!("composite")));
}

#[tokio::test]
async fn a_step_on_a_second_agent_runs_there_under_the_hubs_identity() {
    let (desk, desk_counters) = desk().await;
    let (hub, hub_counters) = hub(&desk.url("/a2a")).await;
    let r = run(&hub, "summarize_and_file", report_input(), json!({"text": TEXT, "timestamp": "2026-12-01T10:00:00Z"}))
        .await;
    assert_eq!(r["status"], "succeeded", "{r}");
    let out = &r["result"]["output"];
    assert_eq!(out["summary"], "the lift on");
    assert_eq!(out["report"], json!({"filed": {"title": "the lift on", "timestamp": "2026-12-01T10:00:00Z"}}));
    let file = &r["result"]["steps"][1];
    assert_eq!(file["agent"], desk.url("/a2a"));
    // CMP-10, CMP-15: the sub-execution is the hub's at the desk.
    let sub = file["execution_id"].as_str().expect("a remote step reports its sub-execution");
    assert!(sub.starts_with("did:web:hub.example.com_"), "{sub}");
    let rec = desk.agent.engine().store().get_execution(sub).await.expect("present").expect("the desk has it");
    assert_eq!(rec.sender, "did:web:hub.example.com");
    assert_eq!(rec.capability, "submit_report");
    let theirs = desk.result(sub, 0).await;
    assert_eq!(theirs.code(), "unknown_execution", "the caller of the composite cannot read the sub-execution");
    assert_eq!(hub_counters.summary.load(Ordering::SeqCst), 1);
    assert_eq!(desk_counters.summary.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn negotiate_refuses_a_broken_chain_and_names_the_step() {
    let (desk, _) = desk().await;
    let (hub, _) = hub(&desk.url("/a2a")).await;
    // The desk's submit_report needs a timestamp the mapping does not give.
    let a = hub.negotiate("summarize_and_file_badly", report_input()).await;
    assert_eq!(a.status, StatusCode::CONFLICT, "{}", a.body);
    assert_eq!(a.code(), "composite_unsatisfiable");
    let d = &a.body["error"]["details"];
    assert_eq!(d["step"], "file");
    assert_eq!(d["capability"], "submit_report");
    assert_eq!(d["member"], "timestamp");
    assert_eq!(d["agent"], desk.url("/a2a"));
    let msg = a.body["error"]["message"].as_str().expect("present");
    assert!(msg.contains("step `file`") && msg.contains("timestamp"), "{msg}");
    // A step whose agent does not offer its capability.
    let a = hub.negotiate("summarize_and_vanish", text_schema()).await;
    assert_eq!(a.status, StatusCode::CONFLICT, "{}", a.body);
    assert_eq!(a.body["error"]["details"]["step"], "gone");
    assert!(a.body["error"]["details"]["reason"].as_str().expect("present").contains("does not offer"));
    // The same composite negotiates when the chain holds.
    assert_eq!(hub.negotiate("summarize_and_file", report_input()).await.status, StatusCode::OK);
    // A second agent that is down: 502 agent_unavailable naming the step.
    let down = format!("http://127.0.0.1:{}/a2a", crate::common::free_port());
    let c = Arc::new(Counters::default());
    let (d, p) = composite(
        "summarize_and_file",
        report_input(),
        json!({"steps": [{"id": "sum", "capability": "make_summary"},
                         {"id": "file", "capability": "submit_report", "agent": down,
                          "input": {"title": "/steps/sum/summary", "timestamp": "/input/timestamp"}}]}),
    );
    let lonely = TestAgent::start(atomic("did:web:lonely.example.com", &c).composite(d, p)).await;
    let a = lonely.negotiate("summarize_and_file", report_input()).await;
    assert_eq!(a.status, StatusCode::BAD_GATEWAY, "{}", a.body);
    assert_eq!(a.code(), "agent_unavailable");
    assert_eq!(a.body["error"]["details"]["step"], "file");
}

#[tokio::test]
async fn a_broken_local_chain_is_refused_when_the_agent_is_built() {
    let c = Arc::new(Counters::default());
    let (d, p) = composite(
        "count_the_summary",
        text_schema(),
        json!({"steps": [{"id": "sum", "capability": "make_summary"},
                         {"id": "line", "capability": "format_line", "input": {"summary": "/steps/sum/summary"}}]}),
    );
    let err = atomic("did:web:hub.example.com", &c).composite(d, p).build().err().expect("refused");
    let msg = err.to_string();
    assert!(
        msg.contains("count_the_summary") && msg.contains("/composite/steps/1") && msg.contains("`count`"),
        "{msg}"
    );
}

#[tokio::test]
async fn a_failing_step_gives_a_partial_report_with_the_earlier_outputs() {
    let (desk, _) = desk().await;
    let (hub, counters) = hub(&desk.url("/a2a")).await;
    let r = run(&hub, "summarize_then_fail", text_schema(), json!({"text": TEXT})).await;
    assert_eq!(r["status"], "failed", "{r}");
    assert!(r.get("result").is_none());
    let e = &r["error"];
    assert_eq!(e["code"], "step_failed");
    assert!(e["message"].as_str().expect("present").contains("step `boom`"), "{e}");
    assert_eq!(e["details"]["failed_step"], "boom");
    let steps = e["details"]["steps"].as_array().expect("present");
    assert_eq!(steps[0]["status"], "succeeded");
    assert_eq!(steps[0]["output"]["summary"], "the lift on");
    assert_eq!(steps[1]["status"], "failed");
    assert_eq!(steps[1]["error"]["code"], "handler_failed");
    assert_eq!(steps[1]["error"]["message"], "it failed on purpose");
    assert_eq!(steps[1]["error"]["details"], json!({"why": "test"}), "the desk's error, unchanged");
    assert!(steps[1]["execution_id"].is_string());
    assert_eq!(steps[2]["status"], "skipped");
    assert_eq!(counters.count.load(Ordering::SeqCst), 0, "no step runs after the failed one");
}

#[tokio::test]
async fn a_step_that_fails_runs_its_fallback() {
    let (desk, desk_counters) = desk().await;
    let (hub, _) = hub(&desk.url("/a2a")).await;
    let r = run(&hub, "fail_then_recover", text_schema(), json!({"text": TEXT})).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    let s = &r["result"]["steps"][0];
    assert_eq!(s["fallback_used"], true);
    assert_eq!(s["capability"], "make_summary");
    assert_eq!(s["primary_error"]["code"], "handler_failed");
    assert_eq!(r["result"]["output"], json!({"count": 3}));
    assert_eq!(desk_counters.summary.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_step_that_runs_out_of_time_fails_the_composite() {
    let (desk, _) = desk().await;
    let (hub, counters) = hub(&desk.url("/a2a")).await;
    let started = std::time::Instant::now();
    let r = run(&hub, "summarize_then_wait", text_schema(), json!({"text": TEXT})).await;
    // Ended by the step's 300 ms limit, not by the handler's 60 s (10 s: ample on a loaded machine).
    assert!(started.elapsed() < Duration::from_secs(10), "the step's 300 ms limit, not the handler's 60 s");
    assert_eq!(r["status"], "failed", "{r}");
    assert_eq!(r["error"]["code"], "step_failed");
    let steps = r["error"]["details"]["steps"].as_array().expect("present");
    assert_eq!(steps[1]["status"], "timed_out");
    assert_eq!(steps[1]["error"]["code"], "timed_out");
    assert_eq!(steps[2]["status"], "skipped");
    for _ in 0..200 {
        if counters.slow_canceled.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(counters.slow_canceled.load(Ordering::SeqCst), "the timed-out handler was told to stop");
}

#[tokio::test]
async fn canceling_the_composite_cancels_the_remote_step_in_progress() {
    let (desk, desk_counters) = desk().await;
    let (hub, hub_counters) = hub(&desk.url("/a2a")).await;
    let neg = hub.negotiated("summarize_then_wait_remotely", text_schema()).await;
    let exe = hub.executed(&neg, json!({"text": TEXT})).await;
    assert_eq!(hub.confirm(&exe).await.status, StatusCode::ACCEPTED);
    // Wait until the desk runs the slow step.
    for _ in 0..200 {
        if desk_counters.slow_started.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(desk_counters.slow_started.load(Ordering::SeqCst), 1);
    let c = hub.post("/a2a/cancel", json!({"execution_id": exe})).await;
    assert_eq!(c.status, StatusCode::OK, "{}", c.body);
    assert_eq!(c.body["status"], "canceled");
    // CMP-14: the desk's handler is told to stop (CANCEL of the sub-execution), and the third step never starts.
    for _ in 0..200 {
        if desk_counters.slow_canceled.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(desk_counters.slow_canceled.load(Ordering::SeqCst), "the remote step was canceled");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(hub_counters.count.load(Ordering::SeqCst), 0);
    assert_eq!(hub.result(&exe, 0).await.body["status"], "canceled");
}

#[tokio::test]
async fn confirming_again_or_re_running_does_not_run_finished_steps_twice() {
    let (desk, desk_counters) = desk().await;
    let (hub, hub_counters) = hub(&desk.url("/a2a")).await;
    let neg = hub.negotiated("summarize_and_file", report_input()).await;
    let payload = json!({"text": TEXT, "timestamp": "2026-12-01T10:00:00Z"});
    let exe = hub.executed(&neg, payload.clone()).await;
    assert_eq!(hub.confirm(&exe).await.status, StatusCode::ACCEPTED);
    let first = hub.result(&exe, 10_000).await.body;
    assert_eq!(first["status"], "succeeded", "{first}");
    for _ in 0..3 {
        let again = hub.confirm(&exe).await;
        assert_eq!(again.status, StatusCode::OK);
        assert_eq!(again.body["already_confirmed"], true);
    }
    assert_eq!(hub.result(&exe, 0).await.body["result"], first["result"]);
    assert_eq!(hub_counters.summary.load(Ordering::SeqCst), 1);
    let filed = desk
        .agent
        .engine()
        .store()
        .get_execution(first["result"]["steps"][1]["execution_id"].as_str().expect("present"));
    assert!(filed.await.expect("present").is_some());

    // CMP-16: the composite's handler run again for the same execution (as after a crashed worker, ST-5) returns
    // the same outcome without running any step again, local or remote.
    let composite = hub.agent.composite("summarize_and_file").expect("composite").clone();
    let ctx = ExecutionContext {
        sender: crate::common::SENDER.into(),
        sender_verified: false,
        capability: "summarize_and_file".into(),
        negotiation_id: neg.clone(),
        execution_id: exe.clone(),
        deadline: std::time::SystemTime::now() + Duration::from_secs(10),
        cancel: tokio_util::sync::CancellationToken::new(),
        traceparent: None,
        events: Default::default(),
    };
    let rerun = composite.run(ctx, payload.clone()).await.expect("re-run");
    assert_eq!(rerun, first["result"]);
    assert_eq!(hub_counters.summary.load(Ordering::SeqCst), 1);

    // Another process of the hub (same DID, empty journal, its own negotiation at the desk) re-running the same
    // execution reaches the desk with the same Idempotency-Key (EXE-7): the desk refuses to create a second
    // sub-execution (`idempotency_conflict`) and its step has still run once.
    let (other, _) = self::hub(&desk.url("/a2a")).await;
    let composite = other.agent.composite("summarize_and_file").expect("composite").clone();
    let ctx = ExecutionContext {
        sender: crate::common::SENDER.into(),
        sender_verified: false,
        capability: "summarize_and_file".into(),
        negotiation_id: neg.clone(),
        execution_id: exe.clone(),
        deadline: std::time::SystemTime::now() + Duration::from_secs(10),
        cancel: tokio_util::sync::CancellationToken::new(),
        traceparent: None,
        events: Default::default(),
    };
    let elsewhere = composite.run(ctx, payload).await.expect_err("refused by the desk");
    let steps = &elsewhere.details.as_ref().expect("present")["steps"];
    assert_eq!(steps[1]["error"]["code"], "idempotency_conflict", "{steps}");
    let sub = first["result"]["steps"][1]["execution_id"].as_str().expect("present");
    let rec = desk.agent.engine().store().get_execution(sub).await.expect("present").expect("present");
    assert_eq!(rec.attempts, 1, "the desk ran its step once");
    assert_eq!(desk_counters.summary.load(Ordering::SeqCst), 0);
}

const CONFIG: &str = r#"
[agent]
did = "did:web:localhost%3A8080"

[[capabilities]]
name = "echo_message"
description = "Echoes"
auth_requirement = "none"
input_schema = { type = "object", properties = { message = { type = "string" } }, required = ["message"] }
handler = { kind = "echo" }

[[capabilities]]
name = "echo_again"
description = "Echoes again"
auth_requirement = "none"
handler = { kind = "echo" }

[[composites]]
name = "echo_twice"
description = "Echoes, then echoes what came back"
auth_requirement = "none"
input_schema = { type = "object", properties = { message = { type = "string" } }, required = ["message"] }
steps = [
  { id = "first", capability = "echo_message" },
  { id = "second", capability = "echo_again", input = { said = "/steps/first/echo/message", n = { const = 2 } } },
]
"#;

#[tokio::test]
async fn composites_are_declared_in_the_configuration_file() {
    let path = std::path::Path::new("agent.toml");
    let cfg = a2a_agent::config::Config::parse(CONFIG, path).expect("parses");
    let (agent, _) = a2a_agent::app::build_from_config(&cfg, CONFIG, path).expect("builds");
    let agent = TestAgent::start_built(agent).await;
    let r = agent.run("echo_twice", text_schema_message(), json!({"message": "hi"})).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(r["result"]["output"], json!({"echo": {"said": "hi", "n": 2}}));

    // A malformed pipeline names the file, the line and the section.
    let bad = CONFIG.replace("id = \"second\"", "ident = \"second\"");
    let cfg = a2a_agent::config::Config::parse(&bad, path).expect("parses");
    let err = a2a_agent::app::build_from_config(&cfg, &bad, path).err().expect("refused");
    assert!(err.contains("agent.toml:") && err.contains("composites[0]") && err.contains("ident"), "{err}");
    // A broken chain is refused when the agent is built, naming the composite and the step.
    let bad = CONFIG.replace(
        "{ id = \"first\", capability = \"echo_message\" }",
        "{ id = \"first\", capability = \"echo_message\", input = { text = \"/input/message\" } }",
    );
    let cfg = a2a_agent::config::Config::parse(&bad, path).expect("parses");
    let err = a2a_agent::app::build_from_config(&cfg, &bad, path).err().expect("refused");
    assert!(err.contains("echo_twice") && err.contains("/composite/steps/0") && err.contains("`message`"), "{err}");
}

fn text_schema_message() -> Value {
    json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]})
}
