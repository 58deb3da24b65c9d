//! Cost of A2A message integrity for a realistic 1 KiB JSON body: canonicalize, sign, full verification
//! (prepare + finish, key pre-parsed), with a raw aws-lc-rs ECDSA P-256 verification and a SHA-256 of the same 1 KiB as
//! baselines in the same run. Run with: `cargo bench -p a2a-core --bench integrity`. Results: docs/BENCHMARKS.md.

use std::hint::black_box;

use a2a_core::canonical;
use a2a_core::integrity::{self, Coverage, MessageParts};
use a2a_core::keys::SigningKey;
use aws_lc_rs::signature::ParsedPublicKey;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
use criterion::{Criterion, criterion_group, criterion_main};
use sha2::{Digest as _, Sha256};

const CLIENT: &str = "did:web:client.example.com";
const AGENT: &str = "did:web:agent.example.com";
const NOW: i64 = 1_767_225_600;

/// A realistic EXECUTE payload of exactly 1024 bytes: nested objects, strings with non-ASCII, integers and decimals.
fn body_1kib() -> Vec<u8> {
    let mut lines = Vec::new();
    for i in 0..5 {
        lines.push(format!(
            r#"{{"sku":"SKU-{i:05}","description":"Quarterly report line {i} — Zoë Ågren","quantity":{},"unit_price":{}.{:02},"tax_rate":0.2,"tags":["finance","q4","eu-west-1"]}}"#,
            i * 3 + 1,
            100 + i * 17,
            i * 7 % 100
        ));
    }
    let make = |notes: &str| {
        format!(
            r#"{{"title":"Quarterly report","timestamp":"2026-01-01T00:00:00Z","currency":"EUR","customer":{{"id":42,"name":"Example GmbH","country":"DE"}},"lines":[{}],"approved":true,"notes":"{notes}"}}"#,
            lines.join(",")
        )
    };
    let base = make("").len();
    assert!(base <= 1024, "body skeleton is {base} bytes");
    let body = make(&"n".repeat(1024 - base)).into_bytes();
    assert_eq!(body.len(), 1024);
    body
}

fn benches(c: &mut Criterion) {
    let body = body_1kib();
    let key = SigningKey::generate().expect("key");
    let verifying = key.verifying_key().clone();
    let headers = [
        ("A2A-Version", "0.3"),
        ("A2A-Sender-ID", CLIENT),
        ("A2A-Negotiation-ID", "neg_7Qm2xZ9kLp"),
        ("Idempotency-Key", "idem-2026-01-01-0001"),
        ("Content-Type", "application/json"),
    ];
    let parts = MessageParts { method: "POST", target: "/a2a/execute", headers: &headers, body: &body, status: None };
    let sig_ph = integrity::sign(&key, "key-1", CLIENT, AGENT, Coverage::PayloadHash, &parts, NOW, 60).expect("sign");
    let sig_fp = integrity::sign(&key, "key-1", CLIENT, AGENT, Coverage::FullPayload, &parts, NOW, 60).expect("sign");

    let mut g = c.benchmark_group("a2a-core/1KiB");
    g.bench_function("baseline: SHA-256 of 1 KiB", |b| b.iter(|| Sha256::digest(black_box(&body))));
    let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).expect("aws-lc key");
    let raw_sig = pair.sign(&aws_lc_rs::rand::SystemRandom::new(), &body).expect("aws-lc sign");
    let raw_pub = ParsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, pair.public_key().as_ref()).expect("parsed");
    g.bench_function("baseline: aws-lc-rs ECDSA P-256 verify of 1 KiB", |b| {
        b.iter(|| raw_pub.verify_sig(black_box(&body), black_box(raw_sig.as_ref())).expect("verifies"))
    });
    g.bench_function("canonicalize (RFC 8785)", |b| {
        b.iter(|| canonical::canonicalize(black_box(&body)).expect("json"))
    });
    g.bench_function("sign payload_hash", |b| {
        b.iter(|| integrity::sign(&key, "key-1", CLIENT, AGENT, Coverage::PayloadHash, black_box(&parts), NOW, 60))
    });
    g.bench_function("verify payload_hash (prepare + finish)", |b| {
        b.iter(|| {
            let p = integrity::prepare(black_box(&sig_ph), &parts, AGENT, NOW).expect("prepare");
            p.finish(&verifying, &parts).expect("finish")
        })
    });
    g.bench_function("verify full_payload (prepare + finish)", |b| {
        b.iter(|| {
            let p = integrity::prepare(black_box(&sig_fp), &parts, AGENT, NOW).expect("prepare");
            p.finish(&verifying, &parts).expect("finish")
        })
    });
    g.bench_function("prepare only (payload_hash)", |b| {
        b.iter(|| integrity::prepare(black_box(&sig_ph), &parts, AGENT, NOW).expect("prepare"))
    });
    g.bench_function("coverage only (covered headers + full_payload body digest, no ECDSA)", |b| {
        b.iter(|| {
            let h = integrity::covered_headers(black_box(&headers)).expect("headers");
            let d = integrity::body_digest(Coverage::FullPayload, black_box(&body)).expect("digest");
            (h, d)
        })
    });
    g.finish();
}

criterion_group!(integrity_benches, benches);
criterion_main!(integrity_benches);
