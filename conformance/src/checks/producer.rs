//! What the agent produces, beyond what a verifier accepts: its signatures are made over the canonical form of their
//! header and claims (JWS-2, JCS-21), which a verifier must accept either way and so never notices.

use a2a_core::jws::base64url_decode;

use super::applies::ALWAYS;
use crate::check::{Check, Outcome, Stop, Trial};
use crate::run_fn;

pub(super) fn checks() -> Vec<Check> {
    vec![Check {
        id: "responses/signatures-canonical",
        requirements: &["JWS-2", "JCS-21"],
        level: crate::report::Level::Must,
        title: "every signed response of the run has its JWS header and claims serialised in RFC 8785 canonical form (checked on the bytes, not only the signature)",
        applies: ALWAYS,
        after_all: true,
        run: run_fn!(signatures_canonical),
    }]
}

/// Why a token's header or claims are not in canonical form, if they are not.
pub(crate) fn non_canonical(token: &str) -> Option<String> {
    let mut parts = token.split('.');
    for what in ["header", "claims"] {
        let seg = parts.next().unwrap_or("");
        let Ok(bytes) = base64url_decode(seg) else { return Some(format!("the {what} is not base64url")) };
        match a2a_core::canonical::canonicalize(&bytes) {
            Ok(c) if c == bytes => {}
            Ok(c) => {
                return Some(format!(
                    "the {what} is {}; its canonical form is {}",
                    String::from_utf8_lossy(&bytes),
                    String::from_utf8_lossy(&c)
                ));
            }
            Err(e) => return Some(format!("the {what} is not JSON: {e}")),
        }
    }
    None
}

async fn signatures_canonical(t: &mut Trial<'_>) -> Outcome {
    let endpoint = t.ctx.endpoint.clone();
    let signed: Vec<_> = t
        .ctx
        .transcript()
        .into_iter()
        .filter(|e| {
            e.url == endpoint
                || e.url.starts_with(&format!("{endpoint}/"))
                || e.url.starts_with(&format!("{endpoint}?"))
        })
        .filter_map(|e| {
            let token = e.response.as_ref()?.header("a2a-signature")?.to_owned();
            Some((e.method.clone(), e.url.clone(), token))
        })
        .collect();
    if signed.is_empty() {
        return Err(Stop::Skip("the agent signs no responses".into()));
    }
    t.step(format!("{} signed responses", signed.len()));
    let mut bad = 0;
    for (method, url, token) in &signed {
        if let Some(why) = non_canonical(token) {
            bad += 1;
            if bad <= 5 {
                t.check(false, format!("a canonical header and claims in the signature of {method} {url}"), why);
            }
        }
    }
    if bad == 0 {
        t.check(true, "canonical headers and claims", format!("{} tokens", signed.len()));
    } else if bad > 5 {
        t.check(false, "canonical headers and claims", format!("{bad} of {} tokens are not", signed.len()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_over_non_canonical_bytes_are_named() {
        let key = a2a_core::keys::SigningKey::generate().expect("key");
        let canonical = crate::identity::raw_token(&key, br#"{"alg":"ES256","kid":"k"}"#, br#"{"a":1,"b":2}"#);
        assert_eq!(non_canonical(&canonical), None);
        let spaced = crate::identity::raw_token(&key, br#"{"alg":"ES256","kid":"k"}"#, br#"{"b":2, "a":1}"#);
        assert!(non_canonical(&spaced).is_some_and(|w| w.contains("claims")));
    }
}
