//! `spec/vectors/did_web.json` and `spec/vectors/did_documents.json` against `a2a_core::did`.

use a2a_core::did::{Did, DidDocument, DidUrl, ResolveOptions};
use a2a_core::error::ErrorCode;
use serde_json::{Value, json};

use crate::common::{TestCase, TestGroup, Verdict, load};

fn operation(group: &TestGroup) -> &str {
    group.params.get("operation").and_then(Value::as_str).unwrap_or_default()
}

/// Checks one outcome against the test's verdict; returns a description of the mismatch, if any.
fn check<T>(
    t: &TestCase,
    outcome: Result<T, a2a_core::did::DidError>,
    to_value: impl Fn(&T) -> Value,
) -> Option<String> {
    match (t.result, outcome) {
        (Verdict::Valid | Verdict::Acceptable, Ok(v)) => {
            let got = to_value(&v);
            match &t.expected {
                Some(want) if *want != got => Some(format!("expected {want}, got {got}")),
                _ => None,
            }
        }
        (Verdict::Valid, Err(e)) => Some(format!("refused ({}): {e}", e.reason())),
        (Verdict::Invalid, Ok(v)) => Some(format!("accepted: {}", to_value(&v))),
        (Verdict::Invalid, Err(e)) => match &t.error {
            Some(want) if want != e.reason() => Some(format!("refused with {} ({e}), expected {want}", e.reason())),
            _ => None,
        },
        (Verdict::Acceptable, Err(_)) => None,
    }
}

fn str_input(t: &TestCase) -> &str {
    t.input.as_str().unwrap_or_else(|| panic!("tcId {}: input is not a string", t.tc_id))
}

fn did_summary(d: &Did) -> Value {
    let url = |o: &ResolveOptions| d.document_url(o).map(|u| u.to_string()).unwrap_or_else(|e| format!("error: {e}"));
    json!({
        "host": d.host(),
        "port": d.port(),
        "path_segments": d.path_segments(),
        "document_url": url(&ResolveOptions::default()),
        "document_url_http_loopback": url(&ResolveOptions::with_http_loopback()),
    })
}

#[test]
fn did_web_vectors_all_pass() {
    let file = load("did_web");
    let mut failures = Vec::new();
    let mut checked = 0;
    for (group, t) in file.tests() {
        let failure = match operation(group) {
            "parse" => {
                let outcome = Did::parse(str_input(t));
                if let Err(e) = &outcome {
                    // Every syntax refusal is answered with invalid_sender, and names what is wrong.
                    if e.code() != ErrorCode::INVALID_SENDER || e.message().is_empty() {
                        failures.push(format!("tcId {}: code {} / message {:?}", t.tc_id, e.code(), e.message()));
                    }
                }
                if let Ok(d) = &outcome {
                    // A valid DID round-trips through its string form and serde.
                    let again: Result<Did, _> = d.as_str().parse();
                    let json = serde_json::to_value(d).ok().and_then(|v| serde_json::from_value::<Did>(v).ok());
                    if again.as_ref().ok() != Some(d) || json.as_ref() != Some(d) {
                        failures.push(format!("tcId {}: does not round-trip", t.tc_id));
                    }
                }
                check(t, outcome, did_summary)
            }
            "parse_did_url" => {
                check(t, DidUrl::parse(str_input(t)), |u| json!({"did": u.did().as_str(), "fragment": u.fragment()}))
            }
            "for_host_port" => {
                let host = t.input["host"].as_str().unwrap_or_default();
                let port = t.input["port"].as_u64().map(|p| u16::try_from(p).expect("port fits u16"));
                let path: Vec<&str> =
                    t.input["path"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                check(t, Did::for_host_port(host, port, &path), |d| json!(d.as_str()))
            }
            other => panic!("unknown operation {other:?}"),
        };
        checked += 1;
        if let Some(f) = failure {
            failures.push(format!("tcId {} ({}): {f}", t.tc_id, t.comment));
        }
    }
    assert_eq!(checked, file.number_of_tests);
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// The JWK outcome of `find_signing_jwk`, or the error.
fn find_jwk(t: &TestCase) -> Result<Value, a2a_core::did::DidError> {
    let did = Did::parse(t.input["did"].as_str().unwrap_or_default())?;
    let doc = DidDocument::parse(&document_bytes(t), &did)?;
    let key_id = t.input["key_id"].as_str().unwrap_or_default();
    doc.find_signing_jwk(key_id).cloned()
}

/// The bytes of the document of a test: `document_text` as is, or `document` serialised compactly, then padded
/// with spaces to `pad_to_bytes`.
fn document_bytes(t: &TestCase) -> Vec<u8> {
    let mut bytes = match (t.input.get("document_text"), t.input.get("document")) {
        (Some(Value::String(text)), _) => text.clone().into_bytes(),
        (_, Some(doc)) => serde_json::to_vec(doc).expect("serialises"),
        _ => panic!("tcId {}: no document", t.tc_id),
    };
    if let Some(n) = t.input.get("pad_to_bytes").and_then(Value::as_u64) {
        let n = usize::try_from(n).expect("fits");
        assert!(bytes.len() <= n, "tcId {}: document already longer than pad_to_bytes", t.tc_id);
        bytes.resize(n, b' ');
    }
    bytes
}

#[test]
fn did_document_vectors_all_pass() {
    let file = load("did_documents");
    let mut failures = Vec::new();
    let mut checked = 0;
    for (group, t) in file.tests() {
        let failure = match operation(group) {
            "parse" => {
                let outcome = Did::parse(t.input["did"].as_str().unwrap_or_default())
                    .and_then(|did| DidDocument::parse(&document_bytes(t), &did));
                check(t, outcome, |d| {
                    let ids: Vec<&str> = d.methods().map(|m| m.id.as_str()).collect();
                    json!({"methods": ids})
                })
            }
            "find_signing_jwk" => check(t, find_jwk(t), Clone::clone),
            "generate" => {
                let outcome = Did::parse(t.input["did"].as_str().unwrap_or_default()).and_then(|did| {
                    let keys: Vec<(String, Value)> = t.input["keys"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|k| (k["key_id"].as_str().unwrap_or_default().to_owned(), k["jwk"].clone()))
                        .collect();
                    let checked = DidDocument::try_generate(&did, &keys);
                    // For valid input the unchecked generate writes the same document.
                    if checked.as_ref().is_ok_and(|d| *d != DidDocument::generate(&did, &keys)) {
                        failures.push(format!("tcId {}: generate and try_generate differ", t.tc_id));
                    }
                    checked
                });
                check(t, outcome, |d| serde_json::to_value(d).expect("serialises"))
            }
            other => panic!("unknown operation {other:?}"),
        };
        checked += 1;
        if let Some(f) = failure {
            failures.push(format!("tcId {} ({}): {f}", t.tc_id, t.comment));
        }
    }
    assert_eq!(checked, file.number_of_tests);
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn rsa_key_is_refused_with_p256_message() {
    let file = load("did_documents");
    let t = file
        .tests()
        .map(|(_, t)| t)
        .find(|t| t.flags.iter().any(|f| f == "RsaKey"))
        .expect("the vectors have an RSA key case");
    let e = find_jwk(t).expect_err("an RSA key is refused");
    assert_eq!(e.reason(), "unsupported_key_type");
    assert_eq!(e.code(), ErrorCode::UNSUPPORTED_KEY_TYPE);
    assert!(e.message().contains("P-256") && e.message().contains("RSA"), "{}", e.message());
}

#[test]
fn document_served_for_another_did_is_refused() {
    let file = load("did_documents");
    let t = file
        .tests()
        .map(|(_, t)| t)
        .find(|t| t.flags.iter().any(|f| f == "IdMismatch"))
        .expect("the vectors have an id mismatch case");
    let did = Did::parse(t.input["did"].as_str().unwrap_or_default()).expect("valid DID");
    let e = DidDocument::parse(&document_bytes(t), &did).expect_err("refused");
    assert_eq!(e.code(), ErrorCode::DID_RESOLUTION_FAILED);
    assert!(e.message().contains(did.as_str()), "{}", e.message());
}

// ---------------------------------------------------------------------------------------------------------------
// Generator of spec/vectors/did_documents.json. The expected values are written here by hand; only the padding
// and repetition are computed. Run with:
//   cargo test -p a2a-core --test vectors -- --ignored regenerate_did_documents_vectors

const DID: &str = "did:web:agent-a.example.com";
/// P-256 public keys whose private scalars are SHA-256("a2a-ident-vector-key-1") and SHA-256("a2a-ident-vector-key-2")
/// read as big-endian integers (derived with Python `cryptography`).
const K1: (&str, &str) = ("jfBuYgsRwExYcMfUcH2f62aWwRCaYsXDLMSLkmn8Xbc", "rtWwB9QqgM-SzShEZzQpFt470TCMGR5TQoXloqTmjMI");
const K1_D: &str = "3RKVAur9tQ95J8Sv8hRhjNeElURH5vsThAZyi4ynOzw";
const K2: (&str, &str) = ("Fxm7mjlAi47_QvFtZvrU26xUWnNSJgxD72n8SVXtxIM", "9dG7PHw-3ZkGTdqNUSkwXhf4g9BINbjSun8Xa-5m9oM");

fn p256(k: (&str, &str)) -> Value {
    json!({"kty": "EC", "crv": "P-256", "x": k.0, "y": k.1})
}

fn method(id: &str, kind: &str, jwk: Value) -> Value {
    json!({"id": id, "type": kind, "controller": DID, "publicKeyJwk": jwk})
}

/// The document `DidDocument::generate` writes for one key.
fn standard_doc(did: &str, methods: &[(&str, Value)]) -> Value {
    let ids: Vec<String> = methods.iter().map(|(f, _)| format!("{did}#{f}")).collect();
    let vms: Vec<Value> = methods
        .iter()
        .map(|(f, jwk)| json!({"id": format!("{did}#{f}"), "type": "JsonWebKey2020", "controller": did, "publicKeyJwk": jwk}))
        .collect();
    json!({
        "@context": ["https://www.w3.org/ns/did/v1", "https://w3id.org/security/suites/jws-2020/v1"],
        "id": did,
        "verificationMethod": vms,
        "authentication": ids,
        "assertionMethod": ids,
    })
}

struct Builder {
    next_id: u32,
}

impl Builder {
    fn push(&mut self, comment: &str, flags: &[&str], input: Value, outcome: Result<Value, &str>) -> Value {
        let mut t = json!({"tcId": self.next_id, "comment": comment, "flags": flags, "input": input});
        self.next_id += 1;
        match outcome {
            Ok(expected) => {
                t["expected"] = expected;
                t["result"] = json!("valid");
            }
            Err(error) => {
                t["result"] = json!("invalid");
                t["error"] = json!(error);
            }
        }
        t
    }
}

#[test]
#[ignore = "writes spec/vectors/did_documents.json"]
fn regenerate_did_documents_vectors() {
    let mut b = Builder { next_id: 1 };
    let key1 = format!("{DID}#key-1");
    let k1 = p256(K1);
    let k2 = p256(K2);
    let doc1 = standard_doc(DID, &[("key-1", k1.clone())]);

    // ---- parse
    let mut parse = Vec::new();
    let mut p = |b: &mut Builder, comment: &str, flags: &[&str], input: Value, outcome: Result<Value, &str>| {
        let t = b.push(comment, flags, input, outcome);
        parse.push(t);
    };
    p(
        &mut b,
        "the document DidDocument::generate writes",
        &[],
        json!({"did": DID, "document": doc1}),
        Ok(json!({"methods": [key1]})),
    );
    p(
        &mut b,
        "relative method ids and references (#key-1)",
        &["RelativeIds"],
        json!({"did": DID, "document": {"id": DID, "verificationMethod": [method("#key-1", "JsonWebKey2020", k1.clone())], "assertionMethod": ["#key-1"]}}),
        Ok(json!({"methods": ["#key-1"]})),
    );
    p(
        &mut b,
        "no @context: consumers do not require it",
        &[],
        json!({"did": DID, "document": {"id": DID, "verificationMethod": [method(&key1, "JsonWebKey2020", k1.clone())], "authentication": [key1]}}),
        Ok(json!({"methods": [key1]})),
    );
    p(
        &mut b,
        "@context as a single string",
        &[],
        json!({"did": DID, "document": {"@context": "https://www.w3.org/ns/did/v1", "id": DID, "verificationMethod": [method(&key1, "JsonWebKey2020", k1.clone())], "assertionMethod": [key1]}}),
        Ok(json!({"methods": [key1]})),
    );
    p(
        &mut b,
        "members A2A does not use (service, alsoKnownAs, controller, keyAgreement) are ignored",
        &[],
        json!({"did": DID, "document": {
            "@context": ["https://www.w3.org/ns/did/v1", {"@vocab": "https://example.com/#"}],
            "id": DID, "controller": DID, "alsoKnownAs": ["https://agent-a.example.com"],
            "verificationMethod": [method(&key1, "JsonWebKey2020", k1.clone())],
            "assertionMethod": [key1], "keyAgreement": [key1],
            "service": [{"id": "#a2a", "type": "A2AEndpoint", "serviceEndpoint": "https://agent-a.example.com/a2a"}]}}),
        Ok(json!({"methods": [key1]})),
    );
    p(
        &mut b,
        "a method embedded in assertionMethod",
        &["Embedded"],
        json!({"did": DID, "document": {"id": DID,
            "verificationMethod": [method(&key1, "JsonWebKey2020", k1.clone())],
            "authentication": [key1],
            "assertionMethod": [method(&format!("{DID}#key-2"), "JsonWebKey2020", k2.clone())]}}),
        Ok(json!({"methods": [key1, format!("{DID}#key-2")]})),
    );
    p(
        &mut b,
        "no verification methods: parses, but no key can sign",
        &[],
        json!({"did": DID, "document": {"id": DID}}),
        Ok(json!({"methods": []})),
    );
    p(
        &mut b,
        "DID with a port and a path",
        &[],
        json!({"did": "did:web:localhost%3A8080:bots:b1", "document": standard_doc("did:web:localhost%3A8080:bots:b1", &[("key-1", k1.clone())])}),
        Ok(json!({"methods": ["did:web:localhost%3A8080:bots:b1#key-1"]})),
    );
    p(
        &mut b,
        "a method of another type (publicKeyBase58): parses, cannot sign",
        &[],
        json!({"did": DID, "document": {"id": DID, "verificationMethod": [{"id": format!("{DID}#ed"), "type": "Ed25519VerificationKey2018", "controller": DID, "publicKeyBase58": "H3C2AVvLMv6gmMNam3uVAjZpfkcJCwDwnZn6z3wXmqPV"}], "assertionMethod": [format!("{DID}#ed")]}}),
        Ok(json!({"methods": [format!("{DID}#ed")]})),
    );
    p(
        &mut b,
        "a reference to another DID's key is accepted but never authorises signing",
        &[],
        json!({"did": DID, "document": {"id": DID, "verificationMethod": [method(&key1, "JsonWebKey2020", k1.clone())], "assertionMethod": [key1, "did:web:other.example.com#key-1"]}}),
        Ok(json!({"methods": [key1]})),
    );
    let many: Vec<Value> = (0..64).map(|i| method(&format!("#k{i}"), "JsonWebKey2020", k1.clone())).collect();
    let many_ids: Vec<String> = (0..64).map(|i| format!("#k{i}")).collect();
    p(
        &mut b,
        "64 verification methods (the most)",
        &["Boundary"],
        json!({"did": DID, "document": {"id": DID, "verificationMethod": many, "assertionMethod": many_ids}}),
        Ok(json!({"methods": many_ids})),
    );
    p(
        &mut b,
        "exactly 65536 bytes (padded with spaces)",
        &["Boundary"],
        json!({"did": DID, "document": doc1, "pad_to_bytes": 65536}),
        Ok(json!({"methods": [key1]})),
    );
    p(
        &mut b,
        "a UTF-8 byte order mark before the JSON: JSON texts must not start with one (RFC 8259 §8.1), a parser may ignore it",
        &["Bom"],
        json!({"did": DID, "document_text": format!("\u{feff}{}", serde_json::to_string(&doc1).expect("serialises"))}),
        Err("invalid_document"),
    );
    p(
        &mut b,
        "a document whose id is another DID: a host cannot serve someone else's identity",
        &["IdMismatch"],
        json!({"did": DID, "document": standard_doc("did:web:bank.example.com", &[("key-1", k1.clone())])}),
        Err("document_id_mismatch"),
    );
    p(
        &mut b,
        "id differs only in case",
        &["IdMismatch"],
        json!({"did": DID, "document": {"id": "did:web:Agent-A.example.com"}}),
        Err("document_id_mismatch"),
    );
    p(
        &mut b,
        "id names another port",
        &["IdMismatch"],
        json!({"did": "did:web:localhost%3A8080", "document": {"id": "did:web:localhost%3A8081"}}),
        Err("document_id_mismatch"),
    );
    p(
        &mut b,
        "id with a trailing fragment",
        &["IdMismatch"],
        json!({"did": DID, "document": {"id": format!("{DID}#self")}}),
        Err("document_id_mismatch"),
    );
    p(&mut b, "no id", &[], json!({"did": DID, "document": {"verificationMethod": []}}), Err("invalid_document"));
    p(&mut b, "id is not a string", &[], json!({"did": DID, "document": {"id": [DID]}}), Err("invalid_document"));
    p(
        &mut b,
        "not JSON",
        &[],
        json!({"did": DID, "document_text": "{\"id\": \"did:web:agent-a.example.com\""}),
        Err("invalid_document"),
    );
    p(
        &mut b,
        "a JSON array, not an object",
        &[],
        json!({"did": DID, "document": [{"id": DID}]}),
        Err("invalid_document"),
    );
    p(&mut b, "empty body", &[], json!({"did": DID, "document_text": ""}), Err("invalid_document"));
    p(
        &mut b,
        "65537 bytes",
        &["Boundary"],
        json!({"did": DID, "document": doc1, "pad_to_bytes": 65537}),
        Err("document_too_large"),
    );
    let too_many: Vec<Value> = (0..65).map(|i| method(&format!("#k{i}"), "JsonWebKey2020", k1.clone())).collect();
    p(
        &mut b,
        "65 verification methods",
        &["Boundary"],
        json!({"did": DID, "document": {"id": DID, "verificationMethod": too_many}}),
        Err("too_many_methods"),
    );
    let refs: Vec<String> = (0..65).map(|_| "#key-1".to_owned()).collect();
    p(
        &mut b,
        "65 entries in authentication",
        &["Boundary"],
        json!({"did": DID, "document": {"id": DID, "verificationMethod": [method("#key-1", "JsonWebKey2020", k1.clone())], "authentication": refs}}),
        Err("too_many_methods"),
    );
    let forty: Vec<Value> = (0..40).map(|i| method(&format!("#k{i}"), "JsonWebKey2020", k1.clone())).collect();
    let embedded: Vec<Value> = (40..65).map(|i| method(&format!("#k{i}"), "JsonWebKey2020", k1.clone())).collect();
    p(
        &mut b,
        "40 methods plus 25 embedded ones: 65 in all",
        &["Boundary", "Embedded"],
        json!({"did": DID, "document": {"id": DID, "verificationMethod": forty, "assertionMethod": embedded}}),
        Err("too_many_methods"),
    );
    p(
        &mut b,
        "verificationMethod is an object, not an array",
        &[],
        json!({"did": DID, "document": {"id": DID, "verificationMethod": method(&key1, "JsonWebKey2020", k1.clone())}}),
        Err("invalid_document"),
    );
    p(
        &mut b,
        "a method without type",
        &[],
        json!({"did": DID, "document": {"id": DID, "verificationMethod": [{"id": key1, "controller": DID, "publicKeyJwk": k1}]}}),
        Err("invalid_document"),
    );
    p(
        &mut b,
        "a method without controller",
        &[],
        json!({"did": DID, "document": {"id": DID, "verificationMethod": [{"id": key1, "type": "JsonWebKey2020", "publicKeyJwk": k1}]}}),
        Err("invalid_document"),
    );
    p(
        &mut b,
        "a method whose id belongs to another DID",
        &[],
        json!({"did": DID, "document": {"id": DID, "verificationMethod": [method("did:web:bank.example.com#key-1", "JsonWebKey2020", k1.clone())]}}),
        Err("invalid_method_id"),
    );
    p(
        &mut b,
        "a method id without a fragment",
        &[],
        json!({"did": DID, "document": {"id": DID, "verificationMethod": [method(DID, "JsonWebKey2020", k1.clone())]}}),
        Err("invalid_method_id"),
    );
    p(
        &mut b,
        "a method id with an invalid fragment",
        &[],
        json!({"did": DID, "document": {"id": DID, "verificationMethod": [method("#key 1", "JsonWebKey2020", k1.clone())]}}),
        Err("invalid_method_id"),
    );
    p(
        &mut b,
        "the same method id twice (absolute and relative)",
        &["RelativeIds"],
        json!({"did": DID, "document": {"id": DID, "verificationMethod": [method(&key1, "JsonWebKey2020", k1.clone()), method("#key-1", "JsonWebKey2020", k2.clone())]}}),
        Err("invalid_method_id"),
    );
    p(
        &mut b,
        "an embedded method repeats the id of a listed one",
        &["Embedded"],
        json!({"did": DID, "document": {"id": DID, "verificationMethod": [method(&key1, "JsonWebKey2020", k1.clone())], "assertionMethod": [method(&key1, "JsonWebKey2020", k2.clone())]}}),
        Err("invalid_method_id"),
    );

    // A parser may ignore a byte order mark: either outcome is allowed.
    for t in parse.iter_mut().filter(|t| t["flags"].as_array().is_some_and(|f| f.contains(&json!("Bom")))) {
        t["result"] = json!("acceptable");
    }

    // ---- find_signing_jwk
    let mut find = Vec::new();
    let mut f =
        |b: &mut Builder, comment: &str, flags: &[&str], doc: Value, key_id: &str, outcome: Result<Value, &str>| {
            let t = b.push(comment, flags, json!({"did": doc["id"], "document": doc, "key_id": key_id}), outcome);
            find.push(t);
        };
    let with_method = |m: Value, relation: &str| -> Value {
        let mut d = json!({"id": DID, "verificationMethod": [m]});
        d[relation] = json!([key1]);
        d
    };
    f(&mut b, "key id as a full DID URL", &[], doc1.clone(), &key1, Ok(k1.clone()));
    f(&mut b, "key id as a relative reference", &[], doc1.clone(), "#key-1", Ok(k1.clone()));
    f(&mut b, "key id as a bare fragment (e.g. key-2024-q3-primary)", &[], doc1.clone(), "key-1", Ok(k1.clone()));
    f(
        &mut b,
        "relative ids in the document, full DID URL as key id",
        &["RelativeIds"],
        json!({"id": DID, "verificationMethod": [method("#key-1", "JsonWebKey2020", k1.clone())], "assertionMethod": ["#key-1"]}),
        &key1,
        Ok(k1.clone()),
    );
    f(
        &mut b,
        "a method embedded in assertionMethod",
        &["Embedded"],
        json!({"id": DID, "assertionMethod": [method(&format!("{DID}#key-2"), "JsonWebKey2020", k2.clone())]}),
        &format!("{DID}#key-2"),
        Ok(k2.clone()),
    );
    f(
        &mut b,
        "a method listed only in authentication",
        &[],
        with_method(method(&key1, "JsonWebKey2020", k1.clone()), "authentication"),
        &key1,
        Ok(k1.clone()),
    );
    f(
        &mut b,
        "method type JsonWebKey",
        &[],
        with_method(method(&key1, "JsonWebKey", k1.clone()), "assertionMethod"),
        &key1,
        Ok(k1.clone()),
    );
    f(
        &mut b,
        "method type EcdsaSecp256r1VerificationKey2019 with publicKeyJwk",
        &[],
        with_method(method(&key1, "EcdsaSecp256r1VerificationKey2019", k1.clone()), "assertionMethod"),
        &key1,
        Ok(k1.clone()),
    );
    let k1_full = json!({"kty": "EC", "crv": "P-256", "x": K1.0, "y": K1.1, "alg": "ES256", "use": "sig", "kid": "key-1", "key_ops": ["verify"]});
    f(
        &mut b,
        "JWK with alg ES256, use sig, kid and key_ops",
        &[],
        with_method(method(&key1, "JsonWebKey2020", k1_full.clone()), "assertionMethod"),
        &key1,
        Ok(k1_full),
    );
    f(
        &mut b,
        "two keys: the second is found",
        &[],
        standard_doc(DID, &[("key-1", k1.clone()), ("key-2", k2.clone())]),
        "key-2",
        Ok(k2.clone()),
    );
    f(&mut b, "no such key", &[], doc1.clone(), &format!("{DID}#key-9"), Err("unknown_key"));
    f(&mut b, "a key id of another DID", &[], doc1.clone(), "did:web:bank.example.com#key-1", Err("unknown_key"));
    f(&mut b, "a key id with an invalid fragment", &[], doc1.clone(), "key 1", Err("unknown_key"));
    f(&mut b, "an empty key id", &[], doc1.clone(), "", Err("unknown_key"));
    f(&mut b, "a DID URL without fragment", &[], doc1.clone(), DID, Err("unknown_key"));
    f(
        &mut b,
        "a method in neither assertionMethod nor authentication",
        &[],
        json!({"id": DID, "verificationMethod": [method(&key1, "JsonWebKey2020", k1.clone())]}),
        &key1,
        Err("key_not_authorized"),
    );
    f(
        &mut b,
        "a method listed only in keyAgreement and capabilityInvocation",
        &[],
        json!({"id": DID, "verificationMethod": [method(&key1, "JsonWebKey2020", k1.clone())], "keyAgreement": [key1], "capabilityInvocation": [key1]}),
        &key1,
        Err("key_not_authorized"),
    );
    let rsa = json!({"kty": "RSA", "e": "AQAB", "alg": "RS256",
        "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"});
    f(
        &mut b,
        "an RSA key (RFC 7517 A.1): refused with a message asking for P-256",
        &["RsaKey"],
        with_method(method(&key1, "JsonWebKey2020", rsa.clone()), "assertionMethod"),
        &key1,
        Err("unsupported_key_type"),
    );
    f(
        &mut b,
        "a secp256k1 key (scalar SHA-256(\"a2a-ident-vector-secp256k1\"))",
        &["OtherCurve"],
        with_method(
            method(
                &key1,
                "JsonWebKey2020",
                json!({"kty": "EC", "crv": "secp256k1", "x": "wfL6XPDUZ0UIYFU3YopV9SqM76JGOWJPJC2_1BA1BXQ", "y": "JUZ-aD7aB9Lz9epjABg0xpO2LuK9LpJ3EIF3HRQyulo"}),
            ),
            "assertionMethod",
        ),
        &key1,
        Err("unsupported_key_type"),
    );
    f(
        &mut b,
        "a P-384 key (scalar SHA-256(\"a2a-ident-vector-P-384\"))",
        &["OtherCurve"],
        with_method(
            method(
                &key1,
                "JsonWebKey2020",
                json!({"kty": "EC", "crv": "P-384", "x": "w9BWO9P3EOroU-Adz40vchVFrLjWdbGPn5pFNAHf7CCwU9DKH14BAPqlQ8OeRGW2", "y": "UhIA-GaXwYsHlwevsZXCxfh-fhpbD1QU0xbNaj837T03jFRt_yrvDDXiNS2tL5U6"}),
            ),
            "assertionMethod",
        ),
        &key1,
        Err("unsupported_key_type"),
    );
    f(
        &mut b,
        "an Ed25519 key (RFC 8037 A.2)",
        &["OtherCurve"],
        with_method(
            method(
                &key1,
                "JsonWebKey2020",
                json!({"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}),
            ),
            "assertionMethod",
        ),
        &key1,
        Err("unsupported_key_type"),
    );
    f(
        &mut b,
        "an EC key without crv",
        &[],
        with_method(method(&key1, "JsonWebKey2020", json!({"kty": "EC", "x": K1.0, "y": K1.1})), "assertionMethod"),
        &key1,
        Err("unsupported_key_type"),
    );
    f(
        &mut b,
        "a P-256 key marked alg ES384",
        &[],
        with_method(
            method(&key1, "JsonWebKey2020", json!({"kty": "EC", "crv": "P-256", "x": K1.0, "y": K1.1, "alg": "ES384"})),
            "assertionMethod",
        ),
        &key1,
        Err("unsupported_key_type"),
    );
    f(
        &mut b,
        "method type Ed25519VerificationKey2018 with publicKeyBase58",
        &[],
        with_method(
            json!({"id": key1, "type": "Ed25519VerificationKey2018", "controller": DID, "publicKeyBase58": "H3C2AVvLMv6gmMNam3uVAjZpfkcJCwDwnZn6z3wXmqPV"}),
            "assertionMethod",
        ),
        &key1,
        Err("unsupported_key_type"),
    );
    f(
        &mut b,
        "method type Multikey (publicKeyMultibase)",
        &[],
        with_method(
            json!({"id": key1, "type": "Multikey", "controller": DID, "publicKeyMultibase": "zDnaerDaTF5BXEavCrfRZEk316dpbLsfPDZ3WJ5hRTPFU2169"}),
            "assertionMethod",
        ),
        &key1,
        Err("unsupported_key_type"),
    );
    f(
        &mut b,
        "JsonWebKey2020 without publicKeyJwk",
        &[],
        with_method(json!({"id": key1, "type": "JsonWebKey2020", "controller": DID}), "assertionMethod"),
        &key1,
        Err("unsupported_key_type"),
    );
    f(
        &mut b,
        "the JWK carries the private key d: refused, the key is compromised",
        &["PrivateKey"],
        with_method(
            method(&key1, "JsonWebKey2020", json!({"kty": "EC", "crv": "P-256", "x": K1.0, "y": K1.1, "d": K1_D})),
            "assertionMethod",
        ),
        &key1,
        Err("invalid_jwk"),
    );
    f(
        &mut b,
        "use enc",
        &[],
        with_method(
            method(&key1, "JsonWebKey2020", json!({"kty": "EC", "crv": "P-256", "x": K1.0, "y": K1.1, "use": "enc"})),
            "assertionMethod",
        ),
        &key1,
        Err("invalid_jwk"),
    );
    f(
        &mut b,
        "x of 31 bytes",
        &["BadCoordinate"],
        with_method(
            method(
                &key1,
                "JsonWebKey2020",
                json!({"kty": "EC", "crv": "P-256", "x": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "y": K1.1}),
            ),
            "assertionMethod",
        ),
        &key1,
        Err("invalid_jwk"),
    );
    f(
        &mut b,
        "x with base64 padding",
        &["BadCoordinate"],
        with_method(
            method(&key1, "JsonWebKey2020", json!({"kty": "EC", "crv": "P-256", "x": format!("{}=", K1.0), "y": K1.1})),
            "assertionMethod",
        ),
        &key1,
        Err("invalid_jwk"),
    );
    f(
        &mut b,
        "x in standard base64 (+ and /) instead of base64url",
        &["BadCoordinate"],
        with_method(
            method(
                &key1,
                "JsonWebKey2020",
                json!({"kty": "EC", "crv": "P-256", "x": K2.0.replace('_', "/"), "y": K2.1}),
            ),
            "assertionMethod",
        ),
        &key1,
        Err("invalid_jwk"),
    );
    f(
        &mut b,
        "a point off the curve (y of key-2 with key-1's x)",
        &["BadCoordinate"],
        with_method(
            method(&key1, "JsonWebKey2020", json!({"kty": "EC", "crv": "P-256", "x": K1.0, "y": K2.1})),
            "assertionMethod",
        ),
        &key1,
        Err("invalid_jwk"),
    );
    f(
        &mut b,
        "x and y zero (not a curve point)",
        &["BadCoordinate"],
        with_method(
            method(
                &key1,
                "JsonWebKey2020",
                json!({"kty": "EC", "crv": "P-256", "x": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "y": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}),
            ),
            "assertionMethod",
        ),
        &key1,
        Err("invalid_jwk"),
    );
    f(
        &mut b,
        "no kty",
        &[],
        with_method(method(&key1, "JsonWebKey2020", json!({"crv": "P-256", "x": K1.0, "y": K1.1})), "assertionMethod"),
        &key1,
        Err("invalid_jwk"),
    );
    f(
        &mut b,
        "publicKeyJwk is a string",
        &[],
        with_method(
            method(&key1, "JsonWebKey2020", json!(serde_json::to_string(&k1).expect("serialises"))),
            "assertionMethod",
        ),
        &key1,
        Err("invalid_jwk"),
    );

    // ---- generate
    let mut generate = Vec::new();
    let mut g = |b: &mut Builder, comment: &str, did: &str, keys: Value, outcome: Result<Value, &str>| {
        let t = b.push(comment, &[], json!({"did": did, "keys": keys}), outcome);
        generate.push(t);
    };
    g(&mut b, "one key", DID, json!([{"key_id": "key-1", "jwk": k1}]), Ok(doc1.clone()));
    g(
        &mut b,
        "two keys given as #fragment and as a full DID URL",
        DID,
        json!([{"key_id": "#key-2024-q3-primary", "jwk": k1}, {"key_id": format!("{DID}#key-2"), "jwk": k2}]),
        Ok(standard_doc(DID, &[("key-2024-q3-primary", k1.clone()), ("key-2", k2.clone())])),
    );
    g(
        &mut b,
        "a local agent's DID",
        "did:web:localhost%3A8080",
        json!([{"key_id": "key-1", "jwk": k1}]),
        Ok(standard_doc("did:web:localhost%3A8080", &[("key-1", k1.clone())])),
    );
    g(
        &mut b,
        "no keys: a document nobody can sign for",
        DID,
        json!([]),
        Ok(
            json!({"@context": ["https://www.w3.org/ns/did/v1", "https://w3id.org/security/suites/jws-2020/v1"], "id": DID}),
        ),
    );
    g(&mut b, "an RSA key is refused", DID, json!([{"key_id": "key-1", "jwk": rsa}]), Err("unsupported_key_type"));
    g(
        &mut b,
        "a private JWK is never published",
        DID,
        json!([{"key_id": "key-1", "jwk": {"kty": "EC", "crv": "P-256", "x": K1.0, "y": K1.1, "d": K1_D}}]),
        Err("invalid_jwk"),
    );
    g(&mut b, "an invalid key id", DID, json!([{"key_id": "key 1", "jwk": k1}]), Err("invalid_fragment"));
    g(
        &mut b,
        "the same key id twice",
        DID,
        json!([{"key_id": "key-1", "jwk": k1}, {"key_id": "#key-1", "jwk": k2}]),
        Err("invalid_method_id"),
    );
    g(
        &mut b,
        "a key id of another DID",
        DID,
        json!([{"key_id": "did:web:bank.example.com#key-1", "jwk": k1}]),
        Err("unknown_key"),
    );

    let total = parse.len() + find.len() + generate.len();
    let file = json!({
        "algorithm": "A2A-DID-DOCUMENT",
        "spec_refs": ["PROTOCOL.md §9.1.3-§9.1.4 (DID-14 .. DID-26)", "https://www.w3.org/TR/did-core/", "RFC 7517", "RFC 7518 §6.2"],
        "header": [
            "DID documents of did:web agents: parsing a fetched document, finding the public key that verifies a signature, and the document an agent publishes.",
            "Generated by a2a-core/tests/vectors/did.rs (expected values written by hand there); regenerate with: cargo test -p a2a-core --test vectors -- --ignored regenerate_did_documents_vectors",
            "Keys: key-1 and key-2 are P-256 keys whose private scalars are SHA-256(\"a2a-ident-vector-key-1\") and SHA-256(\"a2a-ident-vector-key-2\") read as big-endian integers.",
            "input.document is serialised as compact JSON (input.document_text is used as is), then padded with ASCII spaces to input.pad_to_bytes when given; that byte string is what the resolver received for input.did.",
            "Group operation `parse`: expected lists the ids of every verification method (verificationMethod, then methods embedded in authentication, then in assertionMethod).",
            "Group operation `find_signing_jwk`: input.key_id is the key id of a signature; expected is the JWK that verifies it.",
            "Group operation `generate`: input.keys are (key id, public JWK) pairs given to DidDocument::try_generate; expected is the document an agent publishes, compared as JSON values (DidDocument::generate writes the same for valid input, without the checks).",
            "`error` is the stable reason (DidError::reason): document_* / invalid_document / too_many_methods / invalid_method_id map to did_resolution_failed, unknown_key / key_not_authorized to unknown_key, unsupported_key_type / invalid_jwk to unsupported_key_type."
        ],
        "notes": {
            "RelativeIds": "Method ids or references written as #fragment.",
            "Embedded": "A verification method embedded in a verification relationship instead of referenced.",
            "Boundary": "A size or count at or just past a limit.",
            "Bom": "A byte order mark before the JSON text.",
            "IdMismatch": "The document's id is not the DID that was resolved.",
            "RsaKey": "An RSA key: refused with a message saying ECDSA P-256 is required.",
            "OtherCurve": "A key on a curve other than P-256.",
            "PrivateKey": "The published JWK contains the private key.",
            "BadCoordinate": "The x or y member of a P-256 JWK is malformed or not a curve point."
        },
        "numberOfTests": total,
        "testGroups": [
            {"operation": "parse", "tests": parse},
            {"operation": "find_signing_jwk", "tests": find},
            {"operation": "generate", "tests": generate},
        ],
    });
    let path = crate::common::vectors_dir().join("did_documents.json");
    let text = serde_json::to_string_pretty(&file).expect("serialises") + "\n";
    std::fs::write(&path, text).expect("writes the vector file");
}
