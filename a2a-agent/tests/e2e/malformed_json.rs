//! TR-7 over HTTP: a request body that is not well-formed JSON is `400 invalid_json` on every endpoint that reads a
//! JSON message, whatever the message would have been — also when the typed reading would have stopped earlier at
//! a member of the wrong shape (`{"target_capability":1`) or an unknown one (`{"a":`). The class is closed with a
//! property: every strict prefix of any JSON object text is `invalid_json`.

use std::time::Duration;

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::common::SENDER;

/// The demo agent (`a2a-server --demo`'s router) on a free loopback port; its base URL and a negotiation of
/// `echo_message` for EXECUTE.
struct Demo {
    base: String,
    negotiation: String,
    http: reqwest::Client,
    _runtime: tokio::runtime::Runtime,
}

impl Demo {
    fn start() -> Demo {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
        let (base, negotiation, http) = runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let port = listener.local_addr().expect("addr").port();
            let (_agent, app) = a2a_agent::app::demo_app(port).expect("demo app");
            tokio::spawn(async move { axum::serve(listener, app).await });
            let base = format!("http://127.0.0.1:{port}");
            let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("client");
            let neg: Value = http
                .post(format!("{base}/a2a/negotiate"))
                .header("A2A-Version", "0.3")
                .header("A2A-Sender-ID", SENDER)
                .json(&json!({"target_capability": "echo_message", "proposed_schema": {"type": "object",
                    "properties": {"message": {"type": "string"}}, "required": ["message"]}}))
                .send()
                .await
                .expect("negotiate")
                .json()
                .await
                .expect("json");
            let negotiation = neg["negotiation_id"].as_str().expect("negotiation_id").to_owned();
            (base, negotiation, http)
        });
        Demo { base, negotiation, http, _runtime: runtime }
    }

    /// POSTs `body` to `path` (EXECUTE with the negotiation); the status and error code of the answer.
    fn post(&self, path: &str, body: &[u8]) -> (u16, String, Value) {
        self._runtime.block_on(async {
            let mut rb = self
                .http
                .post(format!("{}{path}", self.base))
                .header("A2A-Version", "0.3")
                .header("A2A-Sender-ID", SENDER)
                .header("Content-Type", "application/json")
                .body(body.to_vec());
            if path == "/a2a/execute" {
                rb = rb.header("A2A-Negotiation-ID", &self.negotiation);
            }
            let resp = rb.send().await.expect("send");
            let status = resp.status().as_u16();
            let body: Value = resp.json().await.unwrap_or(Value::Null);
            (status, body["error"]["code"].as_str().unwrap_or("").to_owned(), body)
        })
    }
}

const ENDPOINTS: &[&str] = &["/a2a/negotiate", "/a2a/execute", "/a2a/confirm", "/a2a/cancel", "/a2a/fallback"];

fn assert_invalid_json(demo: &Demo, path: &str, body: &[u8]) {
    let (status, code, answer) = demo.post(path, body);
    assert_eq!(
        (status, code.as_str()),
        (400, "invalid_json"),
        "POST {path} {:?}: {answer}",
        String::from_utf8_lossy(body)
    );
}

#[test]
fn the_issues_examples_and_every_prefix_of_real_messages_are_invalid_json() {
    let demo = Demo::start();
    // The two bodies that were answered `invalid_request`: a truncation after an unknown member, and after a member
    // of the wrong type.
    for path in ENDPOINTS {
        assert_invalid_json(&demo, path, br#"{"a":"#);
        assert_invalid_json(&demo, path, br#"{"target_capability":1"#);
        assert_invalid_json(&demo, path, br#"{"execution_id":[1,2"#);
        assert_invalid_json(&demo, path, br#"{"target_capability":"x"} trailing"#);
    }
    // Every strict prefix of each endpoint's real message (the whole message is well-formed: not invalid_json).
    let messages: &[(&str, Value)] = &[
        (
            "/a2a/negotiate",
            json!({"target_capability": "submit_report", "proposed_schema": {"type": "object",
            "properties": {"title": {"type": "string", "description": "a \"quoted\" \u{e9} title"}}, "required": ["title"]},
            "timeout_ms": 30000}),
        ),
        ("/a2a/execute", json!({"message": "hello, \\ world", "n": [1.5e3, -2, true, null]})),
        ("/a2a/confirm", json!({"execution_id": "did:web:caller.example.com_1_abc"})),
        ("/a2a/cancel", json!({"execution_id": "did:web:caller.example.com_1_abc"})),
        ("/a2a/fallback", json!({"target_capability": "generate_summary"})),
    ];
    for (path, message) in messages {
        let text = serde_json::to_vec(message).expect("serialize");
        let (_, whole, answer) = demo.post(path, &text);
        assert_ne!(whole, "invalid_json", "the whole message is well-formed: {answer}");
        for end in 0..text.len() {
            // A prefix that cuts a UTF-8 sequence is not UTF-8, so not JSON either: invalid_json too.
            assert_invalid_json(&demo, path, &text[..end]);
        }
    }
}

/// Any JSON value (objects nested a few levels deep).
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1e9f64..1e9).prop_map(|n| json!(n)),
        "\\PC{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A JSON object, with the members of the protocol's messages among arbitrary ones (so that typed readings fail at
/// a member of the wrong shape before the end of the text).
fn json_object() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        "[a-z_]{1,10}",
        Just("target_capability".to_owned()),
        Just("execution_id".to_owned()),
        Just("proposed_schema".to_owned())
    ];
    prop::collection::vec((key, json_value()), 0..6).prop_map(|members| Value::Object(members.into_iter().collect()))
}

#[test]
fn any_truncation_of_a_json_object_is_invalid_json_on_every_endpoint() {
    let demo = Demo::start();
    let config = ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() };
    proptest!(config, |(object in json_object(), cut in any::<prop::sample::Index>(), endpoint in 0..ENDPOINTS.len())| {
        let text = serde_json::to_vec(&object).expect("serialize");
        // A strict prefix: everything but at least the closing brace.
        let end = cut.index(text.len());
        let (status, code, answer) = demo.post(ENDPOINTS[endpoint], &text[..end]);
        prop_assert_eq!((status, code.as_str()), (400, "invalid_json"),
            "POST {} {:?}: {}", ENDPOINTS[endpoint], String::from_utf8_lossy(&text[..end]), answer);
    });
}
