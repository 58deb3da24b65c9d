//! Authentication per capability (`spec/PROTOCOL.md` §10) and message integrity (§9.5), over HTTP with real keys.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use a2a_core::capability::AuthRequirement;
use a2a_core::did::{Did, DidDocument};
use a2a_core::integrity::{self, Coverage, MessageParts};
use a2a_core::jws::{self, JwsHeader};
use a2a_core::keys::SigningKey;
use a2a_core::resolver::StaticResolver;
use a2a_server::handler::ExecutionContext;
use a2a_server::{AgentBuilder, ApiKey, OAuth2};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::{Answer, SENDER, TestAgent, decl};

const AGENT: &str = "did:web:agent.example.com";

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs() as i64
}

struct Fixture {
    t: TestAgent,
    key: SigningKey,
}

/// An agent with a `did_auth` capability (which echoes whether the sender was verified), an `api_key` one and an
/// `oauth2` one; the caller's DID document (key `key-1`, plus a P-384 key `key-384`) is known to its resolver.
async fn fixture(issuer: &SigningKey) -> Fixture {
    let key = SigningKey::generate().expect("key");
    let p384 = json!({"kty": "EC", "crv": "P-384",
        "x": "iA7lWQLzVrKGEFjfGMfMHfTEZ2KnLiKU7JuNT3E7ygsfE7ygAaBDHMjT6DJH2wJU",
        "y": "eNFAxV2JsBPqu4BRd2pTYHpdT3hd6pY6qUy8FyHoD2Ns0-XXZgPovVXN8o-ZUvYH"});
    let did = Did::parse(SENDER).expect("did");
    let doc = DidDocument::generate(
        &did,
        &[("key-1".to_owned(), key.verifying_key().to_jwk()), ("key-384".to_owned(), p384)],
    );
    let resolver = StaticResolver::new();
    resolver.insert(&did, doc);
    let mut secure = decl("sign_document", json!({"type": "object"}));
    secure.auth_requirement = AuthRequirement::DidAuth;
    let mut keyed = decl("process_payment", json!({"type": "object"}));
    keyed.auth_requirement = AuthRequirement::ApiKey;
    let mut oauth = decl("read_ledger", json!({"type": "object"}));
    oauth.auth_requirement = AuthRequirement::Oauth2;
    let builder = AgentBuilder::new(AGENT)
        .capability(secure, |ctx: ExecutionContext, _p: Value| async move {
            Ok(json!({"verified": ctx.sender_verified, "sender": ctx.sender}))
        })
        .capability(keyed, a2a_server::handler::builtin::echo())
        .capability(oauth, a2a_server::handler::builtin::echo())
        .api_key(ApiKey::new("k-good"))
        .api_key(ApiKey::new("k-bound").for_senders(vec!["did:web:someone-else.example.com".into()]))
        .oauth2(OAuth2 {
            issuer: "https://issuer.example.com".into(),
            audience: None,
            keys: vec![issuer.verifying_key().clone()],
            required_scopes: Default::default(),
        })
        .resolver(Arc::new(resolver));
    Fixture { t: TestAgent::start(builder).await, key }
}

/// How to spoil a signature.
#[derive(Clone, Copy, PartialEq)]
enum Spoil {
    None,
    ExpiredBy340s,
    IssuedInTheFuture,
    Lifetime301,
    OtherIssuer,
    OtherAudience,
    UnknownKeyId,
    P384KeyId,
    WrongKey,
    TamperBody,
    HeaderOnly,
}

impl Fixture {
    /// Sends a signed POST (or GET when body is None).
    async fn signed(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        extra: &[(&str, &str)],
        spoil: Spoil,
    ) -> Answer {
        let body_bytes = body.as_ref().map(|b| serde_json::to_vec(b).expect("json")).unwrap_or_default();
        let mut headers: Vec<(&str, &str)> = vec![("a2a-version", "0.3"), ("a2a-sender-id", SENDER)];
        headers.extend_from_slice(extra);
        let parts =
            MessageParts { method: method.as_str(), target: path, headers: &headers, body: &body_bytes, status: None };
        let coverage = if spoil == Spoil::HeaderOnly { Coverage::HeaderOnly } else { Coverage::PayloadHash };
        let issued = match spoil {
            Spoil::ExpiredBy340s => now() - 400,
            Spoil::IssuedInTheFuture => now() + 100,
            _ => now(),
        };
        let key_id = match spoil {
            Spoil::UnknownKeyId => "key-9",
            Spoil::P384KeyId => "key-384",
            _ => "key-1",
        };
        let audience = if spoil == Spoil::OtherAudience { "did:web:other-agent.example.com" } else { AGENT };
        let mut claims =
            integrity::build_claims(key_id, SENDER, audience, coverage, &parts, issued, 60).expect("claims");
        if spoil == Spoil::Lifetime301 {
            claims.exp = claims.iat + 301;
        }
        if spoil == Spoil::OtherIssuer {
            claims.iss = "did:web:mallory.example.com".into();
        }
        let signer = if spoil == Spoil::WrongKey { SigningKey::generate().expect("key") } else { self.key.clone() };
        let token = integrity::sign_claims(&signer, &claims).expect("sign");
        let sent_body = if spoil == Spoil::TamperBody {
            let mut b = body.clone().expect("body");
            b["proposed_schema"]["description"] = json!("tampered after signing");
            serde_json::to_vec(&b).expect("json")
        } else {
            body_bytes.clone()
        };
        let mut rb = self.t.http.request(method.clone(), self.t.url(path)).header("A2A-Signature", token);
        for (k, v) in &headers {
            rb = rb.header(*k, *v);
        }
        if body.is_some() {
            rb = rb.header("Content-Type", "application/json").body(sent_body);
        }
        self.t.send(rb).await
    }

    async fn negotiate_signed(&self, spoil: Spoil) -> Answer {
        self.signed(
            Method::POST,
            "/a2a/negotiate",
            Some(json!({"target_capability": "sign_document", "proposed_schema": {"type": "object"}})),
            &[],
            spoil,
        )
        .await
    }
}

#[tokio::test]
async fn signed_handshake_on_a_did_auth_capability_runs_with_a_verified_sender() {
    let f = fixture(&SigningKey::generate().expect("key")).await;
    let n = f.negotiate_signed(Spoil::None).await;
    assert_eq!(n.status, StatusCode::OK, "{}", n.body);
    assert_eq!(n.body["auth_requirement"], json!("did_auth"));
    let neg = n.body["negotiation_id"].as_str().expect("id").to_owned();
    let e = f
        .signed(Method::POST, "/a2a/execute", Some(json!({"x": 1})), &[("a2a-negotiation-id", &neg)], Spoil::None)
        .await;
    assert_eq!(e.status, StatusCode::CREATED, "{}", e.body);
    let exe = e.body["execution_id"].as_str().expect("id").to_owned();
    let c = f.signed(Method::POST, "/a2a/confirm", Some(json!({"execution_id": exe})), &[], Spoil::None).await;
    assert_eq!(c.status, StatusCode::ACCEPTED, "{}", c.body);
    let seg = a2a_core::execution_id::ExecutionId::parse(&exe).expect("id").to_path_segment();
    let r = f.signed(Method::GET, &format!("/a2a/result/{seg}?wait_ms=5000"), None, &[], Spoil::HeaderOnly).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["result"], json!({"verified": true, "sender": SENDER}));
}

#[tokio::test]
async fn every_signature_failure_is_refused_with_its_code_and_counted() {
    let f = fixture(&SigningKey::generate().expect("key")).await;
    let unsigned = f.t.negotiate("sign_document", json!({"type": "object"})).await;
    assert_eq!((unsigned.status, unsigned.code()), (StatusCode::UNAUTHORIZED, "signature_required"));
    let cases = [
        (Spoil::ExpiredBy340s, "signature_expired"),
        (Spoil::IssuedInTheFuture, "signature_not_yet_valid"),
        (Spoil::Lifetime301, "signature_lifetime_exceeded"),
        (Spoil::OtherIssuer, "sender_mismatch"),
        (Spoil::OtherAudience, "audience_mismatch"),
        (Spoil::UnknownKeyId, "unknown_key"),
        (Spoil::P384KeyId, "unsupported_key_type"),
        (Spoil::WrongKey, "signature_invalid"),
        (Spoil::TamperBody, "integrity_mismatch"),
        (Spoil::HeaderOnly, "integrity_mismatch"),
    ];
    for (spoil, code) in cases {
        let a = f.negotiate_signed(spoil).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{code}: {}", a.body);
        assert_eq!(a.code(), code, "{}", a.body);
    }
    let garbage =
        f.t.send(
            f.t.req(Method::POST, "/a2a/negotiate")
                .header("A2A-Signature", "not.a.jws")
                .json(&json!({"target_capability": "sign_document", "proposed_schema": {}})),
        )
        .await;
    assert_eq!(garbage.code(), "signature_malformed");
    let hs256 = format!(
        "{}.{}.{}",
        jws::base64url_encode(br#"{"alg":"HS256","typ":"a2a-sig+jwt","kid":"did:web:caller.example.com#key-1"}"#),
        jws::base64url_encode(br#"{"iss":"did:web:caller.example.com"}"#),
        jws::base64url_encode([0u8; 32])
    );
    let a =
        f.t.send(
            f.t.req(Method::POST, "/a2a/negotiate")
                .header("A2A-Signature", hs256)
                .json(&json!({"target_capability": "sign_document", "proposed_schema": {}})),
        )
        .await;
    assert_eq!(a.code(), "unsupported_algorithm");
    // A DID the agent cannot resolve.
    let stranger =
        f.t.send(
            f.t.http
                .post(f.t.url("/a2a/negotiate"))
                .header("A2A-Version", "0.3")
                .header("A2A-Sender-ID", "did:web:stranger.example.com")
                .header("A2A-Signature", {
                    let headers = [("a2a-version", "0.3"), ("a2a-sender-id", "did:web:stranger.example.com")];
                    let body = br#"{"target_capability":"sign_document","proposed_schema":{}}"#;
                    let parts = MessageParts {
                        method: "POST",
                        target: "/a2a/negotiate",
                        headers: &headers,
                        body,
                        status: None,
                    };
                    integrity::sign(
                        &f.key,
                        "key-1",
                        "did:web:stranger.example.com",
                        AGENT,
                        Coverage::FullPayload,
                        &parts,
                        now(),
                        60,
                    )
                    .expect("sign")
                })
                .header("Content-Type", "application/json")
                .body(r#"{"target_capability":"sign_document","proposed_schema":{}}"#),
        )
        .await;
    assert_eq!(stranger.code(), "did_resolution_failed", "{}", stranger.body);
    let metrics = f.t.http.get(f.t.url("/metrics")).send().await.expect("metrics").text().await.expect("text");
    for code in ["signature_expired", "integrity_mismatch", "signature_required", "unknown_key"] {
        assert!(
            metrics.contains(&format!("a2a_signature_failures_total{{reason=\"{code}\"}}")),
            "{code} not counted:\n{metrics}"
        );
    }
}

#[tokio::test]
async fn a_replayed_signed_request_is_refused() {
    let f = fixture(&SigningKey::generate().expect("key")).await;
    let body = br#"{"target_capability":"sign_document","proposed_schema":{"type":"object"}}"#;
    let headers = [("a2a-version", "0.3"), ("a2a-sender-id", SENDER)];
    let parts = MessageParts { method: "POST", target: "/a2a/negotiate", headers: &headers, body, status: None };
    let token =
        integrity::sign(&f.key, "key-1", SENDER, AGENT, Coverage::FullPayload, &parts, now(), 60).expect("sign");
    let send = || {
        f.t.send(
            f.t.req(Method::POST, "/a2a/negotiate")
                .header("A2A-Signature", token.clone())
                .header("Content-Type", "application/json")
                .body(&body[..]),
        )
    };
    assert_eq!(send().await.status, StatusCode::OK);
    let again = send().await;
    assert_eq!((again.status, again.code()), (StatusCode::UNAUTHORIZED, "replayed_request"));
}

#[tokio::test]
async fn api_key_capability_needs_a_valid_key_bound_to_the_sender() {
    let f = fixture(&SigningKey::generate().expect("key")).await;
    let body = json!({"target_capability": "process_payment", "proposed_schema": {"type": "object"}});
    let none = f.t.post("/a2a/negotiate", body.clone()).await;
    assert_eq!((none.status, none.code()), (StatusCode::UNAUTHORIZED, "auth_required"));
    let bad = f.t.send(f.t.req(Method::POST, "/a2a/negotiate").header("A2A-Api-Key", "k-wrong").json(&body)).await;
    assert_eq!((bad.status, bad.code()), (StatusCode::UNAUTHORIZED, "auth_invalid"));
    let bound = f.t.send(f.t.req(Method::POST, "/a2a/negotiate").header("A2A-Api-Key", "k-bound").json(&body)).await;
    assert_eq!(bound.code(), "auth_invalid");
    let good = f.t.send(f.t.req(Method::POST, "/a2a/negotiate").header("A2A-Api-Key", "k-good").json(&body)).await;
    assert_eq!(good.status, StatusCode::OK, "{}", good.body);
    // The key is needed on every step about the capability, not only NEGOTIATE.
    let neg = good.body["negotiation_id"].as_str().expect("id");
    // Without it, a step naming the negotiation is answered as one naming an unknown id (AUTH-10).
    let e = f.t.send(f.t.req(Method::POST, "/a2a/execute").header("A2A-Negotiation-ID", neg).json(&json!({}))).await;
    assert_eq!((e.status, e.code()), (StatusCode::NOT_FOUND, "unknown_negotiation"), "{}", e.body);
    let e =
        f.t.send(
            f.t.req(Method::POST, "/a2a/execute")
                .header("A2A-Negotiation-ID", neg)
                .header("A2A-Api-Key", "k-good")
                .json(&json!({})),
        )
        .await;
    assert_eq!(e.status, StatusCode::CREATED, "{}", e.body);
}

/// An id like `real` that the agent never gave out (its last character changed).
fn made_up(real: &str) -> String {
    let mut s = real.to_owned();
    let last = s.pop().expect("not empty");
    s.push(if last == 'a' { 'q' } else { 'a' });
    s
}

/// What a caller can compare of an answer: status, body with `id` written as `as_id`, and the header names (without
/// `date`, which differs from one answer to the next).
fn seen(a: &Answer, id: &str, as_id: &str) -> (StatusCode, String, Vec<String>) {
    let mut names: Vec<String> = a.headers.keys().map(|k| k.as_str().to_owned()).filter(|k| k != "date").collect();
    names.sort();
    (a.status, a.body.to_string().replace(id, as_id), names)
}

#[tokio::test]
async fn refused_steps_on_real_ids_are_answered_exactly_as_made_up_ids() {
    // AUTH-10: the owner of a did_auth and of an api_key capability's negotiation and execution; strangers that
    // claim the owner's DID without its key (or API key), and another DID, learn nothing from the agent's answers
    // about which ids are real.
    let f = fixture(&SigningKey::generate().expect("key")).await;
    let n = f.negotiate_signed(Spoil::None).await;
    assert_eq!(n.status, StatusCode::OK, "{}", n.body);
    let neg = n.body["negotiation_id"].as_str().expect("id").to_owned();
    let e = f
        .signed(Method::POST, "/a2a/execute", Some(json!({"x": 1})), &[("a2a-negotiation-id", &neg)], Spoil::None)
        .await;
    assert_eq!(e.status, StatusCode::CREATED, "{}", e.body);
    let signed_exe = e.body["execution_id"].as_str().expect("id").to_owned();
    let n = f.negotiate_signed(Spoil::None).await;
    let signed_neg = n.body["negotiation_id"].as_str().expect("id").to_owned();
    let keyed = |rb: reqwest::RequestBuilder| rb.header("A2A-Api-Key", "k-good");
    let body = json!({"target_capability": "process_payment", "proposed_schema": {"type": "object"}});
    let n = f.t.send(keyed(f.t.req(Method::POST, "/a2a/negotiate")).json(&body)).await;
    let keyed_neg = n.body["negotiation_id"].as_str().expect("id").to_owned();
    let e = f
        .t
        .send(keyed(f.t.req(Method::POST, "/a2a/execute")).header("A2A-Negotiation-ID", &keyed_neg).json(&json!({})))
        .await;
    assert_eq!(e.status, StatusCode::CREATED, "{}", e.body);
    let keyed_exe = e.body["execution_id"].as_str().expect("id").to_owned();
    let n = f.t.send(keyed(f.t.req(Method::POST, "/a2a/negotiate")).json(&body)).await;
    let keyed_neg = n.body["negotiation_id"].as_str().expect("id").to_owned();

    let seg = |id: &str| a2a_core::execution_id::ExecutionId::parse(id).expect("id").to_path_segment();
    for (cap, neg, exe) in [("sign_document", &signed_neg, &signed_exe), ("process_payment", &keyed_neg, &keyed_exe)] {
        for who in [SENDER, "did:web:attacker.example.com"] {
            // A step's method, path, negotiation header, body; with the real ids and with made-up ones.
            let probe = |neg: &str, exe: &str| {
                [
                    (Method::POST, "/a2a/execute".to_owned(), Some(neg.to_owned()), Some(json!({"x": 1}))),
                    (Method::GET, format!("/a2a/result/{}", seg(exe)), None, None),
                    (Method::GET, format!("/a2a/result/{}?wait_ms=50", seg(exe)), None, None),
                    (Method::POST, "/a2a/confirm".to_owned(), None, Some(json!({"execution_id": exe}))),
                    (Method::POST, "/a2a/cancel".to_owned(), None, Some(json!({"execution_id": exe}))),
                ]
            };
            let (fake_neg, fake_exe) = (made_up(neg), made_up(exe));
            let send = |(method, path, neg, body): (Method, String, Option<String>, Option<Value>)| {
                let mut rb = f.t.http.request(method, f.t.url(&path)).header("A2A-Version", "0.3");
                rb = rb.header("A2A-Sender-ID", who);
                if let Some(n) = neg {
                    rb = rb.header("A2A-Negotiation-ID", n);
                }
                if let Some(b) = body {
                    rb = rb.json(&b);
                }
                f.t.send(rb)
            };
            for (real, fake) in probe(neg, exe).into_iter().zip(probe(&fake_neg, &fake_exe)) {
                let what = format!("{cap}: {} {} by {who}", real.0, real.1);
                let (real_id, fake_id) = if real.2.is_some() { (neg, &fake_neg) } else { (exe, &fake_exe) };
                let a = send(real).await;
                let b = send(fake).await;
                assert_eq!(b.status, StatusCode::NOT_FOUND, "{what}, made up: {}", b.body);
                assert_eq!(
                    seen(&a, real_id, fake_id),
                    seen(&b, fake_id, fake_id),
                    "{what}: the real id is told apart from a made-up one"
                );
            }
        }
    }
    // The owner's execution is untouched (the strangers' CANCELs were refused) and still answers the owner.
    let r = f.signed(Method::GET, &format!("/a2a/result/{}", seg(&signed_exe)), None, &[], Spoil::HeaderOnly).await;
    assert_eq!((r.status, r.body["status"].as_str()), (StatusCode::OK, Some("received")), "{}", r.body);
    let r = f.t.send(keyed(f.t.req(Method::GET, &format!("/a2a/result/{}", seg(&keyed_exe))))).await;
    assert_eq!((r.status, r.body["status"].as_str()), (StatusCode::OK, Some("received")), "{}", r.body);
}

#[tokio::test]
async fn oauth2_capability_checks_issuer_audience_expiry_and_signature() {
    let issuer = SigningKey::generate().expect("key");
    let f = fixture(&issuer).await;
    let token = |key: &SigningKey, claims: Value| {
        jws::encode(&JwsHeader { kid: None, typ: Some("JWT".into()) }, &claims, key).expect("token")
    };
    let body = json!({"target_capability": "read_ledger", "proposed_schema": {"type": "object"}});
    let call = |bearer: Option<String>| {
        let mut rb = f.t.req(Method::POST, "/a2a/negotiate").json(&body);
        if let Some(b) = bearer {
            rb = rb.header("Authorization", format!("Bearer {b}"));
        }
        f.t.send(rb)
    };
    let missing = call(None).await;
    assert_eq!((missing.status, missing.code()), (StatusCode::UNAUTHORIZED, "auth_required"));
    assert_eq!(missing.header("www-authenticate"), Some("Bearer realm=\"a2a\""));
    let good_claims =
        json!({"iss": "https://issuer.example.com", "aud": AGENT, "iat": now(), "exp": now() + 300, "sub": "svc"});
    let ok = call(Some(token(&issuer, good_claims.clone()))).await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.body);
    for (why, key, claims) in [
        ("forged", SigningKey::generate().expect("key"), good_claims.clone()),
        (
            "expired",
            issuer.clone(),
            json!({"iss": "https://issuer.example.com", "aud": AGENT, "iat": now() - 900, "exp": now() - 600}),
        ),
        (
            "wrong issuer",
            issuer.clone(),
            json!({"iss": "https://evil.example.com", "aud": AGENT, "iat": now(), "exp": now() + 300}),
        ),
        (
            "wrong audience",
            issuer.clone(),
            json!({"iss": "https://issuer.example.com", "aud": "did:web:x.example.com", "iat": now(), "exp": now() + 300}),
        ),
    ] {
        let a = call(Some(token(&key, claims))).await;
        assert_eq!((a.status, a.code()), (StatusCode::UNAUTHORIZED, "auth_invalid"), "{why}: {}", a.body);
        assert_eq!(a.header("www-authenticate"), Some("Bearer error=\"invalid_token\""), "{why}");
    }
}

#[tokio::test]
async fn cross_domain_callers_must_sign_when_the_policy_says_so() {
    let t = TestAgent::start(
        AgentBuilder::new(AGENT)
            .capability(decl("submit_report", json!({"type": "object"})), a2a_server::handler::builtin::echo())
            .internal_domains(vec!["internal.example.com".into()], true),
    )
    .await;
    let body = json!({"target_capability": "submit_report", "proposed_schema": {"type": "object"}});
    let outsider = t.post("/a2a/negotiate", body.clone()).await;
    assert_eq!((outsider.status, outsider.code()), (StatusCode::FORBIDDEN, "did_auth_required"));
    let insider = t
        .send(
            t.http
                .post(t.url("/a2a/negotiate"))
                .header("A2A-Version", "0.3")
                .header("A2A-Sender-ID", "did:web:billing.internal.example.com")
                .json(&body),
        )
        .await;
    assert_eq!(insider.status, StatusCode::OK, "{}", insider.body);
}

#[tokio::test]
async fn signed_responses_verify_with_the_agents_key_for_the_requester_and_status() {
    let agent_key = SigningKey::generate().expect("key");
    let t = TestAgent::start(
        AgentBuilder::new(AGENT)
            .capability(decl("read_status", json!({"type": "object"})), a2a_server::handler::builtin::echo())
            .sign_responses("key-1", agent_key.clone()),
    )
    .await;
    for (method, path, body) in [
        (Method::OPTIONS, "/a2a", None),
        (
            Method::POST,
            "/a2a/negotiate",
            Some(json!({"target_capability": "read_status", "proposed_schema": {"type": "object"}})),
        ),
        (
            Method::POST,
            "/a2a/negotiate",
            Some(json!({"target_capability": "no_such_thing", "proposed_schema": {"type": "object"}})),
        ),
    ] {
        let mut rb = t.req(method.clone(), path);
        if let Some(b) = &body {
            rb = rb.json(b);
        }
        let resp = rb.send().await.expect("request");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.expect("body");
        let sig = headers.get("a2a-signature").and_then(|v| v.to_str().ok()).expect("signed");
        let pairs: Vec<(&str, &str)> =
            headers.iter().filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str(), v))).collect();
        let parts =
            MessageParts { method: method.as_str(), target: path, headers: &pairs, body: &bytes, status: Some(status) };
        let pending = integrity::prepare(sig, &parts, SENDER, now()).expect("well formed, addressed to the requester");
        assert_eq!(pending.did(), AGENT);
        let verified = pending.finish(agent_key.verifying_key(), &parts).expect("verifies");
        let want = if bytes.is_empty() { Coverage::HeaderOnly } else { Coverage::FullPayload };
        assert_eq!(verified.coverage(), want, "{method} {path}");
    }
    // No requester DID, no audience: not signed.
    let resp = t.http.request(Method::OPTIONS, t.url("/a2a")).send().await.expect("request");
    assert!(resp.headers().get("a2a-signature").is_none());
}
