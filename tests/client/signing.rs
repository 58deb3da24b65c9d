//! Signed requests in each coverage mode (§9.5, §10) and verification of signed responses (INT-10).

use std::sync::Arc;

use a2a_client::{CallOptions, Client, ClientConfig, ClientError, Identity, ResponseVerification, SigningMode, Step};
use a2a_core::capability::AuthRequirement;
use a2a_core::did::{Did, DidDocument};
use a2a_core::integrity::Coverage;
use a2a_core::keys::SigningKey;
use a2a_core::resolver::StaticResolver;
use a2a_server::AgentBuilder;
use a2a_server::handler::ExecutionContext;
use serde_json::{Value, json};

use crate::common::{CALLER, TestAgent, decl};

const AGENT: &str = "did:web:agent.example.com";

/// An agent with a `did_auth` capability and an open one, each echoing whether the sender was verified; its resolver
/// knows the caller's DID document.
async fn agent(caller: &Identity, configure: impl FnOnce(AgentBuilder) -> AgentBuilder) -> TestAgent {
    let resolver = StaticResolver::new();
    resolver.insert(&Did::parse(CALLER).expect("did"), caller.did_document().expect("has a key"));
    let mut secure = decl("sign_document", json!({"type": "object"}));
    secure.auth_requirement = AuthRequirement::DidAuth;
    let who = |ctx: ExecutionContext, _p: Value| async move {
        Ok(json!({"verified": ctx.sender_verified, "sender": ctx.sender}))
    };
    let builder = AgentBuilder::new(AGENT)
        .capability(secure, who)
        .capability(decl("read_status", json!({"type": "object"})), who)
        .resolver(Arc::new(resolver));
    TestAgent::start(configure(builder)).await
}

fn signing_client(identity: Identity, config: ClientConfig) -> Client {
    Client::builder(identity).config(config).build().expect("client")
}

#[tokio::test]
async fn a_did_auth_capability_is_signed_with_payload_hash_and_with_full_payload() {
    let me = Identity::generate(CALLER, "key-1").expect("identity");
    let t = agent(&me, |b| b).await;
    for coverage in [Coverage::PayloadHash, Coverage::FullPayload] {
        let c = signing_client(me.clone(), ClientConfig::default().with_body_coverage(coverage));
        let o = c
            .call(&t.endpoint, "sign_document", json!({"doc": "x"}))
            .await
            .unwrap_or_else(|e| panic!("{coverage}: {e}"));
        assert_eq!(o.result, json!({"verified": true, "sender": CALLER}), "{coverage}");
    }
}

#[tokio::test]
async fn header_only_coverage_cannot_bind_a_body_and_the_agent_says_so() {
    let me = Identity::generate(CALLER, "key-1").expect("identity");
    let t = agent(&me, |b| b).await;
    let c = signing_client(me, ClientConfig::default().with_body_coverage(Coverage::HeaderOnly));
    let e = c.call(&t.endpoint, "sign_document", json!({})).await.expect_err("AUTH-5");
    assert_eq!((e.code(), e.step()), ("integrity_mismatch", Some(Step::Negotiate)));
}

#[tokio::test]
async fn an_identity_without_a_key_is_told_to_sign() {
    let me = Identity::generate(CALLER, "key-1").expect("identity");
    let t = agent(&me, |b| b).await;
    let c = signing_client(Identity::unsigned(CALLER).expect("did"), ClientConfig::default());
    let e = c.call(&t.endpoint, "sign_document", json!({})).await.expect_err("unsigned");
    assert_eq!(e.code(), "signature_required");
    assert!(e.hint().contains("--key"), "{}", e.hint());
}

#[tokio::test]
async fn always_signs_every_request_and_the_agent_verifies_them() {
    let me = Identity::generate(CALLER, "key-1").expect("identity");
    let t = agent(&me, |b| b).await;
    let c = signing_client(me.clone(), ClientConfig::default().with_signing(SigningMode::Always));
    let o = c.call(&t.endpoint, "read_status", json!({})).await.expect("signed");
    assert_eq!(o.result["verified"], json!(true));
    let auto = signing_client(me, ClientConfig::default());
    let o = auto.call(&t.endpoint, "read_status", json!({})).await.expect("unsigned");
    assert_eq!(o.result["verified"], json!(false));
}

#[tokio::test]
async fn a_signature_from_a_key_the_document_does_not_list_is_refused() {
    let me = Identity::generate(CALLER, "key-1").expect("identity");
    let t = agent(&me, |b| b).await;
    let impostor = Identity::generate(CALLER, "key-1").expect("identity");
    let e = signing_client(impostor, ClientConfig::default()).call(&t.endpoint, "sign_document", json!({})).await;
    assert_eq!(e.expect_err("wrong key").code(), "signature_invalid");
}

#[tokio::test]
async fn under_auto_a_cross_domain_refusal_is_answered_by_signing_once() {
    let me = Identity::generate(CALLER, "key-1").expect("identity");
    let t = agent(&me, |b| b.internal_domains(vec!["internal.example.org".into()], true)).await;
    let c = signing_client(me, ClientConfig::default());
    let o = c.call(&t.endpoint, "read_status", json!({})).await.expect("signed after did_auth_required");
    assert_eq!(o.result["verified"], json!(true));
    let never = signing_client(
        Identity::generate(CALLER, "key-1").expect("id"),
        ClientConfig::default().with_signing(SigningMode::Never),
    );
    assert_eq!(
        never.call(&t.endpoint, "read_status", json!({})).await.expect_err("policy").code(),
        "did_auth_required"
    );
}

/// An agent that signs its responses with `agent_key`, and a client whose resolver publishes `published` for it.
async fn signed_agent(agent_key: &SigningKey, published: &SigningKey) -> (TestAgent, Arc<StaticResolver>) {
    let me = Identity::generate(CALLER, "key-1").expect("identity");
    let t = agent(&me, |b| b.sign_responses("key-1", agent_key.clone())).await;
    let resolver = Arc::new(StaticResolver::new());
    let did = Did::parse(AGENT).expect("did");
    resolver.insert(&did, DidDocument::generate(&did, &[("key-1", published.verifying_key().to_jwk())]));
    (t, resolver)
}

fn verifying_client(resolver: Arc<StaticResolver>, v: ResponseVerification) -> Client {
    Client::builder(Identity::unsigned(CALLER).expect("did"))
        .config(ClientConfig::default().with_response_verification(v))
        .resolver(resolver)
        .build()
        .expect("client")
}

#[tokio::test]
async fn signed_responses_are_verified_at_every_step() {
    let key = SigningKey::generate().expect("key");
    let (t, resolver) = signed_agent(&key, &key).await;
    let c = verifying_client(resolver, ResponseVerification::Required);
    let o = c.call(&t.endpoint, "read_status", json!({})).await.expect("every response verified");
    assert_eq!(o.agent, t.agent.did());
    c.discover(&t.endpoint).await.expect("DISCOVER verified");
    let e = c.call(&t.endpoint, "no_such_thing", json!({})).await.expect_err("signed error");
    assert_eq!(e.code(), "no_matching_capability");
}

#[tokio::test]
async fn a_response_signed_with_another_key_is_refused() {
    let (signing, published) = (SigningKey::generate().expect("key"), SigningKey::generate().expect("key"));
    let (t, resolver) = signed_agent(&signing, &published).await;
    let c = verifying_client(resolver, ResponseVerification::IfSigned);
    let e = c.call(&t.endpoint, "read_status", json!({})).await.expect_err("bad signature");
    assert!(matches!(&e, ClientError::ResponseNotVerified { step: Step::Discover, .. }), "{e:?}");
    assert_eq!(e.code(), "signature_invalid");
    assert!(e.hint().contains("tampered"), "{}", e.hint());
    let off = verifying_client(Arc::new(StaticResolver::new()), ResponseVerification::Off);
    off.call(&t.endpoint, "read_status", json!({})).await.expect("not verified when off");
}

#[tokio::test]
async fn required_verification_refuses_an_agent_that_does_not_sign() {
    let me = Identity::generate(CALLER, "key-1").expect("identity");
    let t = agent(&me, |b| b).await;
    let c = verifying_client(Arc::new(StaticResolver::new()), ResponseVerification::Required);
    let e = c.call_with(&t.endpoint, "read_status", json!({}), &CallOptions::default()).await.expect_err("unsigned");
    assert_eq!(e.code(), "signature_required");
    let lenient = verifying_client(Arc::new(StaticResolver::new()), ResponseVerification::IfSigned);
    lenient.call(&t.endpoint, "read_status", json!({})).await.expect("unsigned is fine by default");
}
