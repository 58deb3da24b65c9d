//! What the specification decides where outsiders had to guess: a non-object `proposed_schema` (SCH-22), the
//! `Idempotency-Key` lookup after payload validation (EXE-9), `OPTIONS` below the endpoint (DISC-13), `Allow` on
//! every 405 (ERR-3) and the offset of an `invalid_json` answer (JCS-25). The did:web check order (DID-33) is
//! tested with the real resolver in `resolve.rs`.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::{TestAgent, report_schema, standard};

async fn agent() -> TestAgent {
    TestAgent::start(standard(Arc::new(AtomicUsize::new(0)))).await
}

#[tokio::test]
async fn a_proposed_schema_that_is_not_an_object_is_422_root_not_object_at_the_root() {
    let t = agent().await;
    for proposed in [json!([]), json!([{"type": "object"}]), json!("object"), json!(5), json!(true), Value::Null] {
        let a = t.negotiate("submit_report", proposed.clone()).await;
        assert_eq!(
            (a.status, a.code()),
            (StatusCode::UNPROCESSABLE_ENTITY, "schema_rule_violation"),
            "proposed_schema {proposed}: {}",
            a.body
        );
        assert_eq!(
            a.body["error"]["details"]["violations"],
            json!([{"rule": "root_not_object", "path": "", "message": a.body["error"]["details"]["violations"][0]["message"]}]),
            "proposed_schema {proposed}"
        );
    }
    // A missing member is the malformed request of TR-7.
    let a = t.post("/a2a/negotiate", json!({"target_capability": "submit_report"})).await;
    assert_eq!((a.status, a.code()), (StatusCode::BAD_REQUEST, "invalid_request"), "{}", a.body);
}

async fn execute_with_key(t: &TestAgent, neg: &str, key: &str, payload: Value) -> crate::common::Answer {
    t.send(
        t.req(Method::POST, "/a2a/execute")
            .header("A2A-Negotiation-ID", neg)
            .header("Idempotency-Key", key)
            .json(&payload),
    )
    .await
}

#[tokio::test]
async fn an_invalid_payload_is_422_whatever_its_idempotency_key_and_does_not_disturb_the_key() {
    let t = agent().await;
    let neg = t.negotiated("submit_report", report_schema()).await;
    let good = json!({"title": "Lift 3", "timestamp": "2026-11-29T21:00:00Z"});
    let first = execute_with_key(&t, &neg, "exe-9-key", good.clone()).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    let id = first.body["execution_id"].clone();
    // The key with another payload that is invalid: the payload is judged first (EXE-9), not the key (EXE-7's 409).
    let bad = execute_with_key(&t, &neg, "exe-9-key", json!({"title": 5})).await;
    assert_eq!((bad.status, bad.code()), (StatusCode::UNPROCESSABLE_ENTITY, "payload_invalid"), "{}", bad.body);
    // An unused key with an invalid payload is not claimed: the key still works for a valid request afterwards.
    let bad = execute_with_key(&t, &neg, "exe-9-fresh", json!({})).await;
    assert_eq!((bad.status, bad.code()), (StatusCode::UNPROCESSABLE_ENTITY, "payload_invalid"), "{}", bad.body);
    let fresh = execute_with_key(&t, &neg, "exe-9-fresh", good.clone()).await;
    assert_eq!(fresh.status, StatusCode::CREATED, "{}", fresh.body);
    // The refused requests changed nothing the first key is bound to: the replay is the original execution.
    let replay = execute_with_key(&t, &neg, "exe-9-key", good.clone()).await;
    assert_eq!(replay.status, StatusCode::OK, "{}", replay.body);
    assert_eq!(replay.body["execution_id"], id);
    // A valid but different payload is the conflict of EXE-7.
    let other =
        execute_with_key(&t, &neg, "exe-9-key", json!({"title": "Lift 4", "timestamp": "2026-11-29T21:00:00Z"})).await;
    assert_eq!((other.status, other.code()), (StatusCode::CONFLICT, "idempotency_conflict"), "{}", other.body);
    // An unknown negotiation is refused before the key is looked at.
    let gone = execute_with_key(&t, "n_no_such_negotiation", "exe-9-key", good).await;
    assert_eq!((gone.status, gone.code()), (StatusCode::NOT_FOUND, "unknown_negotiation"), "{}", gone.body);
}

#[tokio::test]
async fn options_on_an_endpoint_is_204_with_allow_and_on_an_unknown_path_404_unless_a_preflight() {
    let t = agent().await;
    for (path, allow) in [
        ("/a2a/negotiate", "POST, OPTIONS"),
        ("/a2a/execute", "POST, OPTIONS"),
        ("/a2a/confirm", "POST, OPTIONS"),
        ("/a2a/cancel", "POST, OPTIONS"),
        ("/a2a/fallback", "POST, OPTIONS"),
        ("/a2a/capabilities", "GET, OPTIONS"),
        ("/a2a/result/x", "GET, OPTIONS"),
    ] {
        // No A2A-Version, no sender, no Origin: a plain OPTIONS.
        let r = t.http.request(Method::OPTIONS, t.url(path)).send().await.expect("OPTIONS");
        assert_eq!(r.status(), StatusCode::NO_CONTENT, "OPTIONS {path}");
        let h = r.headers();
        assert_eq!(h.get("allow").and_then(|v| v.to_str().ok()), Some(allow), "OPTIONS {path}");
        assert!(h.get("a2a-capabilities").is_none(), "OPTIONS {path} answered as DISCOVER");
        assert_eq!(h.get("a2a-version").and_then(|v| v.to_str().ok()), Some("0.3"), "OPTIONS {path}");
        // The 405 on the same path carries the same list (ERR-3).
        let m = t.send(t.req(Method::PUT, path)).await;
        assert_eq!((m.status, m.code()), (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"), "PUT {path}");
        assert_eq!(m.header("allow"), Some(allow), "PUT {path}");
        // A preflight there gets the CORS headers too.
        let p = t
            .http
            .request(Method::OPTIONS, t.url(path))
            .header("Origin", "https://app.example")
            .header("Access-Control-Request-Method", "POST")
            .send()
            .await
            .expect("preflight");
        assert_eq!(p.status(), StatusCode::NO_CONTENT, "preflight {path}");
        assert!(p.headers().get("access-control-allow-headers").is_some(), "preflight {path}");
        assert_eq!(p.headers().get("allow").and_then(|v| v.to_str().ok()), Some(allow), "preflight {path}");
    }
    let r = t.send(t.http.request(Method::OPTIONS, t.url("/a2a/no-such-endpoint"))).await;
    assert_eq!((r.status, r.code()), (StatusCode::NOT_FOUND, "not_found"), "{}", r.body);
    let p = t
        .http
        .request(Method::OPTIONS, t.url("/a2a/no-such-endpoint"))
        .header("Origin", "https://app.example")
        .header("Access-Control-Request-Method", "POST")
        .send()
        .await
        .expect("preflight");
    assert_eq!(p.status(), StatusCode::NO_CONTENT);
    assert!(p.headers().get("access-control-allow-methods").is_some());
}
