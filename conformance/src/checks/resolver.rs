//! did:web on both sides (§9.1): the agent's own DID document, and how the agent resolves its callers' DIDs, probed
//! with the documents the suite publishes under `--serve-did` (each wrong in one way).

use std::sync::Arc;

use a2a_core::did::{Did, ResolveOptions};
use serde_json::Value;

use super::applies::{ALWAYS, SERVED};
use super::show;
use super::signature::{negotiate_signed, resolvable, signed_plan};
use crate::check::{Check, Outcome, Stop, Trial};
use crate::ctx::CapPlan;
use crate::didhost::DidHost;
use crate::http::Signing;
use crate::identity::Identity;
use crate::{check, run_fn};

macro_rules! fault {
    ($id:literal, [$($req:literal),+], $case:literal, $status:literal, $code:literal, $title:literal) => {{
        async fn fault_run(t: &mut Trial<'_>) -> Outcome {
            fault_case(t, $case, $status, $code).await
        }
        Check {
            id: $id,
            requirements: &[$($req),+],
            level: crate::report::Level::Must,
            title: $title,
            applies: SERVED,
            after_all: false,
            run: run_fn!(fault_run),
        }
    }};
}

pub(super) fn checks() -> Vec<Check> {
    vec![
        check!(
            "identity/agent-document",
            ["DID-14", "KEY-1", "DID-12"],
            Must,
            ALWAYS,
            "the agent publishes, where did:web maps its DID, a DID document whose id is its DID and whose keys are public P-256 JsonWebKey2020 methods referenced from authentication and assertionMethod",
            agent_document
        ),
        check!(
            "identity/agent-document-context",
            ["DID-15"],
            Should,
            ALWAYS,
            "the agent's DID document includes @context",
            agent_document_context
        ),
        check!(
            "identity/agent-document-headers",
            ["DID-16"],
            Should,
            ALWAYS,
            "the agent's DID document is served with Access-Control-Allow-Origin: * and a Cache-Control max-age",
            agent_document_headers
        ),
        check!(
            "did-resolver/document-url",
            ["DID-12", "DID-13"],
            Must,
            SERVED,
            "the agent fetches a caller's document from the URL did:web maps it to (/.well-known/did.json, or the path segments then /did.json), over plain http for the suite's loopback name without first trying https (no fallback from https to http)",
            document_url
        ),
        check!(
            "did-resolver/cache",
            ["DID-27"],
            Should,
            SERVED,
            "the agent caches a caller's DID document (served with max-age=300): three signed requests fetch it at most once",
            cache
        ),
        fault!(
            "did-resolver/rsa-key",
            ["DID-26", "KEY-1", "KEY-2"],
            "rsa",
            401,
            "unsupported_key_type",
            "a caller whose DID document publishes an RSA key is refused with 401 unsupported_key_type"
        ),
        fault!(
            "did-resolver/private-key",
            ["DID-26", "KEY-3"],
            "private",
            401,
            "unsupported_key_type",
            "a caller whose DID document publishes its private key (d) is refused with 401 unsupported_key_type"
        ),
        fault!(
            "did-resolver/off-curve",
            ["KEY-3", "DID-26"],
            "offcurve",
            401,
            "unsupported_key_type",
            "a caller whose key is not a point of P-256 is refused with 401 unsupported_key_type"
        ),
        fault!(
            "did-resolver/es384-alg",
            ["DID-26"],
            "es384",
            401,
            "unsupported_key_type",
            "a caller whose JWK says alg ES384 is refused with 401 unsupported_key_type"
        ),
        fault!(
            "did-resolver/key-agreement-only",
            ["DID-25"],
            "keyagreement",
            401,
            "unknown_key",
            "a key listed only in keyAgreement cannot sign: 401 unknown_key"
        ),
        fault!(
            "did-resolver/id-mismatch",
            ["DID-19", "DID-31"],
            "mismatch",
            401,
            "did_resolution_failed",
            "a document whose id is another DID is refused: 401 did_resolution_failed"
        ),
        fault!(
            "did-resolver/not-json",
            ["DID-18", "DID-31"],
            "notjson",
            401,
            "did_resolution_failed",
            "a document that is not a JSON object is refused: 401 did_resolution_failed"
        ),
        fault!(
            "did-resolver/too-large",
            ["DID-17"],
            "huge",
            401,
            "did_resolution_failed",
            "a document over 65 536 bytes is refused: 401 did_resolution_failed"
        ),
        fault!(
            "did-resolver/too-many-methods",
            ["DID-20"],
            "toomany",
            401,
            "did_resolution_failed",
            "a document with 65 verification methods is refused: 401 did_resolution_failed"
        ),
        fault!(
            "did-resolver/bad-method",
            ["DID-21"],
            "badmethod",
            401,
            "did_resolution_failed",
            "a verification method without type is refused: 401 did_resolution_failed"
        ),
        fault!(
            "did-resolver/not-found",
            ["DID-30", "DID-31"],
            "missing",
            401,
            "did_resolution_failed",
            "a document answered 404 is a failure: 401 did_resolution_failed"
        ),
        fault!(
            "did-resolver/redirect",
            ["DID-30"],
            "redirect",
            401,
            "did_resolution_failed",
            "the resolver follows no redirect: a 302 is a failure (401 did_resolution_failed) and its target is never fetched"
        ),
        fault!(
            "did-resolver/unused-members",
            ["DID-22"],
            "extras",
            200,
            "",
            "members the protocol does not use (service, alsoKnownAs, controller) are ignored: the signature is accepted"
        ),
        fault!(
            "did-resolver/relative-ids",
            ["DID-21"],
            "relative",
            200,
            "",
            "verification methods with relative ids (#key-1) are accepted"
        ),
    ]
}

/// The URL of the agent's own DID document (http for localhost DIDs, as a test or demo agent serves it).
fn agent_document_url(t: &Trial<'_>) -> Result<String, Stop> {
    let did = t.ctx.disc.agent_did.clone().ok_or_else(|| Stop::Blocked("DISCOVER gave no A2A-Sender-ID".into()))?;
    let parsed = Did::parse(&did).map_err(|e| Stop::Blocked(format!("the agent's DID {did:?} is invalid: {e}")))?;
    parsed
        .document_url(&ResolveOptions::with_http_loopback())
        .map(|u| u.to_string())
        .map_err(|e| Stop::Blocked(format!("no document URL for {did}: {e}")))
}

async fn fetch_agent_document(t: &mut Trial<'_>) -> Result<(crate::http::Resp, Value), Stop> {
    let url = agent_document_url(t)?;
    let req = crate::http::Req::new("GET", url.clone()).header("Accept", "application/did+json, application/json");
    let r = t.send(format!("GET {url}"), req).await?;
    let doc = r.json().unwrap_or(Value::Null);
    Ok((r, doc))
}

async fn agent_document(t: &mut Trial<'_>) -> Outcome {
    let (r, doc) = fetch_agent_document(t).await?;
    t.expect_status(&r, 200);
    let did = t.ctx.agent_did().to_owned();
    let parsed = Did::parse(&did).ok().map(|d| a2a_core::did::DidDocument::parse(&r.body, &d));
    match parsed {
        Some(Ok(d)) => {
            let methods: Vec<_> = d.methods().collect();
            t.check(!methods.is_empty(), "at least one verification method", show(&doc));
            for m in methods {
                let frag = m.fragment().unwrap_or("");
                let jwk = d.find_signing_jwk(frag);
                t.check(
                    m.kind == "JsonWebKey2020" && jwk.is_ok() && d.may_sign(frag),
                    format!("{}: a JsonWebKey2020 P-256 public key, in authentication and assertionMethod", m.id),
                    match jwk {
                        Ok(j) => format!("type {}, key {}", m.kind, show(j)),
                        Err(e) => e.to_string(),
                    },
                );
                let both = ["authentication", "assertionMethod"].iter().all(|rel| {
                    doc[*rel].as_array().is_some_and(|a| {
                        a.iter().any(|x| {
                            x.as_str().is_some_and(|s| s.ends_with(&format!("#{frag}")))
                                || x["id"].as_str().is_some_and(|s| s.ends_with(&format!("#{frag}")))
                        })
                    })
                });
                t.check(both, format!("{} referenced from both authentication and assertionMethod", m.id), show(&doc));
            }
        }
        Some(Err(e)) => {
            t.check(false, format!("a DID document for {did}"), e.to_string());
        }
        None => {
            t.check(false, "a valid agent DID", did);
        }
    }
    Ok(())
}

async fn agent_document_context(t: &mut Trial<'_>) -> Outcome {
    let (_, doc) = fetch_agent_document(t).await?;
    let ctx = &doc["@context"];
    let ok = ctx == "https://www.w3.org/ns/did/v1"
        || ctx.as_array().is_some_and(|a| a.first().is_some_and(|f| f == "https://www.w3.org/ns/did/v1"));
    t.check(ok, "@context starting with https://www.w3.org/ns/did/v1", show(ctx));
    Ok(())
}

async fn agent_document_headers(t: &mut Trial<'_>) -> Outcome {
    let (r, _) = fetch_agent_document(t).await?;
    t.check(
        r.header("access-control-allow-origin") == Some("*"),
        "Access-Control-Allow-Origin: *",
        format!("{:?}", r.header("access-control-allow-origin")),
    );
    let cc = r.header("cache-control").unwrap_or("");
    t.check(cc.to_ascii_lowercase().contains("max-age"), "Cache-Control with max-age", cc.to_owned());
    Ok(())
}

fn host<'a>(t: &'a Trial<'_>) -> Result<&'a DidHost, Stop> {
    t.ctx.didhost.as_ref().ok_or_else(|| Stop::Skip("needs --serve-did (the suite publishes the DID documents)".into()))
}

/// A NEGOTIATE of the plan's capability signed by `id` (another caller than the plan's).
fn as_identity(t: &Trial<'_>, plan: &CapPlan, id: &Arc<Identity>) -> crate::http::Req {
    let mut req = negotiate_signed(t, plan, Signing::new(id.clone(), a2a_core::integrity::Coverage::PayloadHash));
    req.set_header("A2A-Sender-ID", id.did.clone());
    req
}

async fn document_url(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    host(t)?;
    resolvable(t, &plan).await?;
    let second = host(t)?.second.clone();
    let r = t.send(format!("NEGOTIATE signed as {}", second.did), as_identity(t, &plan, &second)).await?;
    t.expect_status(&r, 200);
    let root = host(t)?.root.clone();
    let r = t.send(format!("NEGOTIATE signed as {}", root.did), as_identity(t, &plan, &root)).await?;
    t.expect_status(&r, 200);
    let host = host(t)?;
    let seen: Vec<(String, String, usize)> = [&host.primary, &second, &root]
        .into_iter()
        .map(|id| {
            let path = DidHost::path_of(&id.did);
            let n = host.hits(&path);
            (id.did.clone(), path, n)
        })
        .collect();
    let tls = host.tls_attempts();
    t.step("the suite's DID host log");
    for (did, path, n) in seen {
        t.check(n >= 1, format!("a fetch of {path} for {did}"), format!("{n} fetches"));
    }
    // DID-13: the host speaks plain HTTP on a loopback name, which a resolver may use when configured to; a TLS
    // handshake on it before those plain fetches is an https attempt that fell back to http.
    t.check(
        tls == 0,
        "no https attempt before the plain-http fetches (a resolver never falls back from https to http)",
        format!("{tls} connections opened with a TLS handshake"),
    );
    Ok(())
}

async fn cache(t: &mut Trial<'_>) -> Outcome {
    let plan = signed_plan(t)?;
    host(t)?;
    resolvable(t, &plan).await?;
    let path = DidHost::path_of(&super::signature::identity_of(&plan).did);
    let before = host(t)?.hits(&path);
    for i in 1..=3 {
        let r =
            t.send(format!("signed NEGOTIATE #{i}"), negotiate_signed(t, &plan, super::signature::sig(&plan))).await?;
        t.expect_status(&r, 200);
    }
    let after = host(t)?.hits(&path);
    t.step("the suite's DID host log");
    t.check(after - before <= 1, format!("at most one fetch of {path}"), format!("{} fetches", after - before));
    Ok(())
}

async fn fault_case(t: &mut Trial<'_>, case: &str, status: u16, code: &str) -> Outcome {
    let plan = signed_plan(t)?;
    host(t)?;
    resolvable(t, &plan).await?;
    let id = host(t)?.faults.get(case).cloned().ok_or_else(|| Stop::Blocked(format!("no fault case {case}")))?;
    let what = crate::didhost::FAULTS.iter().find(|(n, _)| *n == case).map_or("", |(_, w)| *w);
    let r = t.send(format!("NEGOTIATE signed as {} ({what})", id.did), as_identity(t, &plan, &id)).await?;
    if code.is_empty() {
        t.expect_status(&r, status);
    } else {
        t.expect_error(&r, status, code);
    }
    if case == "redirect" {
        let hits = host(t)?.hits(&host(t)?.redirect_target());
        t.step("the suite's DID host log");
        t.check(hits == 0, "no fetch of the redirect's target", format!("{hits} fetches"));
    }
    Ok(())
}
