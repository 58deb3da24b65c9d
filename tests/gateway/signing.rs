//! Signed answers through the gateway (GW-15): an agent built with `sign_responses` signs for the DID the gateway
//! forwarded as; the gateway verifies that signature as the caller it is, never passes it on, and signs the answer
//! itself for its caller (or answers unsigned without a key). An answer whose signature does not verify is `502`.

use a2a_client::{Client, ClientConfig, Identity, ResponseVerification};
use a2a_core::capability::AuthRequirement;
use a2a_core::did::{Did, DidDocument};
use a2a_core::integrity::{self, MessageParts};
use a2a_core::keys::SigningKey;
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::common::{CLIENT, Caller, GATEWAY, KEY_ID, Sign, TestAgent, TestGateway, World, decl, now};

/// An agent that signs its responses with `signing`, while its DID document (in the world's resolver) lists
/// `published`: the same key for an honest agent, another for a forger.
fn signing_agent(name: &str, world: &World, signing: &SigningKey, published: &SigningKey) -> TestAgent {
    let did = Did::parse(&format!("did:web:{name}.example.com")).expect("did");
    world
        .resolver
        .insert(&did, DidDocument::generate(&did, &[(KEY_ID.to_owned(), published.verifying_key().to_jwk())]));
    let key = signing.clone();
    TestAgent::start_with(name, vec![decl("file_report", AuthRequirement::None)], world, move |b| {
        b.sign_responses(KEY_ID, key)
    })
}

/// A raw request to the gateway: the status, every header and the exact body bytes.
async fn raw(
    http: &reqwest::Client,
    base: &str,
    method: &str,
    target: &str,
    extra: &[(&str, &str)],
    body: Option<&Value>,
) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let m = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut rb =
        http.request(m, format!("{base}{target}")).header("a2a-version", "0.3").header("a2a-sender-id", CLIENT);
    for (k, v) in extra {
        rb = rb.header(*k, *v);
    }
    if let Some(b) = body {
        rb = rb.header("content-type", "application/json").body(serde_json::to_vec(b).expect("json"));
    }
    let resp = rb.send().await.expect("request");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.bytes().await.expect("body").to_vec())
}

/// A raw NEGOTIATE of `file_report` (with a `title` schema) at `base`, with `extra` headers.
async fn negotiate(
    http: &reqwest::Client,
    base: &str,
    extra: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    raw(http, base, "POST", "/a2a/negotiate", extra, Some(&file_report_negotiation())).await
}

/// The NEGOTIATE body of `file_report` with a `title` schema.
fn file_report_negotiation() -> Value {
    let schema = json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]});
    json!({"target_capability": "file_report", "proposed_schema": schema})
}

/// Verifies the one `A2A-Signature` of an answer as a caller does (CLI-10): `iss` the gateway, `aud` the client,
/// `htm`/`htu` of the client's request, `sts` its status, with the gateway's key. Returns the verified claims.
fn verify_as_client(
    world: &World,
    method: &str,
    target: &str,
    answer: &(u16, reqwest::header::HeaderMap, Vec<u8>),
) -> Result<integrity::SignatureClaims, integrity::IntegrityError> {
    let (status, headers, body) = answer;
    let sigs: Vec<_> = headers.get_all("a2a-signature").iter().collect();
    assert_eq!(sigs.len(), 1, "exactly one A2A-Signature: {headers:?}");
    let token = sigs[0].to_str().expect("ascii");
    let list: Vec<(&str, &str)> =
        headers.iter().filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str(), v))).collect();
    let parts = MessageParts { method, target, headers: &list, body, status: Some(*status) };
    let pending = integrity::prepare(token, &parts, CLIENT, now())?;
    assert_eq!(pending.did(), GATEWAY, "signed by the gateway, never by the agent");
    pending.finish(world.gateway_key.verifying_key(), &parts).map(|v| v.claims().clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_with_default_verification_completes_a_handshake_through_the_gateway_to_a_signing_agent() {
    let world = World::new();
    let agent_key = SigningKey::generate().expect("key");
    let agent = signing_agent("signer", &world, &agent_key, &agent_key);
    let gw = TestGateway::start(&[&agent], &world, "").await;
    // Default verification (IfSigned): every signed answer must verify as signed by the gateway's DID for the client.
    let client = Client::builder(Identity::unsigned(CLIENT).expect("did"))
        .config(ClientConfig::default())
        .resolver(world.resolver.clone())
        .build()
        .expect("client");
    let o = client.call(&format!("{}/a2a", gw.base), "file_report", json!({"title": "t"})).await.expect("handshake");
    assert_eq!(o.agent, GATEWAY);
    assert_eq!(o.result["agent"], json!(agent.did));
    assert_eq!(gw.metric("a2a_gateway_upstream_errors_total", &[("reason", "response_signature")]), 0.0);
}

/// A request the gateway answers itself: method, target, extra headers, body, the status it answers.
type OwnAnswer = (&'static str, &'static str, &'static [(&'static str, &'static str)], Option<Value>, u16);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateways_own_answers_are_signed_so_a_client_that_requires_signatures_gets_through() {
    let world = World::new();
    let agent_key = SigningKey::generate().expect("key");
    let agent = signing_agent("signer", &world, &agent_key, &agent_key);
    let gw = TestGateway::start(&[&agent], &world, "").await;
    let http = reqwest::Client::new();
    // DISCOVER (no body: header_only), the capabilities document, and refusals the gateway makes itself: a step
    // naming an unknown negotiation, an unknown path, a wrong method.
    let cases: [OwnAnswer; 5] = [
        ("OPTIONS", "/a2a", &[], None, 204),
        ("GET", "/a2a/capabilities", &[], None, 200),
        ("POST", "/a2a/execute", &[("a2a-negotiation-id", "nope")], Some(json!({"title": "t"})), 404),
        ("GET", "/a2a/nothing-here", &[], None, 404),
        ("DELETE", "/a2a/negotiate", &[], None, 405),
    ];
    for (method, target, extra, body, status) in cases {
        let answer = raw(&http, &gw.base, method, target, extra, body.as_ref()).await;
        assert_eq!(answer.0, status, "{method} {target}: {}", String::from_utf8_lossy(&answer.2));
        let claims = verify_as_client(&world, method, target, &answer).expect("the gateway's answer verifies");
        assert_eq!((claims.iss.as_str(), claims.aud.as_str(), claims.sts), (GATEWAY, CLIENT, Some(status)));
    }
    // A request naming no DID has no audience: unsigned, as an agent answers it (INT-10).
    let anonymous = http.request(reqwest::Method::OPTIONS, format!("{}/a2a", gw.base)).send().await.expect("send");
    assert!(anonymous.headers().get("a2a-signature").is_none());
    // So a client that refuses unsigned answers completes the handshake through the gateway.
    let mut config = ClientConfig::default();
    config.response_verification = ResponseVerification::Required;
    let client = Client::builder(Identity::unsigned(CLIENT).expect("did"))
        .config(config)
        .resolver(world.resolver.clone())
        .build()
        .expect("client");
    let o = client.call(&format!("{}/a2a", gw.base), "file_report", json!({"title": "t"})).await.expect("handshake");
    assert_eq!(o.agent, GATEWAY);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_forwarded_answer_is_signed_by_the_gateway_for_the_callers_request_and_the_agents_never_passes() {
    let world = World::new();
    let agent_key = SigningKey::generate().expect("key");
    let agent = signing_agent("signer", &world, &agent_key, &agent_key);
    let gw = TestGateway::start(&[&agent], &world, "").await;
    let http = reqwest::Client::new();
    let n = negotiate(&http, &gw.base, &[]).await;
    assert_eq!(n.0, 200);
    let claims = verify_as_client(&world, "POST", "/a2a/negotiate", &n).expect("NEGOTIATE answer verifies");
    assert_eq!((claims.iss.as_str(), claims.aud.as_str(), claims.sts), (GATEWAY, CLIENT, Some(200)));
    assert_eq!(claims.message_integrity.coverage, integrity::Coverage::FullPayload);
    let neg: Value = serde_json::from_slice(&n.2).expect("json");
    let neg = neg["negotiation_id"].as_str().expect("id").to_owned();
    let e = raw(&http, &gw.base, "POST", "/a2a/execute", &[("a2a-negotiation-id", &neg)], Some(&json!({"title": "t"})))
        .await;
    assert_eq!(e.0, 201);
    verify_as_client(&world, "POST", "/a2a/execute", &e).expect("EXECUTE answer verifies");
    let id = serde_json::from_slice::<Value>(&e.2).expect("json")["execution_id"].as_str().expect("id").to_owned();
    let c = raw(&http, &gw.base, "POST", "/a2a/confirm", &[], Some(&json!({"execution_id": id}))).await;
    assert_eq!(c.0, 202);
    verify_as_client(&world, "POST", "/a2a/confirm", &c).expect("CONFIRM answer verifies");
    let seg = a2a_core::execution_id::ExecutionId::parse(&id).expect("id").to_path_segment();
    let target = format!("/a2a/result/{seg}?wait_ms=20000");
    let r = raw(&http, &gw.base, "GET", &target, &[], None).await;
    assert_eq!(r.0, 200, "{}", String::from_utf8_lossy(&r.2));
    let claims = verify_as_client(&world, "GET", &target, &r).expect("RESULT answer verifies");
    assert_eq!(claims.htu, target, "htu is the caller's target, not the agent's");
    // The signature is bound to the caller's request: another target, another audience or a changed body fail.
    assert!(verify_as_client(&world, "GET", "/a2a/result/other", &r).is_err());
    let mut tampered = r.clone();
    tampered.2.push(b' ');
    assert!(verify_as_client(&world, "GET", &target, &tampered).is_err());
    // An agent's error answer (signed by the agent) is signed by the gateway too.
    let u = raw(&http, &gw.base, "POST", "/a2a/execute", &[("a2a-negotiation-id", &neg)], Some(&json!({"x": 1}))).await;
    assert!(u.0 >= 400, "{} {}", u.0, String::from_utf8_lossy(&u.2));
    verify_as_client(&world, "POST", "/a2a/execute", &u).expect("error answer verifies");

    // A signed caller: the gateway re-signs the request (GW-8), the agent signs for the gateway, and the gateway
    // verifies with itself as the audience before signing for the caller.
    let caller = Caller::new(&gw.base);
    let sign = Sign::With { key: &world.client_key, aud: GATEWAY, skew: 0, lifetime: 60 };
    let last = caller.handshake("file_report", sign).await;
    assert_eq!(last.body["result"]["agent"], json!(agent.did));
    let sig = last.header("a2a-signature").expect("signed");
    let (header, _) = sig.split_once('.').expect("jws");
    let header: Value =
        serde_json::from_slice(&a2a_core::jws::base64url_decode(header).expect("b64")).expect("header json");
    assert_eq!(header["kid"], json!(format!("{GATEWAY}#{KEY_ID}")));
    assert_eq!(gw.metric("a2a_gateway_upstream_errors_total", &[("reason", "response_signature")]), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_whose_signature_does_not_verify_is_a_502_and_nothing_of_it_passes() {
    let world = World::new();
    let (signing, published) = (SigningKey::generate().expect("key"), SigningKey::generate().expect("key"));
    let forger = signing_agent("forger", &world, &signing, &published);
    let gw = TestGateway::start(&[&forger], &world, "").await;
    let caller = Caller::new(&gw.base);
    let n = caller.send("POST", "/a2a/negotiate", &[], Some(&file_report_negotiation()), Sign::No).await;
    assert_eq!((n.status, n.code()), (502, "agent_unavailable"), "{}", n.body);
    assert_eq!(n.body["error"]["details"]["reason"], json!("response_signature"), "{}", n.body);
    assert_eq!(n.body["error"]["details"]["signature_error"], json!("signature_invalid"), "{}", n.body);
    assert!(n.body.get("negotiation_id").is_none() && n.header("a2a-negotiation-id").is_none(), "{}", n.body);
    assert_eq!(gw.metric("a2a_gateway_upstream_errors_total", &[("reason", "response_signature")]), 1.0);
    // The refusal is the gateway's own answer, signed by the gateway (never by the agent).
    let again = negotiate(&reqwest::Client::new(), &gw.base, &[]).await;
    assert_eq!(again.0, 502);
    let claims = verify_as_client(&world, "POST", "/a2a/negotiate", &again).expect("the gateway's refusal verifies");
    assert_eq!((claims.iss.as_str(), claims.sts), (GATEWAY, Some(502)));
    let honest_key = SigningKey::generate().expect("key");
    let honest = signing_agent("honest", &world, &honest_key, &honest_key);
    let gw2 = TestGateway::start(&[&honest], &world, "").await;
    let ok =
        Caller::new(&gw2.base).send("POST", "/a2a/negotiate", &[], Some(&file_report_negotiation()), Sign::No).await;
    assert_eq!(ok.status, 200, "the same request to an honest agent passes: {}", ok.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_without_a_key_verifies_and_answers_unsigned() {
    let world = World::new();
    let agent_key = SigningKey::generate().expect("key");
    let agent = signing_agent("signer", &world, &agent_key, &agent_key);
    let gw = TestGateway::start_keyed(&[&agent], &world, "[edge]\nverify_signatures = false\n", false).await;
    let http = reqwest::Client::new();
    let n = negotiate(&http, &gw.base, &[]).await;
    assert_eq!(n.0, 200, "{}", String::from_utf8_lossy(&n.2));
    assert!(n.1.get("a2a-signature").is_none(), "unsigned: {:?}", n.1);
    let client = Client::builder(Identity::unsigned(CLIENT).expect("did"))
        .resolver(world.resolver.clone())
        .build()
        .expect("client");
    client.call(&format!("{}/a2a", gw.base), "file_report", json!({"title": "t"})).await.expect("handshake");
    // Without a key it still verifies: a forger behind it is refused.
    let (signing, published) = (SigningKey::generate().expect("key"), SigningKey::generate().expect("key"));
    let forger = signing_agent("forger", &world, &signing, &published);
    let gw2 = TestGateway::start_keyed(&[&forger], &world, "[edge]\nverify_signatures = false\n", false).await;
    let f = negotiate(&http, &gw2.base, &[]).await;
    let body: Value = serde_json::from_slice(&f.2).expect("json");
    assert_eq!((f.0, body["error"]["code"].as_str()), (502, Some("agent_unavailable")), "{body}");
}

/// A streaming agent that signs its responses (STR-7), its key published; a terminal execution through `gw`; the
/// stream of its RESULT as the gateway passes it, with the target asked for. `forge`: before the stream, the agent's
/// DID document is replaced by one listing another key, so that its event signature no longer verifies.
async fn streamed_result(world: &World, keyed: bool, forge: bool) -> (String, String, TestGateway, TestAgent) {
    let name = if keyed { "streamer" } else { "streamer-nokey" };
    let did = Did::parse(&format!("did:web:{name}.example.com")).expect("did");
    let key = SigningKey::generate().expect("key");
    world.resolver.insert(&did, DidDocument::generate(&did, &[(KEY_ID.to_owned(), key.verifying_key().to_jwk())]));
    let agent = TestAgent::start_with(name, vec![decl("file_report", AuthRequirement::None)], world, move |b| {
        b.sign_responses(KEY_ID, key).streaming(a2a_server::streaming::StreamConfig {
            enabled: true,
            poll_ms: 20,
            ..Default::default()
        })
    });
    let extra = if keyed { "" } else { "[edge]\nverify_signatures = false\n" };
    let gw = TestGateway::start_keyed(&[&agent], world, extra, keyed).await;
    let result = Caller::new(&gw.base).handshake("file_report", Sign::No).await;
    let id = result.body["execution_id"].as_str().expect("id").to_owned();
    let target =
        format!("/a2a/result/{}", a2a_core::execution_id::ExecutionId::parse(&id).expect("id").to_path_segment());
    if forge {
        let other = SigningKey::generate().expect("key");
        world
            .resolver
            .insert(&did, DidDocument::generate(&did, &[(KEY_ID.to_owned(), other.verifying_key().to_jwk())]));
    }
    let sent = reqwest::Client::new()
        .get(format!("{}{target}", gw.base))
        .header("a2a-version", "0.3")
        .header("a2a-sender-id", CLIENT)
        .header("a2a-stream", "true")
        .send()
        .await;
    let ids = format!("{id}\n{target}");
    // A cut stream may end before its head was sent (everything was in one chunk from the agent).
    let resp = match sent {
        Ok(r) => r,
        Err(e) if forge => return (format!("cut: {e}"), ids, gw, agent),
        Err(e) => panic!("stream: {e}"),
    };
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    assert!(resp.headers().get("a2a-signature").is_none(), "a stream has no A2A-Signature (STR-7)");
    let mut text = String::new();
    let mut body = resp.bytes_stream();
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(b) => text.push_str(std::str::from_utf8(&b).expect("utf-8")),
            Err(e) if forge => {
                text.push_str(&format!("\ncut: {e}"));
                break;
            }
            Err(e) => panic!("stream: {e}"),
        }
    }
    (text, ids, gw, agent)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streams_result_event_is_signed_by_the_gateway_for_the_caller() {
    let world = World::new();
    let (text, id_target, _gw, _agent) = streamed_result(&world, true, false).await;
    let (id, target) = id_target.split_once('\n').expect("id and target");
    let sigs: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("signature: ")).collect();
    assert_eq!(sigs.len(), 1, "one signature, the gateway's, on the result event: {text}");
    let event = text.split("\n\n").find(|e| e.contains("event: result")).expect("a result event");
    let data = event.lines().find_map(|l| l.strip_prefix("data: ")).expect("data");
    assert!(data.contains("succeeded"), "{data}");
    let headers = [("a2a-version", "0.3"), ("a2a-sender-id", GATEWAY), ("a2a-execution-id", id)];
    let parts = MessageParts { method: "GET", target, headers: &headers, body: data.as_bytes(), status: Some(200) };
    let pending = integrity::prepare(sigs[0], &parts, CLIENT, now()).expect("addressed to the client");
    assert_eq!(pending.did(), GATEWAY);
    pending.finish(world.gateway_key.verifying_key(), &parts).expect("the result event's signature verifies");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_a_streams_result_event_passes_unsigned() {
    let world = World::new();
    let (text, _, _gw, _agent) = streamed_result(&world, false, false).await;
    assert!(!text.contains("signature"), "the agent's signature is removed: {text}");
    let event = text.split("\n\n").find(|e| e.contains("event: result")).expect("a result event, verified");
    assert!(event.contains("data: "), "{event}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_whose_result_signature_does_not_verify_is_cut_before_the_result() {
    let world = World::new();
    let (text, _, gw, _agent) = streamed_result(&world, true, true).await;
    assert!(!text.contains("signature"), "{text}");
    let result = text.split("\n\n").find(|e| e.contains("event: result")).unwrap_or("");
    assert!(!result.contains("data: "), "the result's data never passes: {text}");
    assert_eq!(gw.metric("a2a_gateway_upstream_errors_total", &[("reason", "response_signature")]), 1.0);
}
