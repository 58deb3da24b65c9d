//! Edge security (`spec/PROTOCOL.md` §10, GW-3, GW-4, GW-8, GW-10): everything the gateway
//! checks once, before a request may reach an agent.
//!
//! - `A2A-Signature` verified as its audience (the gateway's DID), with the clock-skew bound of GW-4 (25 s), and its
//!   `(iss, jti)` remembered in the shared replay memory (INT-9);
//! - the capability's `auth_requirement` (did_auth: a verified signature; api_key and oauth2: the credential is
//!   present — its value is checked by the agent, which holds the keys), and the cross-domain policy (AUTH-7);
//! - a rate per sender.
//!
//! It also holds the two halves of GW-15 for answers: [`Edge::verify_answer`] checks an agent's signed answer as the
//! caller the gateway was, and [`Edge::sign_answer`] signs the gateway's answer for its own caller (INT-10).
//!
//! A request whose signature verified is forwarded re-signed by the gateway with `A2A-Forwarded-Sender` naming the
//! verified caller (GW-8); unsigned requests are forwarded as they came.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use a2a_core::capability::AuthRequirement;
use a2a_core::did::Did;
use a2a_core::error::{A2aError, ErrorCode};
use a2a_core::headers as h;
use a2a_core::integrity::{self, Coverage, MessageParts};
use a2a_core::keys::SigningKey;
use a2a_core::resolver::DidResolver;
use a2a_runtime::store::Store;
use bytes::Bytes;
use http::HeaderValue;
use serde_json::json;

use crate::config::EdgeSection;
use crate::h1::head::{Fields, Headers};
use crate::metrics::Metrics;

/// The gateway's own signing identity.
#[derive(Clone)]
pub struct Identity {
    /// The gateway's DID.
    pub did: String,
    /// Its key, when it verifies and re-signs.
    pub key: Option<SigningKey>,
    /// The key's id in the DID document.
    pub key_id: String,
}

/// The outcome of verifying a request's signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signed {
    /// No `A2A-Signature`.
    No,
    /// Verified, with this coverage.
    Verified(Coverage),
    /// Present but not verified (the gateway is transparent: `edge.verify_signatures = false`).
    Unchecked,
}

/// The edge checks.
pub struct Edge {
    /// Configuration.
    pub cfg: EdgeSection,
    /// Who the gateway is.
    pub identity: Identity,
    resolver: Arc<dyn DidResolver>,
    replay: Arc<dyn Store>,
    metrics: Arc<Metrics>,
    buckets: moka::sync::Cache<String, Arc<Mutex<Bucket>>>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

fn refuse(code: ErrorCode, message: impl Into<String>) -> A2aError {
    A2aError::with_message(code, message)
}

impl Edge {
    /// The edge of a gateway.
    pub fn new(
        cfg: EdgeSection,
        identity: Identity,
        resolver: Arc<dyn DidResolver>,
        replay: Arc<dyn Store>,
        metrics: Arc<Metrics>,
    ) -> Self {
        let buckets = moka::sync::Cache::builder()
            .max_capacity(cfg.rate_limit_max_senders)
            .time_to_idle(Duration::from_secs(60))
            .build();
        Edge { cfg, identity, resolver, replay, metrics, buckets }
    }

    /// The per-sender rate (`429 rate_limited` with the seconds to wait).
    pub fn rate_limit(&self, sender: &str) -> Result<(), A2aError> {
        let rate = f64::from(self.cfg.rate_limit_per_s);
        if rate <= 0.0 {
            return Ok(());
        }
        let burst = f64::from(self.cfg.rate_limit_burst.max(self.cfg.rate_limit_per_s));
        let bucket =
            self.buckets.get_with_by_ref(sender, || Arc::new(Mutex::new(Bucket { tokens: burst, at: Instant::now() })));
        let mut b = bucket.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * rate).min(burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            return Ok(());
        }
        let wait = ((1.0 - b.tokens) / rate).ceil().max(1.0) as u64;
        Err(refuse(ErrorCode::RATE_LIMITED, format!("{sender} sends more than {rate} requests per second"))
            .details(json!({"retry_after_s": wait, "limit_per_s": rate})))
    }

    fn skew(&self, what: &str, time: i64, now: i64) -> Result<(), A2aError> {
        let bound = self.cfg.max_clock_skew_s as i64;
        let off = time - now;
        if off.abs() > bound {
            // An alert-worthy line: a caller's clock (or ours) is off; signatures will start failing (GW-4).
            tracing::error!(
                alert = "clock_skew",
                offset_s = off,
                bound_s = bound,
                source = what,
                "request refused: its time is {off} s off the gateway's clock (bound {bound} s); check NTP on the caller and on this host"
            );
            return Err(refuse(
                ErrorCode::CLOCK_SKEW,
                format!(
                    "the request's {what} is {off} s off this gateway's clock; at most {bound} s is accepted — \
                     synchronise the sender's clock (NTP)"
                ),
            )
            .details(json!({"offset_s": off, "max_skew_s": bound})));
        }
        Ok(())
    }

    /// GW-4 for unsigned requests: a `Date` header, when present, is within the bound.
    pub fn check_date(&self, headers: &impl Fields) -> Result<(), A2aError> {
        let Some(date) = headers.field_str("date").and_then(Result::ok) else { return Ok(()) };
        let Some(t) = parse_http_date(date) else {
            return Err(refuse(ErrorCode::INVALID_HEADER, format!("Date {date:?} is not an HTTP date (RFC 9110)"))
                .details(json!({"header": "Date"})));
        };
        self.skew("Date header", t, unix_now())
    }

    /// Verifies `A2A-Signature` when present (INT-6 as the audience, GW-3), with GW-4's bound on `iat`, and the
    /// replay memory (INT-9). Returns how the request was signed.
    pub async fn verify(
        &self,
        method: &str,
        target: &str,
        headers: &impl Fields,
        body: &[u8],
    ) -> Result<Signed, A2aError> {
        let Some(sig) = headers.field(h::A2A_SIGNATURE) else { return Ok(Signed::No) };
        if !self.cfg.verify_signatures {
            return Ok(Signed::Unchecked);
        }
        let result = self.verify_inner(sig, method, target, headers, body).await;
        if let Err(e) = &result {
            self.metrics.signature_rejected(e.code.as_str());
        }
        result
    }

    async fn verify_inner(
        &self,
        sig: &[u8],
        method: &str,
        target: &str,
        headers: &impl Fields,
        body: &[u8],
    ) -> Result<Signed, A2aError> {
        let sig = crate::h1::head::visible_ascii(sig)
            .ok_or_else(|| refuse(ErrorCode::SIGNATURE_MALFORMED, "A2A-Signature is not visible ASCII"))?;
        let list = headers.text_pairs();
        let parts = MessageParts { method, target, headers: &list, body, status: None };
        let now = unix_now();
        let pending = integrity::prepare(sig, &parts, &self.identity.did, now)
            .map_err(|e| A2aError::with_message(e.code(), e.to_string()).details(e.details()))?;
        self.skew("signature time (iat)", pending.claims().iat, now)?;
        let key = self.resolver.resolve_key(pending.did(), pending.key_id()).await?;
        let verified = pending
            .finish(&key, &parts)
            .map_err(|e| A2aError::with_message(e.code(), e.to_string()).details(e.details()))?;
        let until_ms =
            (verified.exp().saturating_add(integrity::LEEWAY_SECS as i64).max(0) as u64).saturating_mul(1000);
        let fresh =
            self.replay.remember_jti(verified.iss(), verified.jti(), until_ms).await.map_err(|e| {
                refuse(ErrorCode::STORE_UNAVAILABLE, format!("cannot check the signature for replay: {e}"))
            })?;
        if !fresh {
            return Err(refuse(ErrorCode::REPLAYED_REQUEST, "this signed request was already received (replay)")
                .details(json!({"jti": verified.jti()})));
        }
        Ok(Signed::Verified(verified.coverage()))
    }

    fn is_internal(&self, sender: &str) -> bool {
        let Ok(did) = Did::parse(sender) else { return false };
        let host = did.host();
        self.cfg.internal_domains.iter().any(|d| host == d || host.ends_with(&format!(".{d}")))
    }

    /// The capability's `auth_requirement` and the cross-domain policy (§10), for a request whose signature state is
    /// `signed`. `has_body`: the step carries a body that a did_auth signature must bind (AUTH-5).
    pub fn authorize(
        &self,
        sender: &str,
        signed: Signed,
        requirement: Option<AuthRequirement>,
        headers: &impl Fields,
        has_body: bool,
    ) -> Result<(), A2aError> {
        let verified = matches!(signed, Signed::Verified(_));
        if self.cfg.require_did_auth_cross_domain && !verified && !self.is_internal(sender) {
            return Err(refuse(
                ErrorCode::DID_AUTH_REQUIRED,
                format!(
                    "{sender} is outside this gateway's internal domains ({}); sign the request (A2A-Signature, \
                     did_auth)",
                    self.cfg.internal_domains.join(", ")
                ),
            ));
        }
        match requirement {
            None | Some(AuthRequirement::None) => Ok(()),
            Some(AuthRequirement::ApiKey) if headers.field(h::A2A_API_KEY).is_some() => Ok(()),
            Some(AuthRequirement::ApiKey) => {
                Err(refuse(ErrorCode::AUTH_REQUIRED, "this capability requires an API key in the A2A-Api-Key header")
                    .details(json!({"auth_requirement": "api_key"})))
            }
            Some(AuthRequirement::Oauth2) => {
                let bearer = headers
                    .field_str("authorization")
                    .and_then(Result::ok)
                    .is_some_and(|v| v.len() > 7 && v[..7].eq_ignore_ascii_case("bearer "));
                if bearer {
                    Ok(())
                } else {
                    Err(refuse(
                        ErrorCode::AUTH_REQUIRED,
                        "this capability requires an OAuth 2.0 bearer token (Authorization: Bearer <JWT>)",
                    )
                    .details(json!({"auth_requirement": "oauth2"})))
                }
            }
            Some(AuthRequirement::DidAuth) => match signed {
                Signed::Verified(Coverage::HeaderOnly) if has_body => Err(refuse(
                    ErrorCode::INTEGRITY_MISMATCH,
                    "under did_auth a request with a body must be signed with coverage payload_hash or \
                     full_payload (AUTH-5)",
                )
                .details(json!({"mismatch": "coverage"}))),
                Signed::Verified(_) | Signed::Unchecked => Ok(()),
                Signed::No => Err(refuse(
                    ErrorCode::SIGNATURE_REQUIRED,
                    "this capability requires did_auth: sign the request with your DID key (A2A-Signature, \
                     spec §9.5), addressed to this gateway's DID",
                )
                .details(json!({"auth_requirement": "did_auth"}))),
            },
        }
    }

    /// GW-8: turns a verified request into the gateway's own: the caller's signature is removed, `A2A-Sender-ID`
    /// becomes the gateway, `A2A-Forwarded-Sender` names the verified caller, and the gateway signs for the agent
    /// (`aud` = the agent's DID) with `full_payload` coverage when there is a body, `header_only` otherwise.
    pub fn resign(
        &self,
        headers: &mut Headers,
        sender: &str,
        agent_did: &str,
        method: &str,
        target: &str,
        body: &[u8],
    ) -> Result<(), A2aError> {
        let Some(key) = &self.identity.key else {
            return Err(refuse(ErrorCode::INTERNAL_ERROR, "the gateway has no key to re-sign with"));
        };
        let bad = |e: &dyn std::fmt::Display| refuse(ErrorCode::INTERNAL_ERROR, format!("cannot re-sign: {e}"));
        headers.remove(h::A2A_SIGNATURE);
        headers.insert(h::A2A_FORWARDED_SENDER, Bytes::copy_from_slice(sender.as_bytes()));
        headers.insert(h::A2A_FORWARDED_VERIFIED, Bytes::from_static(b"true"));
        headers.insert(h::A2A_SENDER_ID, Bytes::copy_from_slice(self.identity.did.as_bytes()));
        let list = headers.text_pairs();
        let parts = MessageParts { method, target, headers: &list, body, status: None };
        let coverage = if body.is_empty() { Coverage::HeaderOnly } else { Coverage::FullPayload };
        let token = integrity::sign(
            key,
            &self.identity.key_id,
            &self.identity.did,
            agent_did,
            coverage,
            &parts,
            unix_now(),
            self.cfg.resign_lifetime_s,
        )
        .map_err(|e| bad(&e))?;
        drop(list);
        headers.insert(h::A2A_SIGNATURE, Bytes::from(token));
        Ok(())
    }
}

/// The request an agent's answer answers, as the gateway sent it (GW-15: what the agent's signature must name).
pub struct Forwarded<'a> {
    /// The agent's DID, from its DISCOVER (the expected `iss`).
    pub agent_did: &'a str,
    /// The DID the gateway forwarded as (the expected `aud`): its own when it re-signed the request (GW-8), else the
    /// caller's `A2A-Sender-ID`.
    pub as_did: &'a str,
    /// The method of the request sent to the agent.
    pub method: &'a str,
    /// Its target at the agent (the agent's mount point included).
    pub target: &'a str,
}

impl Edge {
    /// GW-15: verifies an agent's signed answer as the caller the gateway was (CLI-10, INT-10): `iss` the agent's DID,
    /// `aud` the DID the request was forwarded as, `htm`/`htu` of the forwarded request, `sts` the answer's status,
    /// with a key of the agent's DID document. The error is the integrity or resolution error, for the 502's details.
    pub async fn verify_answer(
        &self,
        sig: &[u8],
        fwd: &Forwarded<'_>,
        status: u16,
        headers: &impl Fields,
        body: &[u8],
    ) -> Result<(), A2aError> {
        let sig = crate::h1::head::visible_ascii(sig)
            .ok_or_else(|| refuse(ErrorCode::SIGNATURE_MALFORMED, "A2A-Signature is not visible ASCII"))?;
        let list = headers.text_pairs();
        let parts = MessageParts { method: fwd.method, target: fwd.target, headers: &list, body, status: Some(status) };
        let integrity =
            |e: integrity::IntegrityError| A2aError::with_message(e.code(), e.to_string()).details(e.details());
        let pending = integrity::prepare(sig, &parts, fwd.as_did, unix_now()).map_err(integrity)?;
        if pending.did() != fwd.agent_did {
            return Err(refuse(
                ErrorCode::SENDER_MISMATCH,
                format!("the answer is signed by {:?}, not by the agent {:?}", pending.did(), fwd.agent_did),
            ));
        }
        let key = self.resolver.resolve_key(pending.did(), pending.key_id()).await?;
        pending.finish(&key, &parts).map_err(integrity)?;
        Ok(())
    }

    /// Whether the gateway has a key (and so signs its answers, GW-15).
    pub fn has_key(&self) -> bool {
        self.identity.key.is_some()
    }

    /// GW-15: the gateway's own INT-10 signature of its answer to `caller` (its `A2A-Sender-ID`), for the caller's
    /// request (`method`, `target`), once every header of the answer is set. `None` without a key, when the caller
    /// is not a valid DID (no audience), or when signing fails (logged).
    pub fn sign_answer(
        &self,
        caller: &str,
        method: &str,
        target: &str,
        status: u16,
        headers: &impl Fields,
        body: &[u8],
    ) -> Option<HeaderValue> {
        let key = self.identity.key.as_ref()?;
        Did::parse(caller).ok()?;
        let sig = a2a_runtime::response_signature_of(
            key,
            &self.identity.key_id,
            &self.identity.did,
            caller,
            (method, target),
            status,
            &headers.text_pairs(),
            body,
        );
        match sig.map(|s| HeaderValue::from_str(&s)) {
            Ok(Ok(v)) => Some(v),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "the gateway's answer signature is not a header value");
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot sign the answer");
                None
            }
        }
    }
}

/// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form RFC 9110 senders use; seconds since the epoch.
pub fn parse_http_date(s: &str) -> Option<i64> {
    let fmt = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
    );
    let dt = time::PrimitiveDateTime::parse(s.trim(), &fmt).ok()?;
    Some(dt.assume_utc().unix_timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates_parse() {
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), Some(784111777));
        assert_eq!(parse_http_date("yesterday"), None);
    }

    /// The rate-limit buckets filled past `rate_limit_max_senders`: the cache holds at most the bound, and the newest
    /// sender is still limited (its bucket is kept, so its burst is spent and the next request is refused).
    #[test]
    fn rate_limit_buckets_filled_past_their_bound_stay_within_it_and_the_newest_sender_is_limited() {
        let cfg = EdgeSection {
            rate_limit_per_s: 1,
            rate_limit_burst: 2,
            rate_limit_max_senders: 64,
            ..EdgeSection::default()
        };
        let edge = Edge::new(
            cfg,
            Identity { did: "did:web:gw.example".into(), key: None, key_id: "k".into() },
            Arc::new(a2a_core::resolver::StaticResolver::new()),
            Arc::new(a2a_runtime::store::memory::MemoryStore::new(a2a_runtime::store::memory::MemoryLimits::default())),
            Arc::new(Metrics::new()),
        );
        for i in 0..1_000 {
            edge.rate_limit(&format!("did:web:s{i}.example")).expect("within the sender's burst");
        }
        edge.buckets.run_pending_tasks();
        assert!(edge.buckets.entry_count() <= 64, "{} buckets held, bound 64", edge.buckets.entry_count());
        let newest = "did:web:newest.example";
        assert!(edge.rate_limit(newest).is_ok());
        assert!(edge.rate_limit(newest).is_ok());
        let e = edge.rate_limit(newest).expect_err("the newest sender's third request within a second is refused");
        assert_eq!(e.code, ErrorCode::RATE_LIMITED);
        edge.buckets.run_pending_tasks();
        assert!(edge.buckets.entry_count() <= 64);
    }
}
