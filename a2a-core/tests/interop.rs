//! Interoperability of A2A signatures with independent implementations:
//!
//! - Node.js built-in `crypto` with its own base64url, RFC 8785 and coverage code (`tests/interop/a2a_interop.mjs`):
//!   it verifies every valid vector of `spec/vectors/signatures.json` and rejects the forged ones, and it signs fresh
//!   requests that `integrity::prepare`/`finish` must accept. Node is required: these tests fail when it is missing.
//! - The `jsonwebtoken` crate: our ES256 tokens verify there, and its ES256 tokens verify with our `jws` module.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use a2a_core::integrity::{self, Coverage, IntegrityError, MessageParts, Mismatch};
use a2a_core::jws::{self, JwsHeader};
use a2a_core::keys::{SigningKey, VerifyingKey};
use serde_json::{Value, json};

fn node() -> String {
    std::env::var("A2A_NODE").unwrap_or_else(|_| "node".to_owned())
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/a2a_interop.mjs")
}

fn run_node(args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let mut child = Command::new(node())
        .arg(script())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("Node.js is required for the interop tests (set A2A_NODE or put `node` on PATH): {e}")
        });
    if let Some(input) = stdin {
        child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write stdin");
    } else {
        drop(child.stdin.take());
    }
    let out = child.wait_with_output().expect("node output");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn now() -> i64 {
    i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs()).expect("time")
}

#[test]
fn node_verifies_every_valid_signature_vector_and_rejects_the_forged_ones() {
    let vectors = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../spec/vectors/signatures.json");
    let (ok, stdout, stderr) = run_node(&["verify-vectors", vectors.to_str().expect("path")], None);
    assert!(ok, "Node disagrees with the vectors:\n{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(stdout.trim()).expect("node report");
    assert!(report["validChecked"].as_u64().expect("count") >= 10, "{report}");
    assert!(report["forgedRejected"].as_u64().expect("count") >= 5, "{report}");
}

const CLIENT: &str = "did:web:node-client.example.com";
const AGENT: &str = "did:web:agent.example.com";

#[test]
fn node_signed_request_is_accepted_and_refused_after_tampering() {
    let body = r#"{"z":[1,2.5,1e21,"é\u2028"],"a":{"y":null,"b":true},"title":"Quarterly report"}"#;
    let headers = vec![
        ("A2A-Version", "0.3"),
        ("A2A-Sender-ID", CLIENT),
        ("A2A-Negotiation-ID", "neg_node_1"),
        ("Content-Type", "application/json"),
    ];
    let t = now();
    for coverage in ["payload_hash", "full_payload", "header_only"] {
        let req = json!({
            "method": "POST", "target": "/a2a/execute", "headers": headers, "body": body,
            "iss": CLIENT, "aud": AGENT, "now": t, "key_id": "node-key-1", "coverage": coverage,
        });
        let (ok, stdout, stderr) = run_node(&["sign"], Some(&req.to_string()));
        assert!(ok, "node sign failed: {stderr}");
        let out: Value = serde_json::from_str(stdout.trim()).expect("node output");
        let sig = out["signature"].as_str().expect("signature");
        let key = VerifyingKey::from_jwk(&out["jwk"]).expect("Node's JWK is a P-256 key");
        let parts = MessageParts {
            method: "POST",
            target: "/a2a/execute",
            headers: &headers,
            body: body.as_bytes(),
            status: None,
        };
        let pending = integrity::prepare(sig, &parts, AGENT, t).expect("prepare accepts Node's signature");
        assert_eq!((pending.did(), pending.key_id()), (CLIENT, "node-key-1"));
        let verified = pending.finish(&key, &parts).expect("finish accepts Node's signature");
        assert_eq!(verified.coverage().as_str(), coverage);

        // A proxy re-serialises the body: only payload_hash survives (and header_only ignores the body).
        let reser =
            r#"{ "title": "Quarterly report", "a": {"b": true, "y": null}, "z": [1, 2.50, 1E21, "\u00e9\u2028"] }"#;
        let p2 = MessageParts { body: reser.as_bytes(), ..parts };
        let r = integrity::prepare(sig, &p2, AGENT, t).expect("prepare").finish(&key, &p2);
        match coverage {
            "full_payload" => assert_eq!(r.expect_err("refused"), IntegrityError::Mismatch(Mismatch::Body)),
            _ => assert!(r.is_ok(), "{coverage}: {r:?}"),
        }
        // Tampered header.
        let mut h3 = headers.clone();
        h3[2].1 = "neg_node_2";
        let p3 = MessageParts { headers: &h3, ..parts };
        let e = integrity::prepare(sig, &p3, AGENT, t).expect("prepare").finish(&key, &p3).expect_err("refused");
        assert_eq!(e.code().as_str(), "integrity_mismatch");
        // Another key.
        let other = SigningKey::generate().expect("key");
        let e = integrity::prepare(sig, &parts, AGENT, t)
            .expect("prepare")
            .finish(other.verifying_key(), &parts)
            .expect_err("refused");
        assert_eq!(e, IntegrityError::SignatureInvalid);
    }
}

#[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct Claims {
    iss: String,
    aud: String,
    iat: i64,
    exp: i64,
    scope: String,
}

#[test]
fn our_es256_tokens_verify_in_jsonwebtoken() {
    let key = SigningKey::generate().expect("key");
    let t = now();
    let claims = Claims {
        iss: "https://issuer.example.com".into(),
        aud: AGENT.into(),
        iat: t,
        exp: t + 60,
        scope: "a2a".into(),
    };
    let token =
        jws::encode(&JwsHeader { kid: Some("k1".into()), typ: Some("JWT".into()) }, &claims, &key).expect("encode");
    let jwk = key.verifying_key().to_jwk();
    let dk =
        jsonwebtoken::DecodingKey::from_ec_components(jwk["x"].as_str().expect("x"), jwk["y"].as_str().expect("y"))
            .expect("decoding key");
    let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    v.set_audience(&[AGENT]);
    v.set_issuer(&["https://issuer.example.com"]);
    let data = jsonwebtoken::decode::<Claims>(&token, &dk, &v).expect("jsonwebtoken accepts our token");
    assert_eq!(data.claims, claims);
    assert_eq!(data.header.kid.as_deref(), Some("k1"));
    // And our full A2A signatures are ES256 JWS too.
    let h = [("A2A-Version", "0.3"), ("A2A-Sender-ID", CLIENT)];
    let parts = MessageParts { method: "GET", target: "/a2a/result/x", headers: &h, body: b"", status: None };
    let sig = integrity::sign(&key, "key-1", CLIENT, AGENT, Coverage::HeaderOnly, &parts, t, 60).expect("sign");
    let data = jsonwebtoken::decode::<Value>(&sig, &dk, &v.clone()).map(|d| d.claims);
    let mut v2 = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    v2.set_audience(&[AGENT]);
    let claims = jsonwebtoken::decode::<Value>(&sig, &dk, &v2).expect("jsonwebtoken accepts A2A-Signature").claims;
    assert_eq!(claims["message_integrity"]["coverage"], "header_only");
    assert!(data.is_err(), "issuer check must still apply in jsonwebtoken");
}

#[test]
fn jsonwebtoken_es256_tokens_verify_with_our_jws_module() {
    let key = SigningKey::generate().expect("key");
    let der = key.to_pkcs8_der().expect("pkcs8");
    let ek = jsonwebtoken::EncodingKey::from_ec_der(&der);
    let t = now();
    let claims = Claims {
        iss: "https://issuer.example.com".into(),
        aud: AGENT.into(),
        iat: t,
        exp: t + 60,
        scope: "a2a".into(),
    };
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some("k1".into());
    let token = jsonwebtoken::encode(&header, &claims, &ek).expect("jsonwebtoken encode");
    let decoded = jws::decode(&token).expect("our decode accepts jsonwebtoken's token");
    decoded.verify(key.verifying_key()).expect("our verify accepts jsonwebtoken's signature");
    let expect =
        jws::Expectations { issuer: Some("https://issuer.example.com"), audience: Some(AGENT), ..Default::default() };
    jws::validate_registered_claims(decoded.claims(), t, expect).expect("claims valid");
    assert_eq!(decoded.claims_as::<Claims>().expect("typed"), claims);
    let other = SigningKey::generate().expect("key");
    assert_eq!(decoded.verify(other.verifying_key()), Err(jws::JwsError::SignatureInvalid));
    // jsonwebtoken's HS256 token is refused by alg.
    let hs = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(b"a-secret-of-at-least-32-bytes!!!").expect("hmac key"),
    )
    .expect("hs256");
    assert_eq!(jws::decode(&hs).expect_err("refused").code().as_str(), "unsupported_algorithm");
}
