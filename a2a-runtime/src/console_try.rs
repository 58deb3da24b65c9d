//! What the agent's console and the gateway's share beyond the login ([`crate::console_auth`]): the "Try it" panel
//! and the Sessions view (one script each, [`TRY_JS`] and [`SESSIONS_JS`], served by both consoles), and the signing
//! keys an operator uploads for one browser login so that "Try it" can call capabilities that require `did_auth`.
//!
//! Signing is done here, in the console's backend, not in the browser: the key is parsed once, kept only in this
//! process's memory under the login it was uploaded with (never written to disk, never logged — `SigningKey`'s
//! `Debug` shows its thumbprint only), and dropped when that login logs out or expires. The page asks
//! `POST /console/api/sign` for the `A2A-Signature` of exactly the request it is about to send (INT-1..INT-10: an
//! ES256 compact JWS whose claims bind the method, target, the A2A headers and the SHA-256 of the body's canonical
//! JSON, `payload_hash`), valid for [`SIGNATURE_LIFETIME_S`] seconds; the private key never reaches the page's
//! JavaScript, where any script of the page (or an extension) could read it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use a2a_core::did::Did;
use a2a_core::error::{A2aError, ErrorCode};
use a2a_core::integrity::{self, Coverage, MessageParts};
use a2a_core::keys::SigningKey;
use axum::body::Body;
use axum::http::{Method, Response, StatusCode};
use serde_json::{Value, json};

use crate::console_auth::{CSP, secure_headers};

/// The "Try it" panel's script (both consoles: `/console/assets/try.js`).
pub const TRY_JS: &str = include_str!("console_try.js");
/// The Sessions view's script (both consoles: `/console/assets/sessions.js`).
pub const SESSIONS_JS: &str = include_str!("console_sessions.js");

/// The scripts both consoles serve alike, by path: `/console/assets/dom.js` ([`crate::console_auth::DOM_JS`]),
/// `try.js` ([`TRY_JS`]) and `sessions.js` ([`SESSIONS_JS`]).
pub fn shared_script(path: &str) -> Option<&'static str> {
    match path {
        "/console/assets/dom.js" => Some(crate::console_auth::DOM_JS),
        "/console/assets/try.js" => Some(TRY_JS),
        "/console/assets/sessions.js" => Some(SESSIONS_JS),
        _ => None,
    }
}

/// The key upload: `POST` (upload), `GET` (which one is in use), `DELETE` (forget it).
pub const SIGNER_PATH: &str = "/console/api/signer";
/// The signature of one request: `POST`.
pub const SIGN_PATH: &str = "/console/api/sign";
/// How long a signature made for "Try it" is valid (INT-5 bounds it to 300).
pub const SIGNATURE_LIFETIME_S: u32 = 60;
/// The largest upload or signing request read.
pub const MAX_BODY_BYTES: usize = 256 * 1024;
/// The key id used when the upload names none.
pub const DEFAULT_KEY_ID: &str = "key-1";

/// One uploaded identity: the DID, the key's id in its DID document, the key, and when its login ends.
struct Signer {
    did: String,
    key_id: String,
    key: SigningKey,
    expires: u64,
}

/// The signing keys uploaded to one console, each held for one login (in memory only).
#[derive(Default)]
pub struct Signers {
    by_login: Mutex<HashMap<String, Signer>>,
}

fn now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Signers {
    /// No key.
    pub fn new() -> Signers {
        Signers::default()
    }

    /// Drops the key of `login` (at logout).
    pub fn forget(&self, login: &str) {
        self.lock().remove(login);
    }

    /// How many keys are held (expired ones are dropped first).
    pub fn len(&self) -> usize {
        let mut m = self.lock();
        let now = now_s();
        m.retain(|_, s| s.expires > now);
        m.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Signer>> {
        self.by_login.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The `{did, kid, public_jwk, expires_at}` of `login`'s key, if it has a live one.
    fn describe(&self, login: &str) -> Value {
        let mut m = self.lock();
        let now = now_s();
        m.retain(|_, s| s.expires > now);
        match m.get(login) {
            None => json!({"signer": null}),
            Some(s) => json!({"signer": {
                "did": s.did, "kid": format!("{}#{}", s.did, s.key_id),
                "public_jwk": s.key.verifying_key().to_jwk(), "expires_at": s.expires,
            }}),
        }
    }
}

fn json_response(status: StatusCode, v: &Value) -> Response<Body> {
    let mut r = Response::new(Body::from(serde_json::to_vec(v).unwrap_or_default()));
    *r.status_mut() = status;
    secure_headers(r.headers_mut(), "application/json", CSP);
    r
}

/// A JSON `ErrorBody` answer.
pub fn error(e: A2aError) -> Response<Body> {
    let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(status, &serde_json::to_value(e.to_body()).unwrap_or_default())
}

fn invalid(member: &str, message: impl Into<String>) -> Response<Body> {
    error(A2aError::with_message(ErrorCode::INVALID_REQUEST, message).details(json!({"member": member})))
}

/// A private key as PEM (PKCS#8 or SEC1) text, or as a JWK (an object, or its JSON text).
fn parse_key(v: &Value) -> Result<SigningKey, String> {
    let jwk = match v {
        Value::String(s) if s.trim_start().starts_with("-----BEGIN") => {
            return SigningKey::from_pem(s.trim()).map_err(|e| format!("not a P-256 private key in PEM: {e}"));
        }
        Value::String(s) => serde_json::from_str::<Value>(s)
            .map_err(|_| "neither a PEM private key (-----BEGIN ...) nor a JWK (JSON)".to_owned())?,
        Value::Object(_) => v.clone(),
        _ => return Err("a PEM text or a JWK object".to_owned()),
    };
    SigningKey::from_jwk(&jwk).map_err(|e| format!("not a P-256 private JWK (kty EC, crv P-256, x, y, d): {e}"))
}

/// Answers the signing paths of a console ([`SIGNER_PATH`], [`SIGN_PATH`]) for a request already let in by the
/// console's login; `None` for every other path. `login` is the browser login the key is kept for (its id and
/// expiry, [`crate::console_auth::login_of`]), `None` when the request carries none (a bearer token);
/// `audience` is the DID signatures are addressed to: the console's own agent or gateway, which verifies them.
pub async fn handle(
    signers: &Signers,
    login: Option<(String, u64)>,
    audience: &str,
    method: &Method,
    path: &str,
    body: Body,
) -> Option<Response<Body>> {
    if path != SIGNER_PATH && path != SIGN_PATH {
        return None;
    }
    let allowed = if path == SIGN_PATH { "POST" } else { "GET, POST, DELETE" };
    let ok_method = match path {
        SIGN_PATH => method == Method::POST,
        _ => [Method::GET, Method::HEAD, Method::POST, Method::DELETE].contains(method),
    };
    if !ok_method {
        let mut r =
            error(A2aError::with_message(ErrorCode::METHOD_NOT_ALLOWED, format!("this path accepts {allowed}")));
        r.headers_mut().insert(axum::http::header::ALLOW, axum::http::HeaderValue::from_static(allowed));
        return Some(r);
    }
    if (method == Method::GET || method == Method::HEAD) && login.is_none() {
        return Some(json_response(StatusCode::OK, &json!({"signer": null, "login": false})));
    }
    let Some((login, expires)) = login else {
        return Some(error(A2aError::with_message(
            ErrorCode::INVALID_REQUEST,
            "a signing key belongs to a browser login: log in to the console with the form (or ?token=) first; a \
             bearer token is not a login",
        )));
    };
    if method == Method::GET || method == Method::HEAD {
        return Some(json_response(StatusCode::OK, &signers.describe(&login)));
    }
    if method == Method::DELETE {
        signers.forget(&login);
        return Some(json_response(StatusCode::OK, &json!({"signer": null})));
    }
    let bytes = match http_body_util::BodyExt::collect(http_body_util::Limited::new(body, MAX_BODY_BYTES)).await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return Some(error(
                A2aError::with_message(ErrorCode::PAYLOAD_TOO_LARGE, "the request body is too large")
                    .details(json!({"limit_bytes": MAX_BODY_BYTES})),
            ));
        }
    };
    let v: Value = match serde_json::from_slice(&bytes) {
        Ok(v @ Value::Object(_)) => v,
        _ => return Some(error(A2aError::with_message(ErrorCode::INVALID_REQUEST, "the body must be a JSON object"))),
    };
    Some(if path == SIGNER_PATH { upload(signers, &login, expires, &v) } else { sign(signers, &login, audience, &v) })
}

/// `POST /console/api/signer` `{"did", "key", "key_id"?}`.
fn upload(signers: &Signers, login: &str, expires: u64, v: &Value) -> Response<Body> {
    let Some(did) = v.get("did").and_then(Value::as_str).map(str::trim) else {
        return invalid("did", "did: the DID the key signs as (did:web:...) is required");
    };
    if let Err(e) = Did::parse(did) {
        return invalid("did", format!("did: {e}"));
    }
    let key_id = v.get("key_id").and_then(Value::as_str).map(str::trim).filter(|k| !k.is_empty());
    let key_id = key_id.unwrap_or(DEFAULT_KEY_ID);
    if let Err(e) = integrity::parse_kid(&format!("{did}#{key_id}")) {
        return invalid("key_id", format!("key_id: {e}"));
    }
    let key = match v.get("key").map(parse_key) {
        None => return invalid("key", "key: the P-256 private key (PEM or JWK) is required"),
        Some(Err(e)) => return invalid("key", format!("key: {e}")),
        Some(Ok(k)) => k,
    };
    signers.lock().insert(login.to_owned(), Signer { did: did.to_owned(), key_id: key_id.to_owned(), key, expires });
    json_response(StatusCode::OK, &signers.describe(login))
}

/// `POST /console/api/sign` `{"method", "target", "headers": {...}, "body": "..." | null}`: the `A2A-Signature` of
/// that request, addressed to `audience`.
fn sign(signers: &Signers, login: &str, audience: &str, v: &Value) -> Response<Body> {
    let method = v.get("method").and_then(Value::as_str).unwrap_or("");
    if !["GET", "POST", "DELETE"].contains(&method) {
        return invalid("method", "method: GET, POST or DELETE");
    }
    let target = v.get("target").and_then(Value::as_str).unwrap_or("");
    if !target.starts_with("/a2a") {
        return invalid("target", "target: the request target of an A2A endpoint (/a2a/...)");
    }
    let Some(headers) = v.get("headers").and_then(Value::as_object) else {
        return invalid("headers", "headers: an object of the request's headers");
    };
    let pairs: Vec<(&str, &str)> = headers.iter().filter_map(|(k, v)| v.as_str().map(|v| (k.as_str(), v))).collect();
    let body = match v.get("body") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_bytes()),
        Some(_) => return invalid("body", "body: the request body as text, or null"),
    };
    let m = signers.lock();
    let Some(s) = m.get(login).filter(|s| s.expires > now_s()) else {
        return error(A2aError::with_message(
            ErrorCode::INVALID_REQUEST,
            "no signing key for this login: upload one (Try it, Signing key) first",
        ));
    };
    let parts = MessageParts { method, target, headers: &pairs, body: body.unwrap_or(b""), status: None };
    let coverage = if body.is_some() { Coverage::PayloadHash } else { Coverage::HeaderOnly };
    let now = now_s() as i64;
    match integrity::sign(&s.key, &s.key_id, &s.did, audience, coverage, &parts, now, SIGNATURE_LIFETIME_S) {
        Ok(token) => json_response(
            StatusCode::OK,
            &json!({"signature": token, "kid": format!("{}#{}", s.did, s.key_id), "aud": audience}),
        ),
        Err(e) => invalid("headers", format!("cannot sign this request: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn call(s: &Signers, login: Option<(String, u64)>, method: Method, path: &str, v: Value) -> (u16, Value) {
        let r =
            handle(s, login, "did:web:gw.example.com", &method, path, Body::from(v.to_string())).await.expect("ours");
        let status = r.status().as_u16();
        let b = http_body_util::BodyExt::collect(r.into_body()).await.expect("body").to_bytes();
        (status, serde_json::from_slice(&b).expect("json"))
    }

    #[tokio::test]
    async fn an_uploaded_key_signs_requests_that_verify_and_is_dropped_at_logout() {
        let s = Signers::new();
        let key = SigningKey::generate().expect("key");
        let login = Some(("abc".to_owned(), now_s() + 60));
        let pem = key.to_pkcs8_pem().expect("pem").to_string();
        let (st, v) =
            call(&s, login.clone(), Method::POST, SIGNER_PATH, json!({"did": "did:web:me.example.com", "key": pem}))
                .await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(v["signer"]["kid"], "did:web:me.example.com#key-1");
        assert!(!v.to_string().contains("\"d\""), "the private part is never answered: {v}");
        let headers = json!({"A2A-Version": "0.3", "A2A-Sender-ID": "did:web:me.example.com",
            "Content-Type": "application/json"});
        let body = r#"{"b": 1, "a": "x"}"#;
        let req = json!({"method": "POST", "target": "/a2a/negotiate", "headers": headers, "body": body});
        let (st, v) = call(&s, login.clone(), Method::POST, SIGN_PATH, req.clone()).await;
        assert_eq!(st, 200, "{v}");
        let token = v["signature"].as_str().expect("signature");
        let pairs = [("A2A-Version", "0.3"), ("A2A-Sender-ID", "did:web:me.example.com")];
        let parts = MessageParts {
            method: "POST",
            target: "/a2a/negotiate",
            headers: &pairs,
            body: body.as_bytes(),
            status: None,
        };
        let pending = integrity::prepare(token, &parts, "did:web:gw.example.com", now_s() as i64)
            .expect("well-formed, addressed to the audience");
        pending.finish(key.verifying_key(), &parts).expect("verifies with the uploaded key");
        // Another login has no key; logging out drops this one.
        let (st, _) = call(&s, Some(("other".into(), now_s() + 60)), Method::POST, SIGN_PATH, req.clone()).await;
        assert_eq!(st, 400);
        s.forget("abc");
        let (st, _) = call(&s, login, Method::POST, SIGN_PATH, req).await;
        assert_eq!(st, 400);
        assert!(s.is_empty());
    }

    #[tokio::test]
    async fn bad_uploads_are_refused_naming_the_member() {
        let s = Signers::new();
        let login = Some(("abc".to_owned(), now_s() + 60));
        for (body, member) in [
            (json!({"key": "x"}), "did"),
            (json!({"did": "not a did", "key": "x"}), "did"),
            (
                json!({"did": "did:web:me.example.com", "key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"}),
                "key",
            ),
            (json!({"did": "did:web:me.example.com", "key": {"kty": "EC"}}), "key"),
            (json!({"did": "did:web:me.example.com"}), "key"),
        ] {
            let (st, v) = call(&s, login.clone(), Method::POST, SIGNER_PATH, body.clone()).await;
            assert_eq!(st, 400, "{body}: {v}");
            assert_eq!(v["error"]["details"]["member"], member, "{body}: {v}");
        }
        let (st, v) = call(&s, None, Method::POST, SIGNER_PATH, json!({})).await;
        assert_eq!(st, 400, "{v}");
        assert!(s.is_empty());
    }
}
