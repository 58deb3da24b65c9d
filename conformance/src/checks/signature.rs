//! `did_auth` and message integrity (§9.4, §9.5, §10): the suite signs as its caller identity, correctly and in
//! every wrong way the verification steps of INT-6 must catch, and checks the code of each refusal.

use std::sync::Arc;

use a2a_core::integrity::{Coverage, TYP};
use a2a_core::keys::SigningKey;
use serde_json::{Value, json};

use super::applies::{DID_AUTH, SIGNED};
use super::{execution_ref, negotiate_body, show};
use crate::check;
use crate::check::{Check, Outcome, Stop, Trial};
use crate::ctx::{CallerAuth, CapPlan, SENDER_A};
use crate::didhost::DidHost;
use crate::http::{Req, Resp, Signing};
use crate::identity::{self, Identity, raw_token, unix_now};

pub(super) fn checks() -> Vec<Check> {
    vec![
        check!(
            "did-auth/unsigned-refused",
            ["AUTH-1", "AUTH-4", "HDR-8", "NEG-1"],
            Must,
            DID_AUTH,
            "a did_auth capability refuses unsigned requests with 401 signature_required, before looking at the schema",
            unsigned_refused
        ),
        check!(
            "did-auth/handshake",
            ["AUTH-4", "INT-1", "INT-5", "INT-6", "INT-8", "GW-3"],
            Must,
            SIGNED,
            "every step signed by the caller (payload_hash for bodies, header_only for RESULT), addressed to the agent's DID, is accepted and the execution completes",
            handshake
        ),
        check!(
            "did-auth/no-existence-oracle",
            ["AUTH-10", "GW-21"],
            Must,
            SIGNED,
            "an unsigned step naming a real negotiation or execution of a did_auth capability (its owner's DID claimed without its key) is answered exactly as one naming a made-up id of the same shape: 404 unknown_negotiation / unknown_execution with the same message, the id aside (at an agent, and at a gateway)",
            no_existence_oracle
        ),
        check!(
            "did-auth/body-coverage",
            ["AUTH-5"],
            Must,
            SIGNED,
            "under did_auth a request with a body signed header_only is 401 integrity_mismatch; header_only is enough for RESULT",
            body_coverage
        ),
        check!(
            "signature/expired",
            ["JWS-5", "INT-6"],
            Must,
            SIGNED,
            "a signature whose exp is more than 30 s in the past is 401 signature_expired",
            expired
        ),
        check!(
            "signature/not-yet-valid",
            ["JWS-5", "INT-6"],
            Must,
            SIGNED,
            "a signature whose iat or nbf is more than 30 s in the future is 401 signature_not_yet_valid",
            not_yet_valid
        ),
        check!(
            "signature/skew-tolerated",
            ["JWS-5", "GW-4"],
            Must,
            SIGNED,
            "signatures within the 30 s leeway are accepted: exp 15 s ago, iat 10 s ahead (a gateway may refuse skew beyond its own bound with clock_skew)",
            skew_tolerated
        ),
        check!(
            "signature/lifetime",
            ["INT-2", "JWS-5"],
            Must,
            SIGNED,
            "a signature whose exp - iat exceeds 300 s is 401 signature_lifetime_exceeded",
            lifetime
        ),
        check!(
            "signature/replay",
            ["INT-9", "JWS-4"],
            Must,
            SIGNED,
            "a signed request sent twice is refused the second time with 401 replayed_request, also when its signature is re-encoded as (r, n-s)",
            replay
        ),
        check!(
            "signature/high-s-accepted",
            ["JWS-4"],
            Must,
            SIGNED,
            "a valid signature is accepted whether s is below or above n/2",
            high_s
        ),
        check!(
            "signature/invalid",
            ["INT-6", "JWS-1"],
            Must,
            SIGNED,
            "a signature that does not verify (a flipped bit, another key under the same kid) is 401 signature_invalid; a DER-encoded signature is signature_malformed",
            invalid
        ),
        check!(
            "signature/malformed",
            ["JWS-3", "INT-1", "INT-2", "INT-6", "DID-10", "KEY-9"],
            Must,
            SIGNED,
            "tokens that break the compact-JWS or claim rules (segments, padding, typ, kid, crit, an embedded jwk, jti, unknown message_integrity members, non-integer times, two A2A-Signature headers, over 8 KiB) are 401 signature_malformed",
            malformed
        ),
        check!(
            "signature/algorithm",
            ["JWS-3"],
            Must,
            SIGNED,
            "alg other than exactly ES256 (HS256, none, es256, ES384) is 401 unsupported_algorithm",
            algorithm
        ),
        check!(
            "signature/sender-mismatch",
            ["INT-2", "INT-6"],
            Must,
            SIGNED,
            "iss, the DID of kid and A2A-Sender-ID must agree, else 401 sender_mismatch",
            sender_mismatch
        ),
        check!(
            "signature/audience",
            ["INT-2", "INT-6", "JWS-6"],
            Must,
            SIGNED,
            "a signature addressed to another DID (compared exactly: case, blanks, %3A) is 401 audience_mismatch; aud as an array, even holding the agent's DID, is 401 signature_malformed",
            audience
        ),
        check!(
            "signature/integrity",
            ["INT-3", "INT-4", "INT-7", "INT-13"],
            Must,
            SIGNED,
            "a request that differs from what was signed (body, an unsigned or a missing A2A header, the target, the method, a response's sts in its claims) is 401 integrity_mismatch naming the part in details.mismatch",
            integrity
        ),
        check!(
            "signature/reserialized-body",
            ["INT-3", "JCS-19", "JCS-22"],
            Must,
            SIGNED,
            "payload_hash survives re-serialisation: the signed value sent with other whitespace, member order, escapes and number spellings is accepted; full_payload of the exact bytes is accepted too",
            reserialized
        ),
        check!(
            "signature/canonical-json",
            ["JCS-1", "JCS-4", "JCS-5", "JCS-6", "JCS-9", "JCS-10", "JCS-13", "JCS-14", "JCS-15", "JCS-16", "JCS-17"],
            Must,
            SIGNED,
            "the agent's RFC 8785 canonical form agrees with the suite's on hard inputs (number spellings, 1e21, -0, subnormals, escapes, surrogate pairs, noncharacters, U+2028, unnormalised text, UTF-16 member order)",
            canonical_json
        ),
        check!(
            "signature/python-recipe-refused",
            ["JCS-23", "INT-12"],
            Must,
            SIGNED,
            "a payload_hash digest computed with the seed's json.dumps(sort_keys=True) recipe instead of RFC 8785 is refused (integrity_mismatch)",
            python_recipe
        ),
        check!(
            "signature/non-json-body",
            ["JCS-11", "JCS-1", "JCS-3", "JCS-8"],
            Must,
            SIGNED,
            "a payload_hash-signed body that cannot be canonicalised (not JSON, a leading zero, arrays 129 deep, a byte order mark) is 400 invalid_json, never integrity_mismatch or signature_invalid",
            non_json_body
        ),
        check!(
            "signature/non-json-reason",
            ["JCS-12", "JCS-25"],
            Should,
            SIGNED,
            "the invalid_json answer for a signed body that cannot be canonicalised gives details.reason and details.offset, the offset of the repeated name's second occurrence",
            non_json_reason
        ),
        check!(
            "signature/duplicate-member",
            ["JCS-7", "JCS-11"],
            Must,
            SIGNED,
            "a payload_hash-signed EXECUTE body with a member name given twice is 400 invalid_json",
            duplicate_member
        ),
        check!(
            "signature/non-canonical-token",
            ["JWS-2", "JCS-21"],
            Must,
            SIGNED,
            "a token whose header and claims are valid but not in canonical form (member order, blanks) is accepted",
            non_canonical_token
        ),
        check!(
            "signature/unknown-key",
            ["INT-8", "DID-24"],
            Must,
            SIGNED,
            "a kid naming a key the sender's DID document does not have is 401 unknown_key",
            unknown_key
        ),
        check!(
            "signature/optional-verification",
            ["AUTH-6"],
            May,
            "the run has a caller identity",
            "an agent that verifies signatures on requests that need none refuses a bad one with its code (signature_invalid)",
            optional_verification
        ),
    ]
}

/// The plan's did_auth capability, or skip.
pub(super) fn signed_plan(t: &Trial<'_>) -> Result<CapPlan, Stop> {
    let plan = t.ctx.plan.did_auth.clone().map_err(Stop::Skip)?;
    t.uses(&plan);
    Ok(plan)
}

pub(super) fn identity_of(plan: &CapPlan) -> Arc<Identity> {
    match &plan.auth {
        CallerAuth::Signed(id) => id.clone(),
        _ => Arc::new(Identity { did: SENDER_A.into(), key_id: "key-1".into(), key: placeholder_key() }),
    }
}

fn placeholder_key() -> SigningKey {
    // Never used to sign: a did_auth plan always carries an identity.
    SigningKey::from_bytes(&[1u8; 32]).unwrap_or_else(|_| unreachable_key())
}

#[allow(clippy::panic)]
fn unreachable_key() -> SigningKey {
    panic!("the scalar 0x0101..01 is a valid P-256 private key")
}

/// A NEGOTIATE of the plan's capability with its own schema, signed as `s` says.
pub(super) fn negotiate_signed(t: &Trial<'_>, plan: &CapPlan, s: Signing) -> Req {
    let mut req =
        t.ctx.for_cap(plan, "POST", "/negotiate").json(&negotiate_body(&plan.decl.name, &plan.decl.input_schema));
    req.signing = Some(s);
    req
}

/// A correct signature for the plan's identity.
pub(super) fn sig(plan: &CapPlan) -> Signing {
    Signing::new(identity_of(plan), Coverage::PayloadHash)
}

/// Blocks the check unless a correctly signed NEGOTIATE is accepted (the agent resolves the caller's DID).
pub(super) async fn resolvable(t: &mut Trial<'_>, plan: &CapPlan) -> Outcome {
    let r = t.setup("a correctly signed NEGOTIATE (preparation)", negotiate_signed(t, plan, sig(plan))).await?;
    if r.status == 200 {
        return Ok(());
    }
    let did = identity_of(plan).did.clone();
    if r.error_code().as_deref() == Some("did_resolution_failed")
        && let Some(host) = &t.ctx.didhost
        && host.hits(&DidHost::path_of(&did)) == 0
    {
        return Err(Stop::Blocked(format!(
            "the agent never fetched the suite's DID document for {did}: it does not resolve did:web:localhost DIDs over \
             plain HTTP; allow loopback DIDs in the agent, or give --identity/--did of a DID it can resolve"
        )));
    }
    t.require(false, "200 (a correctly signed request is accepted; see did-auth/handshake)", r.summary())
}

/// Sends a signed NEGOTIATE that must be refused with `code`.
async fn refused(t: &mut Trial<'_>, plan: &CapPlan, what: &str, s: Signing, status: u16, code: &str) -> Outcome {
    let r = t.send(format!("NEGOTIATE signed with {what}"), negotiate_signed(t, plan, s)).await?;
    t.expect_error(&r, status, code);
    Ok(())
}

async fn unsigned_refused(t: &mut Trial<'_>) -> Outcome {
    let decl = t
        .ctx
        .plan
        .did_auth_decl
        .clone()
        .ok_or_else(|| Stop::Skip("the agent advertises no did_auth capability".into()))?;
    let sender = t.ctx.identity.as_ref().map_or(SENDER_A.to_owned(), |i| i.did.clone());
    let mut req = t
        .ctx
        .request("POST", "/negotiate")
        .set("A2A-Sender-ID", sender.clone())
        .json(&negotiate_body(&decl.name, &decl.input_schema));
    if let Some(r) = decl.region_restriction.first() {
        req = req.header("A2A-Region", r.clone());
    }
    let r = t.send(format!("NEGOTIATE {} unsigned, as {sender}", decl.name), req).await?;
    t.expect_error(&r, 401, "signature_required");
    let bad = json!({"type": "object", "properties": {"x": {"type": "integer"}}});
    let mut req =
        t.ctx.request("POST", "/negotiate").set("A2A-Sender-ID", sender).json(&negotiate_body(&decl.name, &bad));
    if let Some(r) = decl.region_restriction.first() {
        req = req.header("A2A-Region", r.clone());
    }
    let r = t.send("NEGOTIATE unsigned with a schema that breaks the rules", req).await?;
    t.expect_error(&r, 401, "signature_required");
    Ok(())
}

async fn handshake(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    let did = identity_of(&plan).did.clone();
    let r = t.send("NEGOTIATE, signed (payload_hash)", negotiate_signed(t, &plan, sig(&plan))).await?;
    if r.error_code().as_deref() == Some("did_resolution_failed")
        && let Some(host) = &t.ctx.didhost
        && host.hits(&DidHost::path_of(&did)) == 0
    {
        return Err(Stop::Blocked(format!(
            "the agent never fetched the suite's DID document for {did}: it does not resolve did:web:localhost DIDs over \
             plain HTTP; allow loopback DIDs in the agent, or give --identity/--did of a DID it can resolve"
        )));
    }
    if r.status != 200 && t.ctx.didhost.is_some() {
        t.check(
            false,
            "200: the suite's DID host publishes a fresh DID and key id every run (…:run-<hex>#key-<hex>, random), so \
             a DID document cached from an earlier run cannot be the cause",
            r.summary(),
        );
    }
    t.expect_status(&r, 200);
    let neg = r.json().and_then(|b| b["negotiation_id"].as_str().map(str::to_owned)).unwrap_or_default();
    let r = t.send("EXECUTE, signed (payload_hash)", super::execute_req(t, &plan, &neg, &plan.payload)).await?;
    t.expect_status(&r, 201);
    let exe = r.json().and_then(|b| b["execution_id"].as_str().map(str::to_owned)).unwrap_or_default();
    let r = t
        .send("CONFIRM, signed (payload_hash)", t.ctx.for_cap(&plan, "POST", "/confirm").json(&execution_ref(&exe)))
        .await?;
    t.expect_status(&r, 202);
    if t.failed() {
        return Ok(());
    }
    let (_, last) = super::wait_terminal(t, &plan, &exe).await?;
    t.step("the execution's end");
    t.check(
        super::is_terminal(last["status"].as_str().unwrap_or("")),
        "a terminal state, reached with signed RESULT requests (header_only)",
        show(&last),
    );
    Ok(())
}

async fn body_coverage(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    let s = Signing::new(identity_of(&plan), Coverage::HeaderOnly);
    refused(t, &plan, "header_only coverage", s, 401, "integrity_mismatch").await?;
    let (_, exe) = super::executed(t, &plan).await?;
    let r = t.send("RESULT signed header_only", super::result_req(t, &plan, &exe.id, None)).await?;
    t.expect_status(&r, 200);
    Ok(())
}

async fn expired(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    let now = unix_now();
    let s = sig(&plan).claims(move |c| {
        c.iat = now - 200;
        c.exp = now - 140;
    });
    refused(t, &plan, "exp 140 s ago", s, 401, "signature_expired").await
}

async fn not_yet_valid(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    let now = unix_now();
    let s = sig(&plan).claims(move |c| {
        c.iat = now + 120;
        c.exp = now + 180;
    });
    refused(t, &plan, "iat 120 s ahead", s, 401, "signature_not_yet_valid").await?;
    let s = sig(&plan).claims(move |c| c.nbf = Some(now + 120));
    refused(t, &plan, "nbf 120 s ahead", s, 401, "signature_not_yet_valid").await
}

async fn skew_tolerated(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    let now = unix_now();
    for (what, iat, exp) in [("exp 15 s ago", now - 75, now - 15), ("iat 10 s ahead", now + 10, now + 70)] {
        let s = sig(&plan).claims(move |c| {
            c.iat = iat;
            c.exp = exp;
        });
        let r = t.send(format!("NEGOTIATE signed with {what}"), negotiate_signed(t, &plan, s)).await?;
        t.check(
            r.status == 200 || r.error_code().as_deref() == Some("clock_skew"),
            "200 (within the 30 s leeway), or a gateway's 401 clock_skew",
            r.summary(),
        );
    }
    Ok(())
}

async fn lifetime(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    let now = unix_now();
    let s = sig(&plan).claims(move |c| {
        c.iat = now;
        c.exp = now + 301;
    });
    refused(t, &plan, "exp - iat = 301 s", s, 401, "signature_lifetime_exceeded").await
}

async fn replay(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    let mut req = negotiate_signed(t, &plan, sig(&plan));
    identity::apply_signing(&mut req, t.ctx.agent_did()).map_err(Stop::Blocked)?;
    let again = req.copy();
    let token = req.header_value("a2a-signature").unwrap_or("").to_owned();
    let r = t.send("a signed NEGOTIATE", req).await?;
    t.expect_status(&r, 200);
    let r = t.send("the same request again (same token)", again.copy()).await?;
    t.expect_error(&r, 401, "replayed_request");
    if let Some(twin) = identity::twin_signature(&token) {
        let r = t
            .send("the same claims with the signature re-encoded as (r, n-s)", again.set("A2A-Signature", twin))
            .await?;
        t.expect_error(&r, 401, "replayed_request");
    }
    Ok(())
}

async fn high_s(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    let s = sig(&plan)
        .token(|id, claims| identity::high_s(&a2a_core::integrity::sign_claims(&id.key, claims).unwrap_or_default()));
    let r = t.send("NEGOTIATE signed with a high-S signature (s above n/2)", negotiate_signed(t, &plan, s)).await?;
    t.expect_status(&r, 200);
    Ok(())
}

fn sign_with(id: &Identity, claims: &a2a_core::integrity::SignatureClaims) -> String {
    identity::low_s(&a2a_core::integrity::sign_claims(&id.key, claims).unwrap_or_default())
}

async fn invalid(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    let s = sig(&plan).token(|id, c| identity::corrupt_signature(&sign_with(id, c)).unwrap_or_default());
    refused(t, &plan, "one bit of the signature flipped", s, 401, "signature_invalid").await?;
    let s = sig(&plan).token(|_, c| {
        let other = SigningKey::generate().ok();
        other
            .and_then(|k| a2a_core::integrity::sign_claims(&k, c).ok())
            .map(|t| identity::low_s(&t))
            .unwrap_or_default()
    });
    refused(t, &plan, "another key under the same kid", s, 401, "signature_invalid").await?;
    let s = sig(&plan).token(|id, c| identity::der_signature(&sign_with(id, c)).unwrap_or_default());
    refused(t, &plan, "a DER-encoded signature", s, 401, "signature_malformed").await
}

/// A token over this header and these claims (as JSON values), signed by the identity.
fn custom(id: &Identity, header: &Value, claims: &Value) -> String {
    raw_token(&id.key, &serde_json::to_vec(header).unwrap_or_default(), &serde_json::to_vec(claims).unwrap_or_default())
}

type Tweak = fn(&Identity, &mut Value, &mut Value);
type MakeRaw = fn(&Identity, &a2a_core::integrity::SignatureClaims) -> String;

async fn malformed(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    let tokens: Vec<(&str, MakeRaw)> = vec![
        ("a token that is not a JWS", |_, _| "abc".into()),
        ("two segments", |id, c| sign_with(id, c).rsplit_once('.').map(|(a, _)| a.to_owned()).unwrap_or_default()),
        ("= padding", |id, c| format!("{}==", sign_with(id, c))),
        ("over 8 KiB", |id, c| {
            let mut claims = serde_json::to_value(c).unwrap_or_default();
            claims["padding"] = json!("x".repeat(9000));
            custom(id, &identity::a2a_header(id), &claims)
        }),
    ];
    for (what, make) in tokens {
        let s = sig(&plan).token(make);
        refused(t, &plan, what, s, 401, "signature_malformed").await?;
    }
    let tweaks: Vec<(&str, Tweak)> = vec![
        ("no typ", |_, h, _| {
            h.as_object_mut().map(|o| o.remove("typ"));
        }),
        ("typ JWT", |_, h, _| h["typ"] = json!("JWT")),
        ("a kid without #", |id, h, _| h["kid"] = json!(id.did)),
        ("a kid fragment with a blank (DID-10)", |id, h, c| {
            h["kid"] = json!(format!("{}#bad key", id.did));
            c["message_integrity"]["key_id"] = json!("bad key");
        }),
        ("a crit header", |_, h, _| h["crit"] = json!(["exp"])),
        ("an embedded jwk (keys never come from the token)", |id, h, _| h["jwk"] = id.key.verifying_key().to_jwk()),
        ("a jti of 8 characters", |_, _, c| c["jti"] = json!("abcdefgh")),
        ("an unknown member in message_integrity", |_, _, c| c["message_integrity"]["probe"] = json!(1)),
        ("iat as a string", |_, _, c| c["iat"] = json!(c["iat"].to_string())),
        ("iat with a fraction", |_, _, c| c["iat"] = json!(c["iat"].as_f64().unwrap_or(0.0) + 0.5)),
        ("no exp", |_, _, c| {
            c.as_object_mut().map(|o| o.remove("exp"));
        }),
        ("hash sha512", |_, _, c| c["message_integrity"]["hash"] = json!("sha512")),
        ("coverage everything", |_, _, c| c["message_integrity"]["coverage"] = json!("everything")),
        ("key_id different from the kid fragment", |_, _, c| c["message_integrity"]["key_id"] = json!("other-key")),
        ("no a2a-version in the covered headers", |_, _, c| {
            c["message_integrity"]["headers"].as_object_mut().map(|o| o.remove("a2a-version"));
        }),
    ];
    for (what, tweak) in tweaks {
        let s = sig(&plan).token(move |id, claims| {
            let mut h = identity::a2a_header(id);
            let mut c = serde_json::to_value(claims).unwrap_or_default();
            tweak(id, &mut h, &mut c);
            custom(id, &h, &c)
        });
        refused(t, &plan, what, s, 401, "signature_malformed").await?;
    }
    let s = sig(&plan).then(|req| {
        let token = req.header_value("a2a-signature").unwrap_or("").to_owned();
        req.headers.push(("a2a-signature".into(), token));
    });
    refused(t, &plan, "the A2A-Signature header twice", s, 401, "signature_malformed").await
}

async fn algorithm(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    for alg in ["HS256", "none", "es256", "ES384", "RS256"] {
        let s = sig(&plan).token(move |id, claims| {
            let mut h = identity::a2a_header(id);
            h["alg"] = json!(alg);
            custom(id, &h, &serde_json::to_value(claims).unwrap_or_default())
        });
        refused(t, &plan, &format!("alg {alg}"), s, 401, "unsupported_algorithm").await?;
    }
    Ok(())
}

async fn sender_mismatch(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    let s = sig(&plan).then(|req| req.set_header("A2A-Sender-ID", SENDER_A));
    refused(t, &plan, "A2A-Sender-ID changed to another DID after signing", s, 401, "sender_mismatch").await?;
    let s = sig(&plan).claims(|c| c.iss = SENDER_A.into());
    refused(t, &plan, "iss naming another DID", s, 401, "sender_mismatch").await
}

async fn audience(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    refused(
        t,
        &plan,
        "aud did:web:other-agent.example",
        sig(&plan).audience("did:web:other-agent.example"),
        401,
        "audience_mismatch",
    )
    .await?;
    let did = t.ctx.agent_did().to_owned();
    // Exact comparison (JWS-6): no case folding, no trimming, no percent-decoding.
    let upper = did.to_ascii_uppercase();
    refused(t, &plan, "aud in upper case", sig(&plan).audience(upper), 401, "audience_mismatch").await?;
    let spaced = format!("{did} ");
    refused(t, &plan, "aud with a trailing space", sig(&plan).audience(spaced), 401, "audience_mismatch").await?;
    if did.contains("%3A") {
        let decoded = did.replace("%3A", ":");
        refused(t, &plan, "aud with %3A decoded", sig(&plan).audience(decoded), 401, "audience_mismatch").await?;
    }
    // An A2A signature's aud is a string (INT-2, JWS-6): an array holding the agent's DID is not well typed.
    let s = sig(&plan).token(|id, claims| {
        let mut c = serde_json::to_value(claims).unwrap_or_default();
        c["aud"] = json!([claims.aud]);
        custom(id, &identity::a2a_header(id), &c)
    });
    refused(t, &plan, "aud as an array holding the agent's DID", s, 401, "signature_malformed").await
}

async fn integrity(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    let name = plan.decl.name.clone();
    let cases: Vec<(&str, Signing, &str)> = vec![
        (
            "the body changed after signing",
            sig(&plan).then(move |req| {
                let b = json!({"target_capability": name, "proposed_schema": {"type": "object", "title": "changed"}});
                req.body = serde_json::to_vec(&b).ok();
            }),
            "body",
        ),
        (
            "an A2A header added after signing",
            sig(&plan).then(|req| req.set_header("A2A-Conformance-Probe", "1")),
            "header",
        ),
        (
            "a signed A2A header removed",
            {
                let mut s = sig(&plan).then(|req| {
                    req.headers.retain(|(n, _)| n != "a2a-conformance-probe");
                });
                s.edit_claims = Some(Box::new(|c| {
                    c.message_integrity.headers.insert("a2a-conformance-probe".into(), "1".into());
                }));
                s
            },
            "header",
        ),
        ("a query added to the target", sig(&plan).then(|req| req.url.push_str("?probe=1")), "target"),
        ("htm PUT", sig(&plan).claims(|c| c.htm = "PUT".into()), "method"),
        ("sts (a response's status) in the request's claims", sig(&plan).claims(|c| c.sts = Some(200)), "status"),
        (
            "full_payload, then a blank added to the body",
            Signing::new(identity_of(&plan), Coverage::FullPayload).then(|req| {
                if let Some(b) = &mut req.body {
                    b.push(b' ');
                }
            }),
            "body",
        ),
    ];
    for (what, s, part) in cases {
        let r = t.send(format!("NEGOTIATE signed, then {what}"), negotiate_signed(t, &plan, s)).await?;
        t.expect_error(&r, 401, "integrity_mismatch");
        let d = r.error_details();
        t.check(d["mismatch"] == part, format!("details.mismatch \"{part}\""), show(&d));
        if what.starts_with("an A2A header added") {
            t.check(d["header"] == "a2a-conformance-probe", "details.header \"a2a-conformance-probe\"", show(&d));
        }
    }
    Ok(())
}

async fn reserialized(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    let schema = serde_json::to_string_pretty(&plan.decl.input_schema).unwrap_or_default();
    // The name with its first letter as a \u escape, the member name too: the same JSON value, other bytes.
    let mut chars = plan.decl.name.chars();
    let first = chars.next().map_or(0, u32::from);
    let name = format!("\"\\u{first:04x}{}\"", chars.as_str());
    let pretty = format!(
        "{{\n  \"proposed_schema\" : {schema},\n  \"\\u0074arget_capability\" : {name},\n  \"timeout_ms\" : 1000\n}}\n"
    );
    let compact = serde_json::to_vec(
        &json!({"target_capability": plan.decl.name, "proposed_schema": plan.decl.input_schema, "timeout_ms": 1000}),
    )
    .unwrap_or_default();
    let s = sig(&plan).then(move |req| req.body = Some(pretty.clone().into_bytes()));
    let mut req =
        t.ctx.for_cap(&plan, "POST", "/negotiate").header("Content-Type", "application/json").body(compact.clone());
    req.signing = Some(s);
    let r =
        t.send("NEGOTIATE signed payload_hash over the compact body, sent pretty-printed and reordered", req).await?;
    t.check(r.status == 200, "200 (the canonical forms are equal)", r.summary());
    let mut req = t.ctx.for_cap(&plan, "POST", "/negotiate").header("Content-Type", "application/json").body(compact);
    req.signing = Some(Signing::new(identity_of(&plan), Coverage::FullPayload));
    let r = t.send("NEGOTIATE signed full_payload", req).await?;
    t.expect_status(&r, 200);
    Ok(())
}

/// A NEGOTIATE body text whose proposal carries `annotations` (raw JSON text) as `examples`/`description`.
fn annotated_body(plan: &CapPlan, description: &str, examples: &str) -> Option<String> {
    let mut schema = plan.decl.input_schema.as_object()?.clone();
    schema.remove("description");
    schema.remove("examples");
    let mut text = serde_json::to_string(&Value::Object(schema)).ok()?;
    text.pop();
    let sep = if text.len() > 1 { "," } else { "" };
    Some(format!(
        "{{\"target_capability\":{},\"proposed_schema\":{text}{sep}\"description\":{description},\"examples\":{examples}}}}}",
        serde_json::to_string(&plan.decl.name).ok()?
    ))
}

async fn canonical_json(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    let cases = [
        (
            "numbers",
            r#""numbers""#,
            r#"[{"a":1.0,"b":1E2,"c":100e-2,"d":-0.0,"e":1e21,"f":1e20,"g":1e-7,"h":1e-6,"i":5e-324,"j":0.30000000000000004,"k":333333333.33333329,"l":1.7976931348623157e308}]"#,
        ),
        (
            "escapes and surrogates",
            r#""Zo\u00eb \ud83d\ude00 \u2028\u2029 \u007f \/ \t e\u0301""#,
            r#"[{"s":"\u0000\u001f\"\\","t":"\uFDD0\uFFFE"}]"#,
        ),
        (
            "member order (UTF-16 code units)",
            r#""order""#,
            r#"[{"\ue000":1,"\ud800\udc00":2,"b":3,"a":4,"€":5,"\r":6,"1":7,"ö":8}]"#,
        ),
        ("nesting", r#""nesting""#, r#"[[[[[[[[[[{"deep":[true,false,null,{}]}]]]]]]]]]]"#),
    ];
    for (what, description, examples) in cases {
        let Some(body) = annotated_body(&plan, description, examples) else {
            return Err(Stop::Blocked("the capability's input_schema is not an object".into()));
        };
        let mut req = t
            .ctx
            .for_cap(&plan, "POST", "/negotiate")
            .header("Content-Type", "application/json")
            .body(body.into_bytes());
        req.signing = Some(sig(&plan));
        let r = t.send(format!("NEGOTIATE signed payload_hash, with annotations of hard JSON: {what}"), req).await?;
        t.expect_status(&r, 200);
    }
    Ok(())
}

/// `json.dumps(v, sort_keys=True, separators=(',', ':'))` as Python 3 writes it (`ensure_ascii`, keys sorted by code
/// point, Python's float spelling): what the seed prescribed and JCS-23 forbids.
pub fn python_dumps(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if n.is_i64() || n.is_u64() {
                out.push_str(&n.to_string());
            } else {
                out.push_str(&python_float(n.as_f64().unwrap_or(0.0)));
            }
        }
        Value::String(s) => python_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                python_dumps(x, out);
            }
            out.push(']');
        }
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                python_string(k, out);
                out.push(':');
                python_dumps(&o[*k], out);
            }
            out.push('}');
        }
    }
}

fn python_float(x: f64) -> String {
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    let sci = format!("{x:e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..16).contains(&exp) {
        let s = format!("{x}");
        if s.contains('.') { s } else { format!("{s}.0") }
    } else {
        format!("{mant}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}

fn python_string(s: &str, out: &mut String) {
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(ch),
            _ => {
                let mut buf = [0u16; 2];
                for unit in ch.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}

async fn python_recipe(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    let Some(body) = annotated_body(&plan, r#""Zoë""#, r#"[{"ratio":100.0,"weight":1e-7}]"#) else {
        return Err(Stop::Blocked("the capability's input_schema is not an object".into()));
    };
    let value: Value = serde_json::from_str(&body).map_err(|e| Stop::Blocked(e.to_string()))?;
    let mut recipe = String::new();
    python_dumps(&value, &mut recipe);
    let canonical = a2a_core::canonical::canonicalize(body.as_bytes()).unwrap_or_default();
    t.step("the recipe's bytes differ from the canonical form");
    t.check(recipe.as_bytes() != canonical.as_slice(), "different bytes (non-ASCII text and floats)", recipe.clone());
    let digest = a2a_core::jws::base64url_encode(<sha2::Sha256 as sha2::Digest>::digest(recipe.as_bytes()));
    let mut req = t
        .ctx
        .for_cap(&plan, "POST", "/negotiate")
        .header("Content-Type", "application/json")
        .body(body.clone().into_bytes());
    req.signing = Some(sig(&plan).claims(move |c| c.message_integrity.body = Some(digest)));
    let r = t.send("NEGOTIATE signed payload_hash with the Python recipe's digest", req).await?;
    t.expect_error(&r, 401, "integrity_mismatch");
    let mut req =
        t.ctx.for_cap(&plan, "POST", "/negotiate").header("Content-Type", "application/json").body(body.into_bytes());
    req.signing = Some(sig(&plan));
    let r = t.send("the same body signed with the RFC 8785 digest", req).await?;
    t.expect_status(&r, 200);
    Ok(())
}

async fn non_json_request(t: &mut Trial<'_>, plan: &CapPlan) -> Result<crate::http::Resp, Stop> {
    let mut req = t
        .ctx
        .for_cap(plan, "POST", "/negotiate")
        .header("Content-Type", "application/json")
        .body(b"{\"target_capability\": NaN}".to_vec());
    req.signing = Some(sig(plan));
    t.send("NEGOTIATE signed payload_hash over a body that is not JSON", req).await
}

async fn non_json_body(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    let r = non_json_request(t, &plan).await?;
    t.expect_error(&r, 400, "invalid_json");
    for (what, body) in [
        (
            "a number with a leading zero",
            format!(
                "{{\"target_capability\":{},\"proposed_schema\":{{\"type\":\"object\",\"default\":01}}}}",
                serde_json::to_string(&plan.decl.name).unwrap_or_default()
            ),
        ),
        (
            "arrays nested 129 deep",
            format!(
                "{{\"target_capability\":{},\"proposed_schema\":{{\"type\":\"object\",\"default\":{}{}}}}}",
                serde_json::to_string(&plan.decl.name).unwrap_or_default(),
                "[".repeat(129),
                "]".repeat(129)
            ),
        ),
        (
            "a byte order mark before it (JCS-1)",
            format!(
                "\u{feff}{{\"target_capability\":{},\"proposed_schema\":{{\"type\":\"object\"}}}}",
                serde_json::to_string(&plan.decl.name).unwrap_or_default()
            ),
        ),
    ] {
        let mut req = t
            .ctx
            .for_cap(&plan, "POST", "/negotiate")
            .header("Content-Type", "application/json")
            .body(body.into_bytes());
        req.signing = Some(sig(&plan));
        let r = t.send(format!("NEGOTIATE signed payload_hash over a body with {what}"), req).await?;
        t.expect_error(&r, 400, "invalid_json");
    }
    Ok(())
}

async fn non_json_reason(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    let (r, at) = duplicate_member_request(t, &plan).await?;
    let d = r.error_details();
    t.check(
        d["reason"] == "duplicate_key" && d["offset"] == at,
        format!("details {{\"reason\": \"duplicate_key\", \"offset\": {at}}} (the second \"probe_twice\", JCS-25)"),
        show(&d),
    );
    Ok(())
}

async fn duplicate_member(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    let (r, _) = duplicate_member_request(t, &plan).await?;
    t.expect_error(&r, 400, "invalid_json");
    Ok(())
}

/// EXECUTE, signed payload_hash, of a body whose last member is given twice (no canonical form: JCS-7): the answer
/// and the byte offset of the second occurrence's opening quote (JCS-25).
async fn duplicate_member_request(t: &mut Trial<'_>, plan: &CapPlan) -> Result<(crate::http::Resp, usize), Stop> {
    let neg = super::negotiate(t, plan, &plan.decl.input_schema).await?;
    let mut text = serde_json::to_string(&plan.payload).unwrap_or_default();
    text.pop();
    let sep = if text.len() > 1 { "," } else { "" };
    let body = format!("{text}{sep}\"probe_twice\":1,\"probe_twice\":2}}");
    let at = body.rfind("\"probe_twice\"").unwrap_or_default();
    let mut req = super::execute_req(t, plan, &neg.id, &Value::Null).body(body.into_bytes());
    req.signing = Some(sig(plan));
    Ok((t.send("EXECUTE signed payload_hash over a body with a member given twice", req).await?, at))
}

async fn non_canonical_token(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    let s = sig(&plan).token(|id, claims| {
        let header = format!("{{ \"typ\": \"{TYP}\", \"kid\": \"{}\", \"alg\": \"ES256\" }}", id.kid());
        let claims = serde_json::to_vec_pretty(claims).unwrap_or_default();
        raw_token(&id.key, header.as_bytes(), &claims)
    });
    let r = t.send("NEGOTIATE signed with a non-canonical header and claims", negotiate_signed(t, &plan, s)).await?;
    t.expect_status(&r, 200);
    Ok(())
}

async fn unknown_key(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    let s = sig(&plan).token(|id, claims| {
        let mut h = identity::a2a_header(id);
        h["kid"] = json!(format!("{}#key-unknown", id.did));
        let mut c = serde_json::to_value(claims).unwrap_or_default();
        c["message_integrity"]["key_id"] = json!("key-unknown");
        custom(id, &h, &c)
    });
    refused(t, &plan, "a kid the DID document does not have", s, 401, "unknown_key").await
}

async fn optional_verification(t: &mut Trial<'_>) -> Outcome {
    let Some(id) = t.ctx.identity.clone() else {
        return Err(Stop::Skip("the run has no caller identity".into()));
    };
    let body = json!({"target_capability": super::MISSING_CAPABILITY});
    let mut req = t.ctx.request("POST", "/fallback").set("A2A-Sender-ID", id.did.clone()).json(&body);
    req.signing = Some(
        Signing::new(id, Coverage::PayloadHash)
            .token(|id, c| identity::corrupt_signature(&sign_with(id, c)).unwrap_or_default()),
    );
    let r = t.send("FALLBACK (no capability auth) with a signature that does not verify", req).await?;
    t.check(
        r.status == 200 || (r.status == 401 && r.error_code().as_deref() == Some("signature_invalid")),
        "200 (signatures not verified where not required), or 401 signature_invalid",
        r.summary(),
    );
    Ok(())
}

/// An id of the same shape as `id`: its last six characters moved on by one within the base32 alphabet of
/// execution and negotiation ids (a-z, 2-7; EID-1), other characters kept.
fn made_up(id: &str) -> String {
    let mut chars: Vec<char> = id.chars().collect();
    for c in chars.iter_mut().rev().take(6) {
        *c = match *c {
            'z' => '2',
            '7' => 'a',
            c @ ('a'..='y' | '2'..='6') => char::from(c as u8 + 1),
            c => c,
        };
    }
    chars.into_iter().collect()
}

/// AUTH-10: the refusal of a real id and of a made-up one, side by side: the same status, code and message (each
/// id replaced by `<id>`).
fn same_refusal(t: &mut Trial<'_>, real: (&Resp, &str), fake: (&Resp, &str), code: &str) {
    let shape = |r: &Resp, id: &str| {
        let message = r.json().and_then(|v| v.pointer("/error/message").and_then(Value::as_str).map(str::to_owned));
        let message = message.unwrap_or_default().replace(id, "<id>");
        (r.status, r.error_code().unwrap_or_default(), message)
    };
    let (a, b) = (shape(real.0, real.1), shape(fake.0, fake.1));
    t.check(
        a.0 == 404 && a.1 == code && a == b,
        format!("404 {code}, the same answer as for the made-up id: {b:?}"),
        format!("{a:?}"),
    );
}

async fn no_existence_oracle(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    resolvable(t, &plan).await?;
    let owner = identity_of(&plan).did.clone();
    let neg = super::negotiate(t, &plan, &plan.decl.input_schema).await?;
    let exe = super::execute(t, &plan, &neg.id, &plan.payload).await?;
    let unsigned = |method: &str, path: &str| t.ctx.request(method, path).set("A2A-Sender-ID", owner.clone());
    let (fake_exe, fake_neg) = (made_up(&exe.id), made_up(&neg.id));
    let real = t.send("RESULT of the real execution, unsigned", unsigned("GET", &super::result_path(&exe.id))).await?;
    let fake =
        t.send("RESULT of a made-up execution id, unsigned", unsigned("GET", &super::result_path(&fake_exe))).await?;
    same_refusal(t, (&real, &exe.id), (&fake, &fake_exe), "unknown_execution");
    let execute = |id: &str| unsigned("POST", "/execute").header("A2A-Negotiation-ID", id).json(&plan.payload);
    let real = t.send("EXECUTE under the real negotiation, unsigned", execute(&neg.id)).await?;
    let fake = t.send("EXECUTE under a made-up negotiation id, unsigned", execute(&fake_neg)).await?;
    same_refusal(t, (&real, &neg.id), (&fake, &fake_neg), "unknown_negotiation");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::python_dumps;

    #[test]
    fn python_recipe_matches_pythons_output() {
        let v: serde_json::Value =
            serde_json::from_str(r#"{"weight":1e-7,"title":"Zoë 😀","ratio":100.0,"n":3,"big":1e16,"s":0.5}"#)
                .unwrap_or_default();
        let mut s = String::new();
        python_dumps(&v, &mut s);
        assert_eq!(s, r#"{"big":1e+16,"n":3,"ratio":100.0,"s":0.5,"title":"Zo\u00eb \ud83d\ude00","weight":1e-07}"#);
    }
}
