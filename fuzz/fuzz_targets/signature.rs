//! Arbitrary bytes as an `A2A-Signature` value (and the rest as a body) into the signature parsers: `jws::decode`,
//! `integrity::prepare` and, when a token gets that far, `finish` with a fixed key; plus the DID and execution-id
//! parsers on the same text. Nothing panics; whatever is refused maps onto a code of the error table.
#![no_main]

use std::sync::OnceLock;

use a2a_core::integrity::{self, MessageParts};
use a2a_core::keys::SigningKey;
use a2a_core::{did, execution_id, jws};
use libfuzzer_sys::fuzz_target;

fn key() -> &'static SigningKey {
    static KEY: OnceLock<SigningKey> = OnceLock::new();
    KEY.get_or_init(|| SigningKey::from_bytes(&[7u8; 32]).expect("a fixed test key"))
}

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|b| *b == b'\n').unwrap_or(data.len());
    let (head, body) = data.split_at(split);
    let Ok(token) = std::str::from_utf8(head) else {
        return;
    };
    if let Ok(unverified) = jws::decode(token) {
        let _ = unverified.verify(key().verifying_key());
        let _ = jws::validate_registered_claims(unverified.claims(), 1_767_225_600, jws::Expectations::default());
    }
    let headers = [("a2a-version", "0.3"), ("a2a-sender-id", "did:web:client.example.com")];
    let parts = MessageParts { method: "POST", target: "/a2a/execute", headers: &headers, body, status: None };
    match integrity::prepare(token, &parts, "did:web:agent.example.com", 1_767_225_600) {
        Ok(pending) => {
            let _ = pending.did();
            let _ = pending.key_id();
            if let Err(e) = pending.finish(key().verifying_key(), &parts) {
                let _ = (e.code(), e.reason(), e.details());
            }
        }
        Err(e) => {
            let _ = (e.code(), e.reason(), e.details());
        }
    }
    if let Ok(d) = did::Did::parse(token) {
        assert_eq!(did::Did::parse(d.as_str()).as_ref(), Ok(&d));
        let _ = d.document_url(&did::ResolveOptions::default());
    }
    if let Ok(id) = execution_id::ExecutionId::parse(token) {
        let seg = id.to_path_segment();
        assert_eq!(execution_id::ExecutionId::from_path_segment(&seg).as_ref(), Ok(&id));
    }
});
