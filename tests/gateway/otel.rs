//! OpenTelemetry traces (OPS-6) received by a real OTLP/HTTP endpoint that decodes the protobuf export requests, from
//! real `a2a-gateway` and `a2a-server --demo` processes: one handshake is one trace, with one span per step at the
//! gateway (`a2a.gateway.<step>`) and one at the agent (`a2a.<step>`), each agent span a child of the gateway's, and
//! the trace id in the gateway's audit records and in the agent's log lines of the request.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;
use serde_json::{Value, json};

use crate::common::{TempDir, free_port};

/// A span as received: (service, name, trace id, span id, parent span id), ids in lower-case hex.
#[derive(Debug, Clone)]
struct Received {
    service: String,
    name: String,
    trace_id: String,
    span_id: String,
    parent: String,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// An OTLP/HTTP traces endpoint (`POST /v1/traces`, protobuf) on loopback; returns its base URL and what it got.
async fn otlp_receiver() -> (String, Arc<Mutex<Vec<Received>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let sink = got.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let sink = sink.clone();
            async move {
                let Ok(req) = ExportTraceServiceRequest::decode(body) else {
                    return (axum::http::StatusCode::BAD_REQUEST, Vec::new());
                };
                let mut spans = sink.lock().expect("lock");
                for rs in req.resource_spans {
                    let service = rs
                        .resource
                        .iter()
                        .flat_map(|r| r.attributes.iter())
                        .find(|kv| kv.key == "service.name")
                        .and_then(|kv| kv.value.as_ref())
                        .and_then(|v| match &v.value {
                            Some(opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(s)) => {
                                Some(s.clone())
                            }
                            _ => None,
                        })
                        .unwrap_or_default();
                    for span in rs.scope_spans.into_iter().flat_map(|s| s.spans) {
                        spans.push(Received {
                            service: service.clone(),
                            name: span.name,
                            trace_id: hex(&span.trace_id),
                            span_id: hex(&span.span_id),
                            parent: hex(&span.parent_span_id),
                        });
                    }
                }
                // An empty ExportTraceServiceResponse.
                (axum::http::StatusCode::OK, Vec::new())
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, got)
}

/// A process killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sibling_binary(name: &str) -> PathBuf {
    let dir = a2a_test_support::bin("a2a-gateway").parent().expect("target dir").to_path_buf();
    let path = dir.join(name);
    assert!(path.exists(), "{} is missing: `cargo test --workspace` builds it", path.display());
    path
}

fn otel_env(cmd: &mut Command, endpoint: &str) {
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env_remove("OTEL_SDK_DISABLED")
        .env_remove("OTEL_SERVICE_NAME")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("REDIS_URL");
}

/// Polls `url` until it answers `OPTIONS` with 204.
async fn wait_serving(http: &reqwest::Client, url: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(r) = http.request(reqwest::Method::OPTIONS, url).send().await
            && r.status() == 204
        {
            return;
        }
        assert!(Instant::now() < deadline, "{url} did not start serving");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_handshake_through_the_gateway_is_one_trace_with_a_span_per_step_at_each_hop() {
    let (otlp, received) = otlp_receiver().await;
    let dir = TempDir::new("a2a-otel");
    let http = reqwest::Client::new();

    // The demo agent, logging JSON lines at debug for its request spans.
    let agent_port = free_port();
    let mut cmd = Command::new(sibling_binary("a2a-server"));
    cmd.args(["--demo", "--listen", &format!("127.0.0.1:{agent_port}"), "--log-format", "json"])
        .env("RUST_LOG", "info,a2a_server=debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    otel_env(&mut cmd, &otlp);
    let mut agent = Proc(cmd.spawn().expect("a2a-server --demo starts"));
    let agent_log: Arc<Mutex<Vec<String>>> = Arc::default();
    {
        let stderr = agent.0.stderr.take().expect("stderr");
        let log = agent_log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                log.lock().expect("lock").push(line);
            }
        });
    }
    wait_serving(&http, &format!("http://127.0.0.1:{agent_port}/a2a")).await;

    // A transparent gateway in front of it, with an audit file.
    let gateway_port = free_port();
    let audit = dir.0.join("audit.jsonl");
    let config = dir.0.join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[gateway]\ndid = \"did:web:gateway.example.com\"\n\n[[agents]]\nurl = \"http://127.0.0.1:{agent_port}/a2a\"\n\n\
             [edge]\nverify_signatures = false\n\n[audit]\nfile = \"{}\"\n",
            audit.display()
        ),
    )
    .expect("write gateway.toml");
    let mut cmd = Command::new(sibling_binary("a2a-gateway"));
    cmd.arg("--config")
        .arg(&config)
        .args(["--listen", &format!("127.0.0.1:{gateway_port}")])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    otel_env(&mut cmd, &otlp);
    let gateway = Proc(cmd.spawn().expect("a2a-gateway starts"));
    let base = format!("http://127.0.0.1:{gateway_port}/a2a");
    wait_serving(&http, &base).await;

    // One handshake, in a trace the caller started.
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let traceparent = format!("00-{trace_id}-{caller_span}-01");
    let send = |method: reqwest::Method, path: &str, body: Option<Value>, negotiation: Option<&str>| {
        let mut rb = http
            .request(method, format!("{base}{path}"))
            .header("A2A-Version", "0.3")
            .header("A2A-Sender-ID", "did:web:caller.example.com")
            .header("traceparent", &traceparent);
        if let Some(n) = negotiation {
            rb = rb.header("A2A-Negotiation-ID", n);
        }
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        rb.send()
    };
    let schema = json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]});
    let r = send(
        reqwest::Method::POST,
        "/negotiate",
        Some(json!({"target_capability": "echo_message", "proposed_schema": schema})),
        None,
    )
    .await
    .expect("negotiate");
    assert_eq!(r.status(), 200);
    let negotiation: Value = r.json().await.expect("json");
    let n = negotiation["negotiation_id"].as_str().expect("negotiation_id").to_owned();
    let r = send(reqwest::Method::POST, "/execute", Some(json!({"message": "hi"})), Some(&n)).await.expect("execute");
    assert!(r.status().is_success(), "{}", r.status());
    let execution: Value = r.json().await.expect("json");
    let id = execution["execution_id"].as_str().expect("execution_id").to_owned();
    let r = send(reqwest::Method::POST, "/confirm", Some(json!({"execution_id": id})), None).await.expect("confirm");
    assert!(r.status().is_success(), "{}", r.status());
    let r = send(reqwest::Method::GET, &format!("/result/{id}?wait_ms=5000"), None, None).await.expect("result");
    assert_eq!(r.status(), 200);
    let result: Value = r.json().await.expect("json");
    assert_eq!(result["status"], "succeeded", "{result}");

    // The spans arrive (batched every 100 ms): one per step at each hop, all in the caller's trace.
    let steps = ["negotiate", "execute", "confirm", "result"];
    let wanted: Vec<String> =
        steps.iter().flat_map(|s| [format!("a2a.gateway.{s}"), format!("a2a.{s}")]).collect::<Vec<_>>();
    let deadline = Instant::now() + Duration::from_secs(30);
    let spans: BTreeMap<String, Received> = loop {
        let got = received.lock().expect("lock").clone();
        let by_name: BTreeMap<String, Received> =
            got.iter().filter(|s| s.trace_id == trace_id).map(|s| (s.name.clone(), s.clone())).collect();
        if wanted.iter().all(|w| by_name.contains_key(w)) {
            break by_name;
        }
        assert!(Instant::now() < deadline, "spans received: {got:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for s in steps {
        let at_gateway = &spans[&format!("a2a.gateway.{s}")];
        let at_agent = &spans[&format!("a2a.{s}")];
        assert_eq!(at_gateway.service, "a2a-gateway");
        assert_eq!(at_agent.service, "a2a-server");
        assert_eq!(at_gateway.parent, caller_span, "{s}: the gateway's span continues the caller's");
        assert_eq!(at_agent.parent, at_gateway.span_id, "{s}: the agent's span is a child of the gateway's");
    }
    let ids: std::collections::BTreeSet<&str> = spans.values().map(|s| s.span_id.as_str()).collect();
    assert_eq!(ids.len(), spans.len(), "one span per step and hop");

    // The trace id is in the gateway's audit records and in the agent's log lines of the request.
    // The audit writer appends in the background: wait for the records.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(&audit).unwrap_or_default();
        let records: Vec<Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        let recorded: Vec<&str> =
            records.iter().filter(|r| r["trace_id"] == trace_id).filter_map(|r| r["step"].as_str()).collect();
        if steps.iter().all(|s| recorded.contains(s)) {
            break;
        }
        assert!(Instant::now() < deadline, "no audit record of every step with the trace id: {records:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(gateway);
    let lines = agent_log.lock().expect("lock").clone();
    // The caller's requests (not the start-up polls, which have traces of their own).
    let answered: Vec<&String> =
        lines.iter().filter(|l| l.contains("request answered") && l.contains("did:web:caller.example.com")).collect();
    assert!(answered.len() >= 4, "the agent's request lines: {lines:#?}");
    for l in answered {
        assert!(l.contains(trace_id), "a log line of the request without its trace id: {l}");
    }
    drop(agent);
}
