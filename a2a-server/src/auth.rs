//! Authentication per capability (`spec/PROTOCOL.md` §10): `none`, `api_key`, `oauth2` and `did_auth`, the
//! cross-domain policy, and replay protection of signed requests.

use std::sync::Arc;

use a2a_core::capability::AuthRequirement;
use a2a_core::did::Did;
use a2a_core::error::{A2aError, ErrorCode};
use a2a_core::integrity::{self, Coverage, MessageParts};
use a2a_core::jws;
use a2a_core::keys::VerifyingKey;
use a2a_core::resolver::DidResolver;
use axum::http::HeaderMap;
use serde_json::json;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::engine::{Caller, Engine};
use crate::router::ApiError;

/// What a signature covers: the request as received.
pub(crate) struct SignedParts<'a> {
    pub(crate) method: &'a str,
    pub(crate) target: &'a str,
    pub(crate) headers: &'a HeaderMap,
    pub(crate) body: &'a [u8],
}

/// An API key accepted for `api_key` capabilities (AUTH-2).
#[derive(Clone)]
pub struct ApiKey {
    digest: [u8; 32],
    senders: Vec<String>,
}

impl ApiKey {
    /// A key usable by any sender.
    pub fn new(key: &str) -> Self {
        ApiKey { digest: Sha256::digest(key.as_bytes()).into(), senders: Vec::new() }
    }

    /// Binds the key to these sender DIDs: another sender using it is refused.
    #[must_use]
    pub fn for_senders(mut self, senders: Vec<String>) -> Self {
        self.senders = senders;
        self
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKey").field("senders", &self.senders).finish_non_exhaustive()
    }
}

/// How `oauth2` bearer tokens are checked (AUTH-3).
#[derive(Clone, Debug)]
pub struct OAuth2 {
    /// The expected `iss`.
    pub issuer: String,
    /// The expected `aud` (by default the agent's DID).
    pub audience: Option<String>,
    /// The issuer's ES256 keys.
    pub keys: Vec<VerifyingKey>,
    /// Scope required per capability name.
    pub required_scopes: std::collections::HashMap<String, String>,
}

/// The authentication configuration of an agent.
#[derive(Clone, Default)]
pub struct Auth {
    pub(crate) did: String,
    pub(crate) api_keys: Vec<ApiKey>,
    pub(crate) oauth2: Option<OAuth2>,
    pub(crate) internal_domains: Vec<String>,
    pub(crate) require_did_auth_cross_domain: bool,
    pub(crate) resolver: Option<Arc<dyn DidResolver>>,
    pub(crate) trusted_gateways: Vec<String>,
}

fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

impl Auth {
    /// Checks the capability's requirement for a request whose body need not be bound by a signature.
    pub(crate) async fn check(
        &self,
        engine: &Engine,
        requirement: AuthRequirement,
        parts: &SignedParts<'_>,
        caller: &mut Caller,
    ) -> Result<(), ApiError> {
        self.check_inner(engine, requirement, parts, caller, false).await
    }

    /// Checks the capability's requirement; under `did_auth` the signature must bind the body (AUTH-5).
    pub(crate) async fn check_with_body_coverage(
        &self,
        engine: &Engine,
        requirement: AuthRequirement,
        parts: &SignedParts<'_>,
        caller: &mut Caller,
    ) -> Result<(), ApiError> {
        self.check_inner(engine, requirement, parts, caller, true).await
    }

    /// Verifies a signature if the request carries one (AUTH-6); requires nothing otherwise.
    pub(crate) async fn verify_if_signed(
        &self,
        engine: &Engine,
        parts: &SignedParts<'_>,
        caller: &mut Caller,
    ) -> Result<(), ApiError> {
        self.check_inner(engine, AuthRequirement::None, parts, caller, false).await
    }

    /// GW-9: a request carrying `A2A-Forwarded-Sender` must be signed by a trusted gateway (its `A2A-Sender-ID`);
    /// once that signature verifies, the caller is the forwarded sender, proven when the gateway says it verified the
    /// sender's own signature (`A2A-Forwarded-Verified: true`). Requests without the header are left alone.
    ///
    /// `body_coverage`: the gateway's signature must bind the body (steps with a body, AUTH-5).
    pub(crate) async fn forwarded(
        &self,
        engine: &Engine,
        parts: &SignedParts<'_>,
        caller: &mut Caller,
        body_coverage: bool,
    ) -> Result<(), ApiError> {
        use a2a_core::headers::{A2A_FORWARDED_SENDER, A2A_FORWARDED_VERIFIED};
        let Some(forwarded) = parts.headers.get(A2A_FORWARDED_SENDER) else { return Ok(()) };
        let refuse = |why: String| -> ApiError {
            engine.metrics.signature_failed(&ErrorCode::FORBIDDEN);
            A2aError::with_message(ErrorCode::FORBIDDEN, why).details(json!({"header": "A2A-Forwarded-Sender"})).into()
        };
        if !self.trusted_gateways.contains(&caller.sender) {
            return Err(refuse(format!(
                "A2A-Forwarded-Sender is accepted only from a trusted gateway; {} is not one of this agent's \
                 trusted_gateways",
                caller.sender
            )));
        }
        if !parts.headers.contains_key(a2a_core::headers::A2A_SIGNATURE) {
            return Err(refuse(format!(
                "A2A-Forwarded-Sender must come on a request signed by the gateway {} (GW-8)",
                caller.sender
            )));
        }
        if let Err(e) = self.verify_signature(engine, parts, caller, body_coverage, false).await {
            engine.metrics.signature_failed(&e.code);
            return Err(e.into());
        }
        let invalid = |header: &str, why: String| -> ApiError {
            A2aError::with_message(ErrorCode::INVALID_HEADER, why).details(json!({"header": header})).into()
        };
        let sender =
            forwarded.to_str().ok().map(str::trim).filter(|s| Did::parse(s).is_ok()).ok_or_else(|| {
                invalid("A2A-Forwarded-Sender", "A2A-Forwarded-Sender is not a valid did:web DID".into())
            })?;
        let verified = match parts.headers.get(A2A_FORWARDED_VERIFIED).and_then(|v| v.to_str().ok()).map(str::trim) {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(invalid(
                    "A2A-Forwarded-Verified",
                    format!("A2A-Forwarded-Verified must be true or false, got {other:?}"),
                ));
            }
        };
        caller.via_gateway = Some(std::mem::replace(&mut caller.sender, sender.to_owned()));
        caller.verified = verified;
        Ok(())
    }

    async fn check_inner(
        &self,
        engine: &Engine,
        requirement: AuthRequirement,
        parts: &SignedParts<'_>,
        caller: &mut Caller,
        body_coverage: bool,
    ) -> Result<(), ApiError> {
        // A request forwarded by a trusted gateway carries the gateway's signature, verified by `forwarded`.
        if caller.via_gateway.is_none() && parts.headers.contains_key(a2a_core::headers::A2A_SIGNATURE) {
            let need_body = body_coverage && requirement == AuthRequirement::DidAuth;
            if let Err(e) = self.verify_signature(engine, parts, caller, need_body, true).await {
                engine.metrics.signature_failed(&e.code);
                return Err(e.into());
            }
        }
        self.cross_domain(caller)?;
        match requirement {
            AuthRequirement::None => Ok(()),
            AuthRequirement::ApiKey => self.check_api_key(parts.headers, &caller.sender),
            AuthRequirement::Oauth2 => self.check_bearer(parts.headers, engine),
            AuthRequirement::DidAuth if caller.verified => Ok(()),
            AuthRequirement::DidAuth => {
                engine.metrics.signature_failed(&ErrorCode::SIGNATURE_REQUIRED);
                Err(A2aError::with_message(
                    ErrorCode::SIGNATURE_REQUIRED,
                    "this capability requires did_auth: sign the request with your DID key (A2A-Signature, spec §9.5)",
                )
                .details(json!({"auth_requirement": "did_auth"}))
                .into())
            }
        }
    }

    /// AUTH-7: a cross-domain caller must be verified, when the agent is configured so.
    fn cross_domain(&self, caller: &Caller) -> Result<(), A2aError> {
        if self.require_did_auth_cross_domain && !caller.verified && !self.is_internal(&caller.sender) {
            return Err(A2aError::with_message(
                ErrorCode::DID_AUTH_REQUIRED,
                format!(
                    "{} is outside this agent's internal domains ({}); sign the request (A2A-Signature, did_auth)",
                    caller.sender,
                    self.internal_domains.join(", ")
                ),
            ));
        }
        Ok(())
    }

    /// AUTH-10: what can be refused of a step naming an id before the id is looked up, because it does not depend on
    /// it: an unsigned cross-domain caller under AUTH-7 (so that a client learns to sign, whatever the id). A signed
    /// request is checked with the capability's requirement, after the lookup ([`Auth::check`]).
    pub(crate) fn before_lookup(&self, parts: &SignedParts<'_>, caller: &Caller) -> Result<(), ApiError> {
        if caller.via_gateway.is_none() && parts.headers.contains_key(a2a_core::headers::A2A_SIGNATURE) {
            return Ok(());
        }
        Ok(self.cross_domain(caller)?)
    }

    fn is_internal(&self, sender: &str) -> bool {
        let Ok(did) = Did::parse(sender) else { return false };
        let host = did.host();
        self.internal_domains.iter().any(|d| host == d || host.ends_with(&format!(".{d}")))
    }

    fn check_api_key(&self, headers: &HeaderMap, sender: &str) -> Result<(), ApiError> {
        let Some(key) = headers.get(a2a_core::headers::A2A_API_KEY) else {
            return Err(A2aError::with_message(
                ErrorCode::AUTH_REQUIRED,
                "this capability requires an API key in the A2A-Api-Key header",
            )
            .details(json!({"auth_requirement": "api_key"}))
            .into());
        };
        let digest: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        // Compare against every key in constant time, without stopping at the first match.
        let mut found: Option<&ApiKey> = None;
        for k in &self.api_keys {
            if bool::from(k.digest.ct_eq(&digest)) {
                found = Some(k);
            }
        }
        match found {
            Some(k) if k.senders.is_empty() || k.senders.iter().any(|s| s == sender) => Ok(()),
            Some(_) => {
                Err(A2aError::with_message(ErrorCode::AUTH_INVALID, format!("this API key is not issued to {sender}"))
                    .into())
            }
            None => Err(A2aError::with_message(ErrorCode::AUTH_INVALID, "the API key is not valid").into()),
        }
    }

    fn check_bearer(&self, headers: &HeaderMap, engine: &Engine) -> Result<(), ApiError> {
        let challenge = |err: A2aError, www: &'static str| ApiError {
            err: Box::new(err),
            www_authenticate: Some(www),
            allow: None,
        };
        let token = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
            .map(str::trim);
        let Some(token) = token else {
            return Err(challenge(
                A2aError::with_message(
                    ErrorCode::AUTH_REQUIRED,
                    "this capability requires an OAuth 2.0 bearer token (Authorization: Bearer <JWT>)",
                )
                .details(json!({"auth_requirement": "oauth2"})),
                "Bearer realm=\"a2a\"",
            ));
        };
        let invalid = |why: String| {
            challenge(
                A2aError::with_message(ErrorCode::AUTH_INVALID, format!("the bearer token is not valid: {why}")),
                "Bearer error=\"invalid_token\"",
            )
        };
        let Some(cfg) = &self.oauth2 else {
            return Err(invalid("this agent has no OAuth 2.0 issuer configured".into()));
        };
        let unverified = jws::decode(token).map_err(|e| invalid(e.to_string()))?;
        if !cfg.keys.iter().any(|k| unverified.verify(k).is_ok()) {
            return Err(invalid("the signature does not verify with the issuer's keys".into()));
        }
        let audience = cfg.audience.clone().unwrap_or_else(|| engine.did.clone());
        let expect = jws::Expectations {
            issuer: Some(&cfg.issuer),
            audience: Some(&audience),
            leeway_secs: integrity::LEEWAY_SECS,
            max_lifetime_secs: None,
        };
        jws::validate_registered_claims(unverified.claims(), unix_now(), expect).map_err(|e| invalid(e.to_string()))?;
        Ok(())
    }

    async fn verify_signature(
        &self,
        engine: &Engine,
        parts: &SignedParts<'_>,
        caller: &mut Caller,
        need_body: bool,
        gateway_audience: bool,
    ) -> Result<(), A2aError> {
        let header =
            parts.headers.get(a2a_core::headers::A2A_SIGNATURE).and_then(|v| v.to_str().ok()).ok_or_else(|| {
                A2aError::with_message(ErrorCode::SIGNATURE_MALFORMED, "A2A-Signature is not visible ASCII")
            })?;
        let header_list: Vec<(&str, &str)> =
            parts.headers.iter().filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str(), v))).collect();
        let message = MessageParts {
            method: parts.method,
            target: parts.target,
            headers: &header_list,
            body: parts.body,
            status: None,
        };
        let refused =
            |e: integrity::IntegrityError| A2aError::with_message(e.code(), e.to_string()).details(e.details());
        let now = unix_now();
        let pending = match integrity::prepare(header, &message, &self.did, now) {
            // GW-18: the caller's own signature forwarded by a transparent gateway names that gateway as its
            // audience (the only DID the caller knows); it is accepted when the gateway is a trusted one. A request
            // a gateway re-signed (`A2A-Forwarded-Sender`, GW-9) names this agent.
            Err(integrity::IntegrityError::AudienceMismatch { found, .. })
                if gateway_audience && self.trusted_gateways.contains(&found) =>
            {
                integrity::prepare(header, &message, &found, now)
            }
            other => other,
        }
        .map_err(refused)?;
        let Some(resolver) = &self.resolver else {
            return Err(A2aError::with_message(
                ErrorCode::DID_RESOLUTION_FAILED,
                "this agent cannot resolve DIDs (no resolver configured)",
            ));
        };
        let key = resolver.resolve_key(pending.did(), pending.key_id()).await?;
        let verified = pending.finish(&key, &message).map_err(refused)?;
        if need_body && verified.coverage() == Coverage::HeaderOnly {
            return Err(A2aError::with_message(
                ErrorCode::INTEGRITY_MISMATCH,
                "under did_auth a request with a body must be signed with coverage payload_hash or full_payload (AUTH-5)",
            )
            .details(json!({"mismatch": "coverage"})));
        }
        let claims = verified.claims();
        let until_ms = (claims.exp.saturating_add(integrity::LEEWAY_SECS as i64).max(0) as u64).saturating_mul(1000);
        let nonce = engine.store.admit_jti(&claims.iss, &claims.jti, until_ms).await.map_err(|e| {
            A2aError::with_message(ErrorCode::STORE_UNAVAILABLE, format!("cannot check the signature for replay: {e}"))
        })?;
        match nonce {
            crate::store::Nonce::Fresh => {}
            crate::store::Nonce::Replay => {
                return Err(A2aError::new(ErrorCode::REPLAYED_REQUEST).details(json!({"jti": claims.jti})));
            }
            crate::store::Nonce::Refused(q) => {
                engine.metrics.quota(q.quota, false);
                return Err(crate::engine::quota_error(&q, "the signed request's nonce could not be remembered"));
            }
        }
        caller.verified = true;
        Ok(())
    }
}

/// AUTH-10 (AUTH-1): a refusal of the credentials (`401`, `403`) of a step naming a negotiation or an execution that
/// exists, answered exactly as an id that does not exist (`unknown`: the engine's own answer to it), so that no
/// refusal tells a stranger which ids are real. Other answers (`429`, `5xx`: the agent's state, reached only with a
/// verified signature) pass.
pub(crate) fn as_unknown(e: ApiError, unknown: impl FnOnce() -> A2aError) -> ApiError {
    if matches!(e.err.code.http_status(), 401 | 403) {
        tracing::debug!(code = %e.err.code, "a refused step naming an existing id answered as an unknown id (AUTH-10)");
        unknown().into()
    } else {
        e
    }
}
